"""The tuner's batch loop: k points at once through the local executor, on a simulated clock.

A fake evaluator gives each point a known objective and a known simulated duration, so the order
in which results come back, the clock at each end and what was in flight together are exact.
"""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.slots import GpuSlots
from bringup.tuning.tuner import Evaluation, Tuner

CAND = Candidate.make("sglang", "m", {})


def knobs():
    from bringup.tuning.knobs import Knob

    return [
        Knob("--mem", ["0.7", "0.8", "0.85", "0.9"], monotone_memory=True),
        Knob("--batch", ["16", "32", "64", "128", "256"]),
        Knob("--chunk", ["1024", "2048", "4096"]),
    ]


def value(k: dict) -> float:
    return 10 - abs(int(k["--batch"]) - 64) / 32 - abs(int(k["--chunk"]) - 2048) / 1024 + float(k["--mem"])


def duration(k: dict) -> float:
    """Simulated seconds of a point: larger batches and chunks take longer (all distinct)."""
    return 100 + int(k["--batch"]) + int(k["--chunk"]) / 100 + float(k["--mem"]) * 10


class Eval:
    """Objective and simulated duration known; records what is evaluated at the same time."""

    def __init__(self):
        self.calls: list[dict] = []
        self.running: set[tuple] = set()
        self.dup_in_flight = 0
        self.lock = threading.Lock()

    def __call__(self, k: dict, best) -> Evaluation:
        key = tuple(sorted(k.items()))
        with self.lock:
            self.calls.append(k)
            if key in self.running:
                self.dup_in_flight += 1
            self.running.add(key)
        try:
            if float(k["--mem"]) >= 0.9:
                return Evaluation(
                    "infeasible",
                    failure_class="oom-graph-capture",
                    phase="graph-capture",
                    signature="sglang-graph-capture-failed",
                    simulated_s=30.0,
                )
            return Evaluation(
                "ok", metrics={"goodput_rps": value(k)}, simulated_s=53.0, workload_s=duration(k) - 53.0
            )
        finally:
            with self.lock:
                self.running.discard(key)


def executor(ev: Eval, width: int, gpus: int | None = None) -> LocalExecutor:
    def run_job(job: Job) -> TrialRun:
        e = ev(job.extra["knobs"], job.extra.get("best"))
        return TrialRun(
            Outcome(status="works" if e.status == "ok" else "fails"),
            Path("."),
            0.0,
            0.0,
            value=e,
            simulated_s=e.trial_s,
        )

    return LocalExecutor(run_job, GpuSlots([str(i) for i in range(gpus or width)]), width, simulated=True)


def job_of(need=lambda k: 1):
    def make(seq: int, k: dict, best) -> Job:
        return Job(seq, "search", CAND, False, {"knobs": k, "best": best}, need=need(k))

    return make


def summary(t: Tuner) -> list[tuple]:
    return [(p.number, tuple(sorted(p.knobs.items())), p.evaluation.status, p.objective) for p in t.points]


def test_one_slot_through_the_executor_is_the_sequential_tuner():
    seq = Tuner(knobs(), Eval(), budget=15, seed=3, simulated=True)
    seq.run()
    one = Tuner(knobs(), Eval(), budget=15, seed=3, simulated=True)
    one.run(executor(one.evaluate, 1), job_of())
    assert summary(one) == summary(seq)
    # and the clocks agree: one after another, each point ends where the next starts
    assert [p.clock_end_s for p in one.points] == pytest.approx([p.clock_end_s for p in seq.points])
    ends = [p.clock_end_s for p in one.points if p.evaluation.launched]
    assert ends == sorted(ends) and ends[-1] == pytest.approx(
        sum(duration(p.knobs) if p.evaluation.status == "ok" else 30.0 for p in one.points)
    )


