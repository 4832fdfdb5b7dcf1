"""What a tuning session produced: every point, the best, the Pareto front, a concurrency sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field


class TunePoint(BaseModel):
    number: int
    knobs: dict[str, Any]  # flag -> value, on top of the base configuration
    status: Literal["ok", "infeasible", "pruned"]
    failure_class: str | None = None  # infeasible: what the trial runner classified
    phase: str | None = None
    evidence: str | None = None
    metrics: dict[str, float] = Field(
        default_factory=dict
    )  # goodput_rps, output_tps, ttft_p99_s, itl_p99_s, ...
    objective: float | None = None  # the value tuned for (higher is better)
    launch_s: float = 0.0  # real seconds of the launch and the benchmark
    simulated_s: float | None = None  # scenarios: simulated seconds of the launch
    trial_dir: str = ""
    command: str = ""
    # The tuning's clock (simulated seconds on a scenario, wall seconds since the tuning started
    # otherwise) when the point started and when its result came back: points that ran at once
    # overlap on it. None: ruled out without a launch.
    clock_start_s: float | None = None
    clock_end_s: float | None = None
    gpus: list[str] = Field(default_factory=list)  # its CUDA_VISIBLE_DEVICES when points ran at once
    where: str = ""  # the Ray node it ran on (host/node id) with --ray; "": this machine


class SweepPoint(BaseModel):
    concurrency: float  # or request rate, per `mode`
    mode: Literal["concurrency", "rate"] = "concurrency"
    output_tps: float
    rps: float
    goodput_rps: float | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p99_s: float | None = None


class RepeatRun(BaseModel):
    """One launch of the repeat phase (bringup/tuning/repeats.py)."""

    number: int  # the configuration's point number in the search
    round: int  # 1, 2, ...; 0: the round measured side by side (a shared host)
    status: Literal["ok", "rejected", "infeasible", "pruned"]  # rejected: it had failed requests
    value: float | None = None  # the objective; None when the run is not a sample
    beside: bool = False  # measured while the other configurations ran on the same host
    why: str = ""
    metrics: dict[str, float] = Field(default_factory=dict)
    trial_dir: str = ""
    launch_s: float = 0.0


class Spread(BaseModel):
    """A configuration's repeated measurements: the samples and their spread."""

    number: int
    knobs: dict[str, Any]
    role: Literal["baseline", "finalist"]
    search_value: float | None = None  # its one measurement in the search (not in the test)
    samples: list[float] = Field(default_factory=list)  # accepted runs measured alone, in order
    n: int = 0
    median: float | None = None
    mad: float | None = None  # median absolute deviation (unscaled)
    ci_lo: float | None = None  # a distribution-free interval for the median (order statistics)
    ci_hi: float | None = None
    ci_coverage: float | None = None  # its exact coverage
    p_value: float | None = None  # finalists: the test against the baseline
    gain: float | None = None  # median - the baseline's median
    noise: float | None = None  # the larger 1.4826 x MAD of the two
    passed: bool = False
    dropped: str = ""  # why it left the repeats
    failed: str = ""  # the baseline: why it does not work
    beside_value: float | None = None  # measured beside the others (a shared host)


class RepeatReport(BaseModel):
    """The repeat phase: the rule, how many rounds it took, the verdict, every spread."""

    rule: str
    test: str
    alpha: float
    level: float  # alpha' each comparison is held to
    looks: list[int] = Field(default_factory=list)
    finalists: int = 0
    min_rounds: int = 0
    max_rounds: int = 0
    rounds: int = 0
    launches: int = 0
    settled: bool = False  # False: the repeat budget ran out before the order was settled
    verdict: str = ""
    winner: int | None = None  # None: the baseline is kept
    beats_baseline: bool = False
    baseline: int | None = None
    spreads: list[Spread] = Field(default_factory=list)
    runs: list[RepeatRun] = Field(default_factory=list)
    shared_host: bool = False  # the search ran points side by side on this host (--parallel)
    interference: float | None = None  # median share a point loses beside the others
    wall_s: float = 0.0
    simulated_s: float | None = None


class TuneResult(BaseModel):
    tune_id: str
    run_dir: str
    engine: str
    engine_version: str | None = None
    model: str
    base_command: str
    objective: Literal["goodput", "throughput", "pareto"]
    slo: dict[str, float] = Field(default_factory=dict)  # e.g. {"ttft_p99": 2.0, "itl_p99": 0.05} (seconds)
    workload: dict[str, Any] = Field(default_factory=dict)
    knobs: dict[str, list[Any]] = Field(default_factory=dict)  # the searched levels per flag
    points: list[TunePoint] = Field(default_factory=list)
    best: TunePoint | None = None
    best_command: str | None = None
    pareto: list[int] = Field(default_factory=list)  # point numbers on the throughput / p99 latency front
    pareto_latency: str = "e2e_p99_s"  # the latency metric of that front
    sweep: list[SweepPoint] = Field(default_factory=list)  # the best configuration under rising load
    launches: int = 0
    grid_size: int | None = None
    wall_seconds: float = 0.0
    simulated_hours: float | None = None  # the launches' simulated seconds, summed
    parallel: int = 1  # points at once, at most
    clock: Literal["simulated", "wall"] = "wall"  # what the points' clock_*_s count
    clock_end_s: float | None = None  # the clock when the last point came back (before the sweep)
    # Points lost with their Ray node ("#seq on host/node: why"): each ran again, none is a point.
    lost_trials: list[str] = Field(default_factory=list)
    # The winner's output against the model's own reference (bringup/verify/reference.py): its trial ran
    # the reference probe, so a winner that disagreed would have been an infeasible point.
    reference: str | None = None  # where the reference came from, or why there is none
    reference_verdict: str | None = None  # "agrees: ..." / "disagrees: ..." / None (no reference)
    # The repeat phase (bringup/tuning/repeats.py); None: none was run (--repeats 0). With it,
    # `best` is its verdict: the winner beyond noise, or the baseline kept.
    repeats: RepeatReport | None = None
    search_best: int | None = None  # the point the search alone would have named (one measurement)


def load_tunes(run_dir: Path) -> list[TuneResult]:
    """Every tuning session saved under `<run_dir>/tune/<tune_id>/tune.json`, oldest first."""
    files = sorted(Path(run_dir).glob("tune/*/tune.json"), key=lambda p: (p.stat().st_mtime, p.name))
    out = []
    for f in files:
        try:
            out.append(TuneResult.model_validate_json(f.read_text()))
        except ValueError as e:
            raise ValueError(f"{f}: not a tuning result ({e})") from e
    return out
