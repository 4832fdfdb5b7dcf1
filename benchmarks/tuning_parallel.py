"""Issue 12 measure: the tuner's wall time to a good point with k slots against one.

On the scenario `tune-llama31-70b-fp8-h200-sglang`, over the 240-point grid and the workload of
benchmarks/tuning_efficiency.py (goodput under TTFT p99 <= 10 s and ITL p99 <= 200 ms at
concurrency 96, 400 requests of 1536 in / 512 out), bringup's tuner (Optuna TPE from the
scenario's baseline) runs its points through the local executor (bringup/trial/executor.py) with 1, 2,
4 and 8 slots. Every point of this grid is TP 1: one H200 each, so k slots are k GPUs of the
scenario's kind (the scenario's own machine has 2; 4 and 8 stand for a larger node of the same
GPU). Each point is evaluated offline by the scenario's performance model
(bringup/oracle/tuning.py) and lasts what it would on the scenario's simulated clock:
the launch to ready (53 s, or up to where its out-of-memory failure strikes) and then the
workload (the 400 requests at the point's own speed). Trials that overlap on the clock overlap
as the executor places them; results come back in order of simulated end.

Measured per seed: the simulated time until a point within 95% of the grid optimum (by its
noise-free value) has come back, and the launches spent by then. Median over the seeds; the
ratio is the median time with k slots over the median time with one.

Run:  .venv/bin/python benchmarks/tuning_parallel.py [--seeds 10] [--slots 1,2,4,8] [--budget 72] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bringup.core.candidate import Candidate, parse_flags
from bringup.core.clock import SimulatedClock
from bringup.observe.outcome import Outcome
from bringup.oracle.tuning import ScenarioOracle
from bringup.scenario import load_scenario, scenario_path
from bringup.trial.executor import Job, LocalExecutor, TrialRun
from bringup.trial.slots import GpuSlots
from bringup.tuning.knobs import Knob, start_point, with_base_levels
from bringup.tuning.session import TuneSession
from bringup.tuning.tuner import Tuner, grid

SCENARIO = "tune-llama31-70b-fp8-h200-sglang"
WORKLOAD = {
    "concurrency": 96,
    "input_len": 1536,
    "output_len": 512,
    "num_prompts": 400,
    "slo": {"ttft_p99": 10.0, "itl_p99": 0.2},
}
KNOBS = [
    Knob("--mem-fraction-static", ["0.8", "0.85", "0.88", "0.92"], monotone_memory=True),
    Knob("--max-running-requests", ["32", "64", "96", "128", "256"]),
    Knob("--chunked-prefill-size", ["256", "512", "1024", "2048"]),
    Knob("--cuda-graph-max-bs", ["64", "128", "256"], monotone_memory=True),
]


def tune_once(sc, base, knobs, start, seed: int, slots: int, budget: int) -> Tuner:
    """One tuning with ``slots`` points at once on the simulated clock (noise as in tuning_efficiency)."""
    oracle = ScenarioOracle(sc, base, WORKLOAD, noise_seed=1000 * (seed + 1))
    model = Candidate.make(sc.engine, sc.model.name, {})

    def run_job(job: Job) -> TrialRun:
        # the noise of the job's launch number, whichever thread runs it first
        ev = oracle.evaluate_at(job.extra["knobs"], job.seq)
        out = Outcome(status="works" if ev.status != "infeasible" else "fails")
        return TrialRun(out, Path("."), 0.0, 0.0, value=ev, simulated_s=ev.trial_s)

    def job_of(seq: int, point: dict[str, str], best: float | None) -> Job:
        return Job(seq, "search", model, False, {"knobs": point, "best": best}, need=1)

    t = Tuner(knobs, oracle, budget=budget, seed=seed, start=start, clock=SimulatedClock())
    ex = LocalExecutor(run_job, GpuSlots([str(i) for i in range(slots)]), slots, clock=SimulatedClock())
    TuneSession(t).search(ex, job_of)  # the search as `bringup tune --parallel` runs it, no repeats
    return t


def one_run(args: tuple[int, int, int]) -> tuple[int, int, float, int, float]:
    """(slots, seed) -> (slots, seed, simulated seconds to 95%, launches started by then, clock at the end)."""
    slots, seed, budget = args
    sc = load_scenario(scenario_path(SCENARIO))
    base = parse_flags(sc.baseline or "", sc.help_spec())
    truth = ScenarioOracle(sc, base, WORKLOAD, noise_seed=0)
    optimum = max(_value(truth, k) for k in grid(KNOBS))
    knobs = with_base_levels([Knob(x.flag, list(x.levels), x.monotone_memory) for x in KNOBS], base)
    t = tune_once(sc, base, knobs, start_point(knobs, base), seed, slots, budget)
    good = [
        p
        for p in t.points
        if p.evaluation.launched and p.evaluation.status == "ok" and _value(truth, p.knobs) >= 0.95 * optimum
    ]
    reach = min((p.clock_end_s for p in good if p.clock_end_s is not None), default=float("inf"))
    # launches that had started by then (those in flight beside it count: they were spent)
    spent = sum(
        1
        for p in t.points
        if p.evaluation.launched and p.clock_start_s is not None and p.clock_start_s < reach
    )
    return slots, seed, reach, spent, t.clock


_VALUES: dict[tuple, float] = {}


def _value(truth: ScenarioOracle, point: dict[str, str]) -> float:
    """A point's noise-free goodput (0 when infeasible), as the grid's optimum is measured."""
    key = tuple(sorted(point.items()))
    if key not in _VALUES:
        m = truth.metrics(point, seed=0)
        _VALUES[key] = m["goodput_rps"] if m.get("feasible") else 0.0
    return _VALUES[key]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--slots", default="1,2,4,8")
    ap.add_argument("--budget", type=int, default=72)
    ap.add_argument(
        "--jobs", type=int, default=1, help="processes (each runs whole tunings; results do not change)"
    )
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    widths = [int(x) for x in a.slots.split(",")]
    t0 = time.time()
    sc = load_scenario(scenario_path(SCENARIO))
    base = parse_flags(sc.baseline or "", sc.help_spec())
    optimum = max(_value(ScenarioOracle(sc, base, WORKLOAD, noise_seed=0), k) for k in grid(KNOBS))
    tasks = [(k, seed, a.budget) for k in widths for seed in range(a.seeds)]
    if a.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
            runs = pool.map(one_run, tasks)
    else:
        runs = [one_run(x) for x in tasks]
    rows = []
    for k in widths:
        mine = sorted((r for r in runs if r[0] == k), key=lambda r: r[1])
        times = [r[2] for r in mine]
        rows.append(
            {
                "slots": k,
                "median_s_to_95": statistics.median(times),
                "times_s": times,
                "median_launches_to_95": statistics.median(r[3] for r in mine),
                "reached": sum(1 for x in times if x != float("inf")),
                "median_end_s": statistics.median(r[4] for r in mine),
            }
        )
    one = next((r["median_s_to_95"] for r in rows if r["slots"] == 1), None)
    for r in rows:
        r["ratio"] = r["median_s_to_95"] / one if one else None
        r["median_ratio_per_seed"] = (
            statistics.median(x / y for x, y in zip(r["times_s"], rows[0]["times_s"], strict=True))
            if rows[0]["slots"] == 1
            else None
        )

    c = Console()
    tab = Table(
        title=f"Tuning in parallel on {SCENARIO} ({len(grid(KNOBS))}-point grid, optimum {optimum:.3f} req/s "
        f"goodput; budget {a.budget} launches; median over {a.seeds} seeds; simulated clock)"
    )
    for col in (
        "slots",
        "time to 95% (min)",
        "launches by then",
        "seeds reaching 95%",
        "ratio to 1 slot",
        "median per-seed ratio",
        f"all {a.budget} launches (min)",
    ):
        tab.add_column(col)
    for r in rows:
        tab.add_row(
            str(r["slots"]),
            f"{r['median_s_to_95'] / 60:.1f}",
            f"{r['median_launches_to_95']:.1f}",
            f"{r['reached']}/{a.seeds}",
            f"{r['ratio']:.2f}" if r["ratio"] is not None else "",
            f"{r['median_ratio_per_seed']:.2f}" if r["median_ratio_per_seed"] is not None else "",
            f"{r['median_end_s'] / 60:.1f}",
        )
    c.print(tab)
    c.print(f"total {time.time() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps({"optimum": optimum, "budget": a.budget, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
