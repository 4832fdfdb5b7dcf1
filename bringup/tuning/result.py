"""What a tuning session produced: every point, the best, the Pareto front, a concurrency sweep."""

from __future__ import annotations

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
    # The winner's output against the model's own reference (bringup/reference.py): its trial ran
    # the reference probe, so a winner that disagreed would have been an infeasible point.
    reference: str | None = None  # where the reference came from, or why there is none
    reference_verdict: str | None = None  # "agrees: ..." / "disagrees: ..." / None (no reference)
