"""Lessons that travel, on the real vLLM CPU build (issue 37): a lesson exported from a real run
makes the next run, from a fresh journal, validate in one launch; a lesson learned with real SGLang
0.5.16 on the H200 changes nothing here.

The first run is the session's `vllm_multifault` (conftest.py: four mistakes, five launches), so the
only launches this file adds are the next run's one and one baseline launch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import VLLM_KEY, bringup
from tests.multifault_util import VLLM_MISTAKES, baseline_of
from tests.paths import DATA

pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]
# Exported by `bringup lessons export` from the real SGLang 0.5.16 run on the H200 of
# tests/data/gpu/h200-2026-12-03b (sglang-mistakes): tests/data/lessons/README.md
SGLANG_H200 = DATA / "lessons" / "sglang-0.5.16-h200.yaml"
BASELINE = baseline_of(VLLM_MISTAKES, f"--api-key={VLLM_KEY}")


def _run(model: Path, runs: Path, *extra: str) -> dict:
    rc, d, _, err = bringup(
        "run", "--engine", "vllm", "--model", str(model), "--baseline", BASELINE, "--runs-dir", str(runs),
        "--no-minimize", "--json", "--timeout", "300", "--hang-timeout", "120", *extra, timeout=1500,
    )  # fmt: skip
    assert d is not None, err[-3000:]
    return d


def test_a_lesson_from_a_real_run_validates_the_next_run_in_one_launch(vllm_multifault, tiny_model, tmp_path):
    assert vllm_multifault["validated"] and vllm_multifault["launches"] > 1
    team = tmp_path / "team"
    rc, _, out, err = bringup(
        "lessons", "export", vllm_multifault["run_dir"], "-o", f"{team}/", check_json=False
    )
    assert rc == 0, err
    (path,) = team.glob("*.yaml")
    text = path.read_text()
    assert VLLM_KEY not in text and str(tmp_path) not in text and "/tmp/" not in text  # no secret, no path
    learned = yaml.safe_load(text)["lessons"]
    assert learned and all(ls["scope"]["device"] == "cpu" for ls in learned)
    d = _run(tiny_model, tmp_path / "fresh", "--lessons", str(team), "--lessons", str(SGLANG_H200))
    assert d["validated"] and d["launches"] == 1, d["attempts"]
    assert d["journal_priors"] == 0  # a fresh journal: the lessons alone
    assert {u["id"] for u in d["lessons"]} == {ls["id"] for ls in learned}  # not the SGLang one
    assert all(u["how"] == "exact" and u["first"] for u in d["lessons"])


def test_a_lesson_of_sglang_on_the_h200_changes_nothing_on_the_vllm_cpu_build(
    vllm_multifault, tiny_model, tmp_path
):
    d = _run(tiny_model, tmp_path / "runs", "--lessons", str(SGLANG_H200), "--max-launches", "1")
    assert d["lessons"] == [] and d["lessons_refused"] == []
    first, before = d["attempts"][0], vllm_multifault["attempts"][0]
    assert (first["changes"], first["p_success"], first["reasons"]) == (
        before["changes"],
        before["p_success"],
        before["reasons"],
    )
    notes = d["strategy_state"]["notes"]
    assert any("1 out of reach" in n for n in notes) and not any(n.startswith("expected") for n in notes)
