"""`bringup tune`'s workload reaches every point's load: mixed lengths (issue 38, where the
engines' own tuners are run on vLLM's random dataset with a range ratio) as well as fixed ones."""

from __future__ import annotations

from pathlib import Path

from bringup.session.tuning import TuneSettings, Tuning
from tests.conftest import TUNE_SCENARIO


def test_a_range_ratio_makes_every_points_prompts_of_mixed_lengths(tmp_path: Path) -> None:
    t = Tuning(
        TuneSettings(scenario=str(TUNE_SCENARIO), range_ratio=0.5, input_len=128, output_len=64), tmp_path
    )
    t.prepare()
    cfg = t.evaluator.bench_cfg
    assert cfg.range_ratio == 0.5 and (cfg.in_range_ratio, cfg.out_range_ratio) == (0.5, 0.5)
    assert TuneSettings().range_ratio == 0.0  # fixed lengths unless asked
