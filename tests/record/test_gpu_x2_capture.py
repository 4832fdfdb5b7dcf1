"""What the 2 x H200 machine recorded (issue 15, tests/data/gpu/h200x2-2026-11-30/), read again by
today's code: every real trial log explained offline as the run classified it live, the recorded
runs' trials on disjoint GPUs whenever they overlapped, and the parallel tune's points likewise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.engines.explain import explain_file
from bringup.record.results import RunResult
from tests import paths

DATA = paths.DATA / "gpu" / "h200x2-2026-11-30"
TRIALS = sorted(DATA.glob("**/trials/*/outcome.json")) + sorted(DATA.glob("slots/*/outcome.json"))


@pytest.mark.parametrize("outcome", TRIALS, ids=lambda p: f"{p.parent.parent.parent.name}/{p.parent.name}")
def test_each_real_gpu_log_explains_as_it_was_classified_live(outcome: Path):
    live = json.loads(outcome.read_text())
    offline = explain_file(outcome.parent / "server.log", engine="transformers")
    if live["status"] == "works":
        assert offline.failure_class is None, offline.evidence
        if "500 Internal Server Error" in (outcome.parent / "server.log").read_text():
            # a request that failed (/v1/models, CacheNotFound) while the server served on
            assert any("went on answering 200" in w for w in offline.warnings), offline.warnings
    else:
        assert offline.failure_class == live["failure_class"] == "missing-dependency"
        assert any("FlashAttention2" in e or "bitsandbytes" in e for e in offline.evidence), offline.evidence


def _no_shared_gpus(spans: list[tuple[float, float, set[str], str]]) -> int:
    overlaps = 0
    for i, (s1, e1, g1, n1) in enumerate(spans):
        for s2, e2, g2, n2 in spans[i + 1 :]:
            if s1 < e2 and s2 < e1:
                overlaps += 1
                assert not g1 & g2, f"{n1} and {n2} ran at once on {g1 & g2}"
    return overlaps


@pytest.mark.parametrize("name", ["run-p2.json", "run-ref.json"])
def test_recorded_parallel_runs_kept_trials_apart(name: str):
    r = RunResult.model_validate_json((DATA / name).read_text())
    assert r.validated and r.parallel == 2
    spans = [(a.clock_start_s, a.clock_end_s, set(a.gpus), f"#{a.number}") for a in r.attempts]
    assert all(s is not None and e is not None and len(g) == 1 for s, e, g, _ in spans)
    assert _no_shared_gpus(spans) >= 1  # two trials did run at once


def test_the_reference_was_computed_on_a_gpu_and_the_winner_agrees():
    r = RunResult.model_validate_json((DATA / "run-ref.json").read_text())
    assert r.reference.startswith("reference computed on GPU 0")
    ref = [p for p in r.final_probes if p.name == "reference"]
    assert ref and ref[0].passed and "agree with the reference" in ref[0].detail


def test_the_parallel_tune_ran_points_two_at_once_in_about_half_the_time():
    par, one = (json.loads((DATA / f"tune-p{k}.json").read_text()) for k in (2, 1))
    spans = [(p["clock_start_s"], p["clock_end_s"], set(p["gpus"]), str(p["knobs"])) for p in par["points"]]
    assert _no_shared_gpus(spans) >= 2
    assert len(par["points"]) == len(one["points"]) == 4
    assert par["clock_end_s"] < 0.6 * one["clock_end_s"]
