"""A launch script's --served-model-name is the user's own setting: bringup launches it, finds the
name the server answers to at /v1/models, and probes by that name (issue 36's item 1: no baseline
setting is refused or frozen unless the user pins it). Refused until 2026-12-06, when a sealed real
three-mistake bring-up on an H100 was refused before its first launch (tests/data/gpu/h100-2026-12-06)."""

from __future__ import annotations

from bringup.session.run import Run
from bringup.session.settings import RunSettings
from tests.paths import ROOT

QWEN = str(ROOT / "bringup" / "data" / "scenarios" / "qwen25-7b-sm120-flashinfer-sampler-vllm.yaml")


def test_a_served_name_is_launched_kept_and_probed_by_that_name(tmp_path):
    s = RunSettings(
        scenario=QWEN,
        baseline="--max-model-len 16384 --served-model-name chat",
        keep=["--served-model-name"],
        max_launches=6,
        minimize=False,
        time_scale=0.002,
    )
    r = Run(s, tmp_path).execute()
    assert r.validated, r.stop_reason
    assert r.final_candidate is not None and r.final_candidate["flags"]["--served-model-name"] == "chat"
    assert "--served-model-name chat" in (r.final_command or "")
