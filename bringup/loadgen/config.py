"""What a benchmark run is asked to do: `BenchConfig`, and latency targets (`SLO`).

Kept free of I/O so the tuner can build, compare and store configs cheaply.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bringup.guard import ranges

# Per-request latency metrics a target may name. "e2el" is vLLM's spelling of e2e.
METRICS = ("ttft", "itl", "tpot", "e2e")
_METRIC_ALIASES = {"e2el": "e2e", "latency": "e2e"}
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


class BenchError(RuntimeError):
    """A benchmark that cannot start at all (nothing listening, no model, bad workload)."""


def parse_duration(text: str) -> float:
    """'2s' -> 2.0, '50ms' -> 0.05, '500us' -> 0.0005. A bare number is refused: a target of
    '50' is ambiguous (vLLM means ms, most people mean s) and a silent 1000x error is worse
    than asking."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)\s*", text)
    if not m:
        raise ValueError(f"bad duration {text!r}: give a number with a unit, e.g. 2s, 50ms, 500us")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _stat_ok(stat: str) -> bool:
    if stat in ("mean", "max", "median"):
        return True
    m = re.fullmatch(r"p(\d+(?:\.\d+)?)", stat)
    return m is not None and 0 < float(m.group(1)) <= 100


class SLO(BaseModel):
    """One latency target, e.g. ``ttft_p99=2s``.

    Per request (goodput): the request's own value of `metric` must be <= `target_s`
    (for ITL, the request's own `stat` over its inter-token gaps). Aggregate: `stat` over
    all successful requests (ITL: over all gaps pooled) must be <= `target_s`.
    """

    metric: Literal["ttft", "itl", "tpot", "e2e"]
    stat: str = "p99"
    target_s: float = ranges.SECONDS.field()

    @field_validator("stat")
    @classmethod
    def _check_stat(cls, v: str) -> str:
        v = "p50" if v == "median" else v
        if not _stat_ok(v):
            raise ValueError(f"bad statistic {v!r}: use mean, max or pNN (e.g. p50, p99)")
        return v

    @property
    def name(self) -> str:
        return f"{self.metric}_{self.stat}"

    def __str__(self) -> str:
        return f"{self.name}={self.target_s * 1e3:g}ms"


def parse_slos(text: str | None) -> list[SLO]:
    """'ttft_p99=2s,itl_p99=50ms,e2e=10s' -> SLOs. A metric without a statistic means p99."""
    if not text:
        return []
    out: list[SLO] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"bad SLO {part!r}: expected NAME=VALUE, e.g. ttft_p99=2s")
        key, val = (s.strip() for s in part.split("=", 1))
        metric, _, stat = key.lower().partition("_")
        metric = _METRIC_ALIASES.get(metric, metric)
        if metric not in METRICS:
            raise ValueError(f"bad SLO metric {metric!r}: use one of {', '.join(METRICS)}")
        out.append(SLO(metric=metric, stat=stat or "p99", target_s=parse_duration(val)))
    return out