def test_k_points_at_once_come_back_in_order_of_simulated_end():
    # The grid sampler asks in a known order; three slots, durations known: the exact schedule.
    ks = knobs()[1:]  # batch x chunk, 15 points, all feasible
    ev = Eval()
    t = Tuner(ks, lambda k, b: ev({**k, "--mem": "0.8"}, b), budget=6, sampler="grid", simulated=True)

    def run_job(job: Job) -> TrialRun:
        e = ev({**job.extra["knobs"], "--mem": "0.8"}, None)
        return TrialRun(Outcome(status="works"), Path("."), 0.0, 0.0, value=e, simulated_s=e.trial_s)

    t.run(LocalExecutor(run_job, GpuSlots(["0", "1", "2"]), 3, simulated=True), job_of())
    # grid order: batch 16 x chunk 1024/2048/4096, then batch 32 x ...; d = 108 + batch + chunk/100
    d = {(b, c): 108 + b + c / 100 for b in (16, 32) for c in (1024, 2048, 4096)}
    # t=0: (16,1024) 134.24, (16,2048) 144.48, (16,4096) 164.96 start; the first back starts (32,1024)
    # at 134.24 (ends 284.48), then (32,2048) at 144.48 (ends 304.96), (32,4096) at 164.96 (345.92)
    expect = [
        ((16, 1024), 0.0),
        ((16, 2048), 0.0),
        ((16, 4096), 0.0),
        ((32, 1024), d[16, 1024]),
        ((32, 2048), d[16, 2048]),
        ((32, 4096), d[16, 4096]),
    ]
    got = [
        ((int(p.knobs["--batch"]), int(p.knobs["--chunk"])), p.clock_start_s, p.clock_end_s) for p in t.points
    ]
    assert [g[0] for g in got] == [e[0] for e in expect]  # results in order of simulated end
    for (_pt, start, end), (ept, estart) in zip(got, expect, strict=True):
        assert start == pytest.approx(estart) and end == pytest.approx(estart + d[ept])
    # three at once at t=0: the clock at the end is well under the sum of the durations
    assert t.clock == pytest.approx(d[16, 4096] + d[32, 4096]) and t.clock < sum(d.values()) / 2


