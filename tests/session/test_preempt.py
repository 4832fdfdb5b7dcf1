"""Preempting a screen in flight when a likelier full launch waits for its GPUs (issue 12).

In-process runs on the scenario double (GLM-5.1 on the replayed 8-GPU machine, with knowledge):
eight screens start together, one GPU each, and the likeliest candidate's full launch (--tp 8)
needs every GPU. One screen of the batch is made slow (its trial stands for 600 simulated seconds,
as a long kernel build would), so that when a screen passes, its full launch waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from bringup.session.run import Run, RunSettings
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.slots import GpuSlots
from tests.conftest import assert_nothing_left, wait_until
from tests.paths import ROOT

SCEN = ROOT / "bringup" / "data" / "scenarios" / "glm51-nvfp4-sm120-sglang0523.yaml"
SLOW_S = 600.0


def _run(tmp_path, slow: Callable[[Job], bool]) -> Run:
    run = Run(
        RunSettings(scenario=str(SCEN), knowledge=True, minimize=False, parallel="auto", time_scale=0.01),
        tmp_path,
    )
    real = run._run_job

    def run_job(job: Job) -> TrialRun:
        r = real(job)
        if job.screen and slow(job):
            r.simulated_s = SLOW_S  # on the run's clock, this screen lasts 600 s
        return r

    run._run_job = run_job  # type: ignore[method-assign]
    return run


def _tilelang_prefill(job: Job) -> bool:
    return job.cand.flag_dict.get("--dsa-prefill-backend") == "tilelang"


@pytest.mark.slow
def test_a_slow_screen_is_preempted_by_a_likelier_full_launch_and_counts_for_nothing(tmp_path):
    run = _run(tmp_path, _tilelang_prefill)
    r = run.execute()
    assert r.validated, [(a.number, a.purpose, a.status, a.failure_class, a.evidence) for a in r.attempts]
    cancelled = [a for a in r.attempts if a.status == "cancelled"]
    assert cancelled and all(a.purpose == "screen" for a in cancelled)
    full = next(a for a in r.attempts if a.purpose == "search")
    for a in cancelled:
        assert a.failure_class is None and a.signature is None
        assert "preempted" in a.evidence and "waited for its GPUs" in a.evidence
        assert (a.p_success or 0) < (full.p_success or 0)  # the waiting launch was likelier
        # The simulated clock: it ended at the cancel, and its GPU went to the full launch then.
        assert a.clock_end_s == pytest.approx(full.clock_start_s)
        assert a.clock_end_s - a.clock_start_s < SLOW_S
        assert set(a.gpus) <= set(full.gpus)
    # Not at the end of the slow screens: once they had outlasted the others long enough that
    # cutting them short was expected to pay (p x time left > (1 - p) x work thrown away).
    passed = max(a.clock_end_s for a in r.attempts if a.purpose == "screen" and a.status == "works")
    assert full.status == "works" and passed < full.clock_start_s < SLOW_S - 100
    assert r.simulated_hours * 3600 == pytest.approx(full.clock_end_s)
    # The journal: cancelled, no failure class, the reason; the strategy learnt nothing from it.
    assert run.journal is not None and run.run_id is not None
    recs = [t for t in run.journal.trials(run.run_id) if t.outcome.status == "cancelled"]
    assert len(recs) == len(cancelled)
    seen = {o.key for o in run.strategy.observations}
    for t in recs:
        assert t.outcome.failure_class is None and not t.outcome.implicates
        assert t.extra["preempted_by"]
        assert run.strategy.predicted_key(t.candidate) not in seen
    # FINDINGS.md: a cancelled launch is in the attempts table, never among the failures explained
    text = (tmp_path / "runs" / run.run_id / "FINDINGS.md").read_text()
    assert "| cancelled |" in text
    failures = (
        text.split("## What the failures mean")[1].split("\n## ")[0]
        if "## What the failures mean" in text
        else ""
    )
    assert "cancelled" not in failures
    # A later run on this machine reads the journal: still nothing learnt from the cancelled ones.
    later = Run(RunSettings(scenario=str(SCEN), knowledge=True, parallel="auto"), tmp_path)
    later.prepare()
    later._open()
    later._learn_priors()
    assert not {later.strategy.predicted_key(t.candidate) for t in recs} & {
        o.key for o in later.strategy.observations
    }


@pytest.mark.slow
def test_a_screen_likelier_than_the_waiting_launch_is_not_preempted(tmp_path):
    # The likeliest candidate's own screen is the slow one: the next likeliest passes first and its
    # full launch waits for the slow screen's GPU rather than cancel a likelier hypothesis.
    def likeliest(job: Job) -> bool:
        f = job.cand.flag_dict
        return f.get("--dsa-prefill-backend") == f.get("--dsa-decode-backend") == "flashinfer_sparse_mla"

    r = _run(tmp_path, likeliest).execute()
    assert r.validated
    assert not [a for a in r.attempts if a.status == "cancelled"]
    slow = next(a for a in r.attempts if a.purpose == "screen" and a.clock_end_s - a.clock_start_s >= SLOW_S)
    waited = [a for a in r.attempts if a.purpose == "search"]
    assert waited and all(a.clock_start_s >= slow.clock_end_s for a in waited)
    first_pass = min(
        a.clock_end_s for a in r.attempts if a.purpose == "screen" and a.status == "works" and a is not slow
    )
    assert first_pass < slow.clock_end_s  # a full launch was ready to go, and waited


@pytest.mark.slow
def test_cancel_on_the_real_clock_tears_the_server_group_down_and_frees_its_gpus(tmp_path):
    # The scenario server as a real process on the real clock: the full --tp 8 launch takes about
    # 7 s here; a cancel one second in ends it through the trial's own teardown.
    run = Run(
        RunSettings(scenario=str(ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml")), tmp_path
    )
    run.prepare_offline()
    t = run.target

    def run_trial(job: Job) -> TrialRun:
        settings = TrialSettings(port=job.port, cancel=job.cancel)
        t0 = time.time()
        out = Trial(t.engine, job.cand, tmp_path / "t1", settings, spec=t.spec, version=t.version).run()
        return TrialRun(out, tmp_path / "t1", t0, time.time())

    ex = LocalExecutor(run_trial, GpuSlots([str(i) for i in range(8)]), width=8)
    job = Job(1, "screen", run.baseline, True, {}, need=8)
    ex.submit(job)
    assert wait_until(lambda: (tmp_path / "t1" / "server.pid").exists(), 20)
    time.sleep(1.0)
    ex.cancel(job)
    d = ex.wait()
    assert d.cancelled and d.run is not None  # cancelled, not run out to its end
    assert d.run.outcome.teardown is not None  # torn down as on any other end
    assert_nothing_left(tmp_path / "t1")
    assert ex.slots.free() == [str(i) for i in range(8)]
    ex.close()