class BenchConfig(BaseModel):
    """Everything one benchmark (or one sweep) needs. Serialisable: the tuner stores it.

    Load shape: exactly one of `concurrency` (closed loop: N requests always in flight) or
    `request_rate` (open loop: Poisson arrivals at R/s, `inf` = all at once, optionally capped
    by `max_concurrency`). With neither, request_rate=inf (vllm bench serve's default).
    `sweep_concurrency` / `sweep_rate` run one point per value (see `run_sweep`).
    """

    # An infinite request rate must survive a JSON round trip (pydantic writes null by default).
    model_config = ConfigDict(ser_json_inf_nan="strings")

    url: str
    api_key: str | None = Field(default=None, exclude=True, repr=False)  # Bearer token; never serialised
    model: str | None = None  # None: the first id the server lists at /v1/models
    endpoint: Literal["completions", "chat"] = "completions"

    # load shape
    # Every number's range is bringup/guard/ranges.py's: a sweep of -1 or 0 was a numpy traceback
    # or a point that ran nothing (issue 40).
    num_prompts: int | None = ranges.REQUESTS.field(None)  # None: 100 synthetic, or every JSONL line
    concurrency: int | None = ranges.CONCURRENCY.field(None)
    request_rate: float | None = ranges.RATE.field(None)
    max_concurrency: int | None = ranges.CONCURRENCY.field(None)
    burstiness: float = ranges.BURSTINESS.field(1.0)  # gamma shape; 1.0 = Poisson
    sweep_concurrency: list[Annotated[int, ranges.CONCURRENCY.field()]] | None = Field(None, min_length=1)
    sweep_rate: list[Annotated[float, ranges.RATE.field()]] | None = Field(None, min_length=1)

    # workload
    input_len: int = ranges.TOKENS.field(256)
    output_len: int = ranges.TOKENS.field(64)
    range_ratio: float = ranges.SPREAD.field(0.0)
    input_range_ratio: float | None = ranges.SPREAD.field(None)
    output_range_ratio: float | None = ranges.SPREAD.field(None)
    len_dist: Literal["uniform", "normal"] = "uniform"
    prefix_len: int = ranges.PREFIX_TOKENS.field(0)
    prompts_file: Path | None = None
    tokenizer: str = "auto"  # auto | server | words | PATH (folder with tokenizer.json, or the file)
    seed: int = ranges.SEED.field(0)
    ignore_eos: bool = True
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into every request body

    # run control
    warmup: int = ranges.WARMUP.field(1)
    request_timeout_s: float = ranges.SECONDS.field(300.0)
    slos: list[SLO] = Field(default_factory=list)
    abort_factor: float | None = ranges.ABORT_FACTOR.field(None)  # stop when an SLO is exceeded x this
    abort_min_requests: int = ranges.REQUESTS.field(8)
    keep_text: bool = False  # store generated text in each request record

    @field_validator("slos", mode="before")
    @classmethod
    def _parse_slo_text(cls, v: Any) -> Any:
        return parse_slos(v) if isinstance(v, str) else v

    @field_validator("url")
    @classmethod
    def _norm_url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if not re.match(r"^https?://", v):
            v = "http://" + v
        # People paste the OpenAI base URL; the endpoints are added here.
        return v.removesuffix("/v1")

    @model_validator(mode="after")
    def _check_shape(self) -> BenchConfig:
        shapes = [
            self.concurrency is not None,
            self.request_rate is not None,
            bool(self.sweep_concurrency),
            bool(self.sweep_rate),
        ]
        if sum(shapes) > 1:
            raise ValueError("choose one of concurrency, request_rate, sweep_concurrency, sweep_rate")
        if self.max_concurrency is not None and (self.concurrency or self.sweep_concurrency):
            raise ValueError("max_concurrency caps a request rate; with concurrency it is redundant")
        return self

    @property
    def in_range_ratio(self) -> float:
        return self.range_ratio if self.input_range_ratio is None else self.input_range_ratio

    @property
    def out_range_ratio(self) -> float:
        return self.range_ratio if self.output_range_ratio is None else self.output_range_ratio

    def points(self) -> list[BenchConfig]:
        """One config per sweep point (or [self] when this is not a sweep)."""
        if self.sweep_concurrency:
            return [
                self.model_copy(update={"sweep_concurrency": None, "concurrency": c})
                for c in self.sweep_concurrency
            ]
        if self.sweep_rate:
            return [self.model_copy(update={"sweep_rate": None, "request_rate": r}) for r in self.sweep_rate]
        return [self]

    def point_label(self) -> str:
        if self.concurrency is not None:
            return f"concurrency={self.concurrency}"
        rate = self.request_rate if self.request_rate is not None else math.inf
        label = f"rate={'inf' if math.isinf(rate) else f'{rate:g}'}"
        return label + (f",max_concurrency={self.max_concurrency}" if self.max_concurrency else "")
