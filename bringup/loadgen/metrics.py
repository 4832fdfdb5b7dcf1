"""From request records to the numbers a person or the tuner reads.

Definitions (docs/loadgen.md repeats them):
- duration: from the first request released to the last one finished (or to an early stop).
- throughputs count successful requests only: requests/s, output tokens/s, and
  (input + output) tokens/s, each over the duration.
- percentiles are numpy's linear interpolation (as vllm bench serve); ITL percentiles pool the
  gaps of every successful request; TPOT only covers requests with more than one output token.
- a request is *good* when it succeeded and, for every SLO, its own value is within the
  target: its TTFT, its TPOT (0 for a single token, as vLLM), its E2E, and for ITL its own
  statistic (the SLO's p99, mean, ...) over its gaps. Goodput = good requests / duration
  (req/s) and their output tokens / duration (tok/s); attainment = good / all requests sent.
- aggregate check: each SLO's statistic over all successful requests against its target.
  `slos_met` is true only when every check passes and no request failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from bringup.loadgen.client import RequestRecord
from bringup.loadgen.config import SLO

STAT_KEYS = ("mean", "p50", "p90", "p99")


def stat_value(values: Sequence[float], stat: str) -> float:
    if stat == "mean":
        return float(np.mean(values))
    if stat == "max":
        return float(np.max(values))
    return float(np.percentile(values, float(stat[1:])))


class Stats(BaseModel):
    """Distribution of one latency in milliseconds (all None when there is no sample)."""

    n: int = 0
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values_s: Sequence[float]) -> Stats:
        if not len(values_s):
            return cls()
        a = np.asarray(values_s, dtype=float) * 1e3
        p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99])
        return cls(
            n=len(a),
            mean=float(a.mean()),
            std=float(a.std()),
            min=float(a.min()),
            p50=float(p50),
            p90=float(p90),
            p95=float(p95),
            p99=float(p99),
            max=float(a.max()),
        )


class SLOCheck(BaseModel):
    slo: str  # e.g. ttft_p99
    target_ms: float
    measured_ms: float | None  # None: no sample (e.g. no successful request)
    met: bool
    good_requests: int  # requests whose own value meets this target


class BenchSummary(BaseModel):
    point: str
    concurrency: int | None = None
    request_rate: float | None = None
    max_concurrency: int | None = None
    num_requests: int = 0  # sent (cancelled ones included)
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    duration_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    request_throughput: float = 0.0
    output_throughput: float = 0.0
    total_token_throughput: float = 0.0
    ttft_ms: Stats = Field(default_factory=Stats)
    itl_ms: Stats = Field(default_factory=Stats)
    tpot_ms: Stats = Field(default_factory=Stats)
    e2e_ms: Stats = Field(default_factory=Stats)
    queue_ms: Stats = Field(default_factory=Stats)  # client-side wait for a concurrency slot
    mean_tokens_per_chunk: float | None = None
    output_tokens_from_usage: bool = True  # False: some counts are chunk counts
    good_requests: int | None = None  # None: no SLO given
    request_goodput: float | None = None
    output_goodput: float | None = None
    slo_attainment: float | None = None
    slo_checks: list[SLOCheck] = Field(default_factory=list)
    slos_met: bool | None = None
    stopped_early: bool = False
    stop_reason: str | None = None
    errors: dict[str, int] = Field(default_factory=dict)

    def flat(self) -> dict[str, Any]:
        """One flat row (CSV, sweep tables, the tuner's objective)."""
        row: dict[str, Any] = {
            k: getattr(self, k)
            for k in (
                "point",
                "concurrency",
                "request_rate",
                "max_concurrency",
                "num_requests",
                "completed",
                "failed",
                "cancelled",
                "duration_s",
                "input_tokens",
                "output_tokens",
                "request_throughput",
                "output_throughput",
                "total_token_throughput",
            )
        }
        for name in ("ttft", "itl", "tpot", "e2e"):
            st: Stats = getattr(self, f"{name}_ms")
            for k in STAT_KEYS:
                row[f"{name}_{k}_ms"] = getattr(st, k)
        row.update(
            mean_tokens_per_chunk=self.mean_tokens_per_chunk,
            good_requests=self.good_requests,
            request_goodput=self.request_goodput,
            output_goodput=self.output_goodput,
            slo_attainment=self.slo_attainment,
            slos_met=self.slos_met,
            stopped_early=self.stopped_early,
            stop_reason=self.stop_reason,
        )
        return row

    def __getitem__(self, key: str) -> Any:
        return self.flat()[key]


def _request_value(rec: RequestRecord, slo: SLO) -> float:
    if slo.metric == "ttft":
        return rec.ttft_s if rec.ttft_s is not None else float("inf")
    if slo.metric == "e2e":
        return rec.e2e_s if rec.e2e_s is not None else float("inf")
    if slo.metric == "tpot":
        return rec.tpot_s or 0.0
    return stat_value(rec.itl_s, slo.stat) if rec.itl_s else 0.0


def meets(rec: RequestRecord, slos: Sequence[SLO]) -> bool:
    """Is this request good under every target? (Failed requests never are.)"""
    return rec.ok and all(_request_value(rec, s) <= s.target_s for s in slos)


def summarize(
    records: Sequence[RequestRecord], duration_s: float, slos: Sequence[SLO], point: str, **shape: Any
) -> BenchSummary:
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok and not r.cancelled]
    dur = max(duration_s, 1e-9)
    s = BenchSummary(point=point, **shape)
    s.num_requests = len(records)
    s.completed, s.failed = len(ok), len(failed)
    s.cancelled = sum(r.cancelled for r in records)
    s.duration_s = duration_s
    s.input_tokens = sum(r.input_tokens or 0 for r in ok)
    s.output_tokens = sum(r.output_tokens for r in ok)
    s.request_throughput = len(ok) / dur
    s.output_throughput = s.output_tokens / dur
    s.total_token_throughput = (s.input_tokens + s.output_tokens) / dur
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2es = [r.e2e_s for r in ok if r.e2e_s is not None]
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    itls = [g for r in ok for g in r.itl_s]
    s.ttft_ms, s.e2e_ms, s.tpot_ms, s.itl_ms = (
        Stats.of(ttfts),
        Stats.of(e2es),
        Stats.of(tpots),
        Stats.of(itls),
    )
    s.queue_ms = Stats.of([r.queue_s for r in records if not r.cancelled])
    chunks = sum(r.chunks for r in ok)
    s.mean_tokens_per_chunk = s.output_tokens / chunks if chunks else None
    s.output_tokens_from_usage = all(r.output_tokens_source == "usage" for r in ok)
    s.errors = dict(Counter((r.error or "?")[:200] for r in failed).most_common(20))
    if slos:
        pooled = {"ttft": ttfts, "e2e": e2es, "tpot": tpots, "itl": itls}
        for slo in slos:
            vals = pooled[slo.metric]
            measured = stat_value(vals, slo.stat) if vals else None
            s.slo_checks.append(
                SLOCheck(
                    slo=slo.name,
                    target_ms=slo.target_s * 1e3,
                    measured_ms=None if measured is None else measured * 1e3,
                    met=measured is not None and measured <= slo.target_s,
                    good_requests=sum(1 for r in ok if _request_value(r, slo) <= slo.target_s),
                )
            )
        good = [r for r in ok if meets(r, slos)]
        s.good_requests = len(good)
        s.request_goodput = len(good) / dur
        s.output_goodput = sum(r.output_tokens for r in good) / dur
        sent = s.num_requests - s.cancelled
        s.slo_attainment = len(good) / sent if sent else None
        s.slos_met = bool(ok) and not failed and all(c.met for c in s.slo_checks)
    return s
