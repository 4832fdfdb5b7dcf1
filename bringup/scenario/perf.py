"""How long serving takes: the performance model of a scenario, given the knobs and the load.

Without a `performance:` section every output token costs the scenario's
`timing.per_output_token` and every prompt token `timing.prefill_per_token`, whatever the load
(`ConstantPerf`, requests paced one by one).

With one, the engine runs in *steps*, as SGLang's and vLLM's schedulers do (the scheduler is
`bringup/scenario/scheduler.py`): each step decodes one token for every running request and
prefills up to `--chunked-prefill-size` prompt tokens. `StepModel` prices one step from what is
in it and from the knobs read off the effective configuration (memory fraction -> KV capacity,
max running requests, chunk size, CUDA-graph max batch size, TP and DP sizes). The formulas are
in docs/scenarios.md ("Performance model"); the server and the offline evaluator
(`bringup/oracle/perfsim.py`) both use this class, so they cannot disagree.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

from bringup.knowledge.conditions import as_number
from bringup.scenario.config import ScenarioConfig
from bringup.scenario.schema import Performance, Scenario
from bringup.scenario.sizing import compute_sizing

GB = 1e9
GIB = float(1 << 30)


@dataclass(frozen=True)
class Load:
    """What the engine is doing when a step is timed."""

    running: int  # requests generating now, this one included
    prompt_tokens: int = 0


class PerfModel(Protocol):
    def prefill_seconds(self, load: Load) -> float:
        """Simulated seconds to prefill load.prompt_tokens."""
        ...

    def decode_step_seconds(self, load: Load) -> float:
        """Simulated seconds for one output token of one request."""
        ...


@dataclass(frozen=True)
class ConstantPerf:
    per_output_token: float
    prefill_per_token: float

    def prefill_seconds(self, load: Load) -> float:
        return self.prefill_per_token * load.prompt_tokens

    def decode_step_seconds(self, load: Load) -> float:
        return self.per_output_token


def _int_knob(cfg: ScenarioConfig, *dests: str) -> int | None:
    v = as_number(cfg.value(*dests))
    return int(v) if v is not None else None


def _dispatch(cfg: ScenarioConfig) -> str:
    """How requests are spread over DP replicas: SGLang's --load-balance-method (auto and
    round_robin: round robin, whatever each replica holds); vLLM balances by queue length."""
    if cfg.engine == "vllm":
        return "total_requests"
    method = str(cfg.value("load_balance_method") or "round_robin")
    return method if method in ("total_requests", "total_tokens") else "round_robin"


@dataclass(frozen=True)
class StepModel:
    """One replica's step cost, with the knobs of one configuration resolved.

    Step time (simulated seconds) for `decode` running requests, `prefill` prompt tokens and
    `kv_tokens` cached tokens read by the decoding requests:

        t = step_overhead + max(weights_read, compute * (decode + prefill))
            + kv_tokens * kv_read_per_token + eager * eager_overhead
            + [tp > 1] * (allreduce + allreduce_per_token * (decode + prefill))
        t *= exp(sigma * z - sigma^2 / 2),  z ~ N(0, 1) per step

    eager: the step runs without a CUDA graph (graphs off, a decode batch above the CUDA-graph
    max batch size, or any step that prefills: SGLang replays decode graphs only).
    """

    perf: Performance
    kv_capacity: int  # tokens in one replica's KV pool (per GPU = per replica: TP shards heads)
    max_running: int  # requests one replica runs at once
    chunk: int  # prompt tokens prefilled per step (a huge number: chunking off)
    graph_max_bs: int  # largest decode batch replayed from a CUDA graph; 0: graphs off
    tp: int
    dp: int
    weights_read_s: float  # per-GPU weights / bandwidth: the memory-bound floor of every step
    compute_per_token_s: float  # per token, per GPU (TP splits it, at tp_efficiency)
    kv_read_per_token_s: float  # per cached token read in a decode step, per GPU
    seed: int
    dispatch: str = "round_robin"  # DP: round_robin | total_requests | total_tokens (--load-balance-method)

    @classmethod
    def build(cls, sc: Scenario, cfg: ScenarioConfig) -> StepModel:
        perf = sc.performance
        if perf is None:
            raise ValueError(f"scenario {sc.name} has no performance section")
        size = compute_sizing(sc, cfg)  # the same KV and weight figures the log prints
        tp = cfg.tp
        dp = max(1, _int_knob(cfg, "dp_size", "data_parallel_size") or 1)
        chunk = _int_knob(cfg, "chunked_prefill_size", "max_num_batched_tokens")
        bw = perf.hbm_gbps * GB
        seed = perf.seed
        for flag, v in cfg.requested.items():  # the engine's own seed flag, when the command gives it
            opt = cfg.spec.get(flag)
            if opt is not None and opt.dest in ("random_seed", "seed") and (n := as_number(v)) is not None:
                seed = int(n)
        return cls(
            perf=perf,
            kv_capacity=size.kv_tokens,
            max_running=max(1, size.max_running),
            chunk=chunk if chunk is not None and chunk > 0 else 1 << 40,
            graph_max_bs=size.graph_max_bs if cfg.cuda_graphs else 0,
            tp=tp,
            dp=dp,
            weights_read_s=size.weights * GIB / bw,
            compute_per_token_s=perf.per_token_s * size.layer_fraction / (1 + (tp - 1) * perf.tp_efficiency),
            kv_read_per_token_s=size.kv_bytes_per_token / bw,
            seed=seed,
            dispatch=_dispatch(cfg),
        )

    def step_seconds(self, decode: int, prefill: int, kv_tokens: int, z: float = 0.0) -> float:
        """One step's simulated seconds; z is the step's standard normal draw (0: no noise)."""
        p = self.perf
        n = decode + prefill
        t = p.step_overhead_s + max(self.weights_read_s, self.compute_per_token_s * n)
        t += kv_tokens * self.kv_read_per_token_s
        if prefill or decode > self.graph_max_bs:
            t += p.eager_overhead_s
        if self.tp > 1:
            t += p.allreduce_s + p.allreduce_per_token_s * n
        if p.noise_sigma and z:  # mean-one lognormal: noise moves single steps, not the average
            t *= math.exp(p.noise_sigma * z - 0.5 * p.noise_sigma**2)
        return t

    def noise(self, replica: int) -> random.Random:
        """The step-noise stream of one replica: the same draws, step by step, for a given seed."""
        return random.Random(f"bringup-perf/{self.seed}/{replica}")

    # -- the PerfModel view: one request alone (noise-free), for log lines and simple callers ----
    def prefill_seconds(self, load: Load) -> float:
        steps = max(1, math.ceil(load.prompt_tokens / self.chunk))
        per = min(load.prompt_tokens, self.chunk)
        return steps * self.step_seconds(max(load.running - 1, 0), per, 0)

    def decode_step_seconds(self, load: Load) -> float:
        return self.step_seconds(max(load.running, 1), 0, 0)


def perf_model_for(sc: Scenario, cfg: ScenarioConfig) -> PerfModel:
    """The performance model for this scenario and configuration (the knobs are in cfg)."""
    if sc.performance is not None:
        return StepModel.build(sc, cfg)
    return ConstantPerf(sc.timing.per_output_token, sc.timing.prefill_per_token)
