"""Load generator: streamed OpenAI-API requests, timed per token, summarised as throughput,
latency percentiles and goodput under SLOs. CLI: ``bringup bench``; the tuner calls
`run_bench` / `bench` (one point) or `run_sweep` / `sweep` (several)."""

from bringup.loadgen.client import RequestRecord
from bringup.loadgen.config import SLO, BenchConfig, BenchError, parse_duration, parse_slos
from bringup.loadgen.metrics import BenchSummary, SLOCheck, Stats, summarize
from bringup.loadgen.output import write_results
from bringup.loadgen.runner import (
    BenchResult,
    StopFn,
    arrival_times,
    bench,
    prepare,
    run_bench,
    run_sweep,
    slo_abort,
    sweep,
)
from bringup.loadgen.workload import Prompt

__all__ = [
    "SLO",
    "BenchConfig",
    "BenchError",
    "BenchResult",
    "BenchSummary",
    "Prompt",
    "RequestRecord",
    "SLOCheck",
    "Stats",
    "StopFn",
    "arrival_times",
    "bench",
    "parse_duration",
    "parse_slos",
    "prepare",
    "run_bench",
    "run_sweep",
    "slo_abort",
    "summarize",
    "sweep",
    "write_results",
]
