"""Trials at once for real: a scenario bring-up on the replayed 8-GPU machine, and two real vLLM
CPU servers side by side (their own ports, logs and teardown)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import get_engine
from bringup.session.run import Run, RunSettings
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.slots import GpuSlots
from bringup.verify.probes import ProbeConfig
from tests.conftest import MEM, assert_nothing_left
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"


@pytest.mark.slow
def test_seed_scenario_in_parallel_runs_screens_side_by_side_on_disjoint_gpus(tmp_path):
    one = Run(
        RunSettings(scenario=str(SEED), knowledge=False, minimize=False, max_launches=30), tmp_path / "a"
    ).execute()
    par = Run(
        RunSettings(scenario=str(SEED), knowledge=False, minimize=False, max_launches=30, parallel="auto"),
        tmp_path / "b",
    ).execute()
    assert one.validated and par.validated
    assert par.parallel == 8 and one.parallel == 1
    # both found the seed's fix (the decode backend that keeps its answers right), each its own way
    assert (
        "--nsa-decode-backend trtllm" in par.final_command
        and "--nsa-decode-backend trtllm" in one.final_command
    )
    spans = [(a.clock_start_s, a.clock_end_s, set(a.gpus), a) for a in par.attempts]
    assert all(s is not None and e is not None and e >= s for s, e, _, _ in spans)
    overlapping = 0
    for i, (s1, e1, g1, a1) in enumerate(spans):
        for s2, e2, g2, a2 in spans[i + 1 :]:
            if s1 < e2 and s2 < e1:  # ran at the same time on the run's clock
                overlapping += 1
                assert not g1 & g2, f"#{a1.number} and #{a2.number} shared GPUs {g1 & g2}"
    assert overlapping >= 3  # screens ran side by side
    screens = [a for a in par.attempts if a.purpose == "screen"]
    assert screens and all(len(a.gpus) == 1 for a in screens)  # a few dummy layers fit one GPU
    assert all(len(a.gpus) == 8 for a in par.attempts if a.purpose == "search")  # --tp 8 takes all
    assert par.simulated_hours < one.simulated_hours
    # the findings and the journal agree on where each trial ran
    rec = json.loads((Path(par.run_dir) / "run.json").read_text())
    assert rec["settings"]["parallel"] == "auto"


@pytest.mark.engine
def test_two_real_vllm_servers_at_once_keep_their_ports_logs_and_teardown(tiny_model, tmp_path):
    engine = get_engine("vllm", sys.executable)
    spec = engine.help_spec()

    def run_trial(job: Job) -> TrialRun:
        tdir = tmp_path / f"t{job.seq}"
        settings = TrialSettings(
            timeout=300,
            hang_timeout=120,
            port=job.port,
            cancel=job.cancel,
            probe=ProbeConfig(batch_size=2, long_tokens=16),
        )
        t0 = time.time()
        out = Trial(engine, job.cand, tdir, settings, spec=spec).run()
        return TrialRun(out, tdir, t0, time.time())

    ex = LocalExecutor(run_trial, GpuSlots([]), width=2)
    for seq, seqs in ((1, 4), (2, 8)):
        cand = Candidate.make(
            "vllm", str(tiny_model), {"--gpu-memory-utilization": float(MEM), "--max-num-seqs": seqs}, {}
        )
        ex.submit(Job(seq, "search", cand, False, {}))
    done = [ex.wait(), ex.wait()]
    ex.close()
    runs = {d.job.seq: d.run for d in done}
    assert all(r is not None and r.outcome.status == "works" for r in runs.values()), [
        (r.outcome.status, r.outcome.evidence) for r in runs.values() if r
    ]
    a, b = runs[1], runs[2]
    assert a.started < b.ended and b.started < a.ended  # they ran at the same time
    ports = {int((r.tdir / "server.pid").read_text().split()[1]) for r in (a, b)}
    assert len(ports) == 2
    for r in (a, b):
        assert_nothing_left(r.tdir)
        assert "max_num_seqs" in json.dumps(r.outcome.effective)
    assert a.outcome.effective.get("max_num_seqs") == 4 and b.outcome.effective.get("max_num_seqs") == 8


@pytest.mark.slow
def test_a_shrunk_screen_that_runs_out_of_memory_blames_nothing(tmp_path):
    """DeepSeek-R1 on the replayed 8-GPU machine: its screens shrunk to one GPU run out of memory
    (the double's weights rule ignores the layer override). That says nothing about the candidate,
    so the search must not move memory flags for it, and it ends as one at a time does."""
    scen = ROOT / "bringup" / "data" / "scenarios" / "deepseek-r1-nvfp4-no-backend-sm120-vllm.yaml"
    one = Run(RunSettings(scenario=str(scen), knowledge=False, minimize=False), tmp_path / "a").execute()
    par = Run(
        RunSettings(scenario=str(scen), knowledge=False, minimize=False, parallel="auto", max_launches=30),
        tmp_path / "b",
    ).execute()
    assert par.status == one.status == "impossible"
    assert par.stop_reason.split(":")[0] == one.stop_reason.split(":")[0]
    oom = [a for a in par.attempts if a.purpose == "screen" and a.failure_class == "oom-weights"]
    assert oom and all(len(a.gpus) == 1 for a in oom)
    moved = [a for a in par.attempts if a.purpose == "search" and "gpu-memory-utilization" in a.changes]
    assert not moved, [a.changes for a in moved]