def test_tpe_batches_spread_out_and_never_run_a_point_twice(tmp_path):
    ev = Eval()
    storage = optuna.storages.JournalStorage(JournalFileBackend(str(tmp_path / "optuna.journal")))
    t = Tuner(knobs(), ev, budget=24, seed=1, simulated=True, storage=storage, study_name="t")
    t.run(executor(ev, 4), job_of())
    keys = [tuple(sorted(c.items())) for c in ev.calls]
    assert len(keys) == len(set(keys)) == t.launches == 24  # never launched twice
    assert ev.dup_in_flight == 0
    launched = [p for p in t.points if p.evaluation.launched]
    # four in flight at once: at the start of the last point to start, three others were running
    starts = sorted({p.clock_start_s for p in launched})
    most = max(sum(1 for p in launched if p.clock_start_s <= s < p.clock_end_s) for s in starts)
    assert most == 4
    # the first four were asked together and ran side by side from t=0
    assert sum(1 for p in launched if p.clock_start_s == 0.0) == 4
    # every result was told to the shared study, which a second process could load
    study = optuna.load_study(study_name="t", storage=storage)
    done = [x for x in study.trials if x.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 24 and not [x for x in study.trials if x.state == optuna.trial.TrialState.RUNNING]
    # still finds a good point: within 5% of the feasible optimum
    best = t.best()
    from bringup.tuning.tuner import grid

    true = max(value(k) for k in grid(knobs()) if float(k["--mem"]) < 0.9)
    assert best is not None and best.objective >= 0.95 * true


def test_a_point_that_needs_every_gpu_runs_alone():
    # batch 256 stands for a tensor-parallel layout over both GPUs; the others take one each
    ks = knobs()[1:2]  # batch only: 5 points
    ev = Eval()
    t = Tuner(
        ks,
        lambda k, b: ev({**k, "--mem": "0.8", "--chunk": "2048"}, b),
        budget=5,
        sampler="grid",
        simulated=True,
    )

    def run_job(job: Job) -> TrialRun:
        e = ev({**job.extra["knobs"], "--mem": "0.8", "--chunk": "2048"}, None)
        return TrialRun(Outcome(status="works"), Path("."), 0.0, 0.0, value=e, simulated_s=e.trial_s)

    need = lambda k: 2 if k["--batch"] == "256" else 1  # noqa: E731
    t.run(LocalExecutor(run_job, GpuSlots(["0", "1"]), 4, simulated=True), job_of(need))
    big = next(p for p in t.points if p.knobs["--batch"] == "256")
    others = [p for p in t.points if p is not big]
    assert all(p.clock_end_s <= big.clock_start_s or p.clock_start_s >= big.clock_end_s for p in others)
    # the one-GPU points ran two at a time on the two GPUs, never more
    starts = sorted({p.clock_start_s for p in others})
    assert max(sum(1 for p in others if p.clock_start_s <= s < p.clock_end_s) for s in starts) == 2


def test_a_point_bigger_than_the_machine_is_ruled_out_not_launched():
    ks = knobs()[1:2]
    ev = Eval()
    t = Tuner(
        ks,
        lambda k, b: ev({**k, "--mem": "0.8", "--chunk": "2048"}, b),
        budget=5,
        sampler="grid",
        simulated=True,
    )

    def run_job(job: Job) -> TrialRun:
        e = ev({**job.extra["knobs"], "--mem": "0.8", "--chunk": "2048"}, None)
        return TrialRun(Outcome(status="works"), Path("."), 0.0, 0.0, value=e, simulated_s=e.trial_s)

    t.run(
        LocalExecutor(run_job, GpuSlots(["0", "1"]), 2, simulated=True),
        job_of(lambda k: 4 if k["--batch"] == "256" else 1),
    )
    big = next(p for p in t.points if p.knobs["--batch"] == "256")
    assert not big.evaluation.launched and "needs 4 GPUs" in big.evaluation.reason
    assert t.launches == 4 and len(ev.calls) == 4


@pytest.mark.slow
def test_bringup_tune_parallel_on_the_scenario(tmp_path):
    from tests.conftest import bringup, tune_args

    args = tune_args(tmp_path, "--trials", "4", "--sweep", "", "--time-scale", "0.05", "--parallel", "4")
    rc, d, _, err = bringup(*args)
    assert rc == 0, err[-2000:]
    assert d["parallel"] == 4 and d["clock"] == "simulated" and d["launches"] == 4
    pts = [p for p in d["points"] if p["failure_class"] != "predicted"]
    assert len(pts) == 4 and d["best"]["status"] == "ok"
    # the scenario's machine has 2 GPUs and every point here is TP 1: two at a time, on disjoint GPUs
    assert all(len(p["gpus"]) == 1 for p in pts)
    overlapping = [
        (p, q)
        for i, p in enumerate(pts)
        for q in pts[i + 1 :]
        if p["clock_start_s"] < q["clock_end_s"] and q["clock_start_s"] < p["clock_end_s"]
    ]
    assert overlapping and all(p["gpus"] != q["gpus"] for p, q in overlapping)
    assert sum(1 for p in pts if p["clock_start_s"] == 0.0) == 2
    # the clock at the end is less than the points' simulated seconds one after another
    serial = sum(p["clock_end_s"] - p["clock_start_s"] for p in pts)
    assert (
        d["clock_end_s"] == pytest.approx(max(p["clock_end_s"] for p in pts))
        and d["clock_end_s"] < 0.9 * serial
    )
    # each point's trial ran on its own GPUs, and the study lives in the tune folder's journal
    tune_dir = Path(d["run_dir"]) / "tune" / d["tune_id"]
    assert (tune_dir / "optuna.journal").is_file() and (tune_dir / "tune.json").is_file()
    study = optuna.load_study(
        study_name=d["tune_id"],
        storage=optuna.storages.JournalStorage(JournalFileBackend(str(tune_dir / "optuna.journal"))),
    )
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) >= 4
    # the points shared the host: the repeats measure the finalists side by side once, then alone
    rep = d["repeats"]
    assert rep["shared_host"] and rep["interference"] is not None
    beside = [r for r in rep["runs"] if r["beside"]]
    assert beside and all(r["round"] == 0 for r in beside)
    assert all(
        s["n"] == rep["rounds"] for s in rep["spreads"] if s["role"] == "finalist" and not s["dropped"]
    )
