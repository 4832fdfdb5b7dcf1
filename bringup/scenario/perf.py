"""How long serving takes: the seam for a performance model.

Today every output token costs the scenario's `timing.per_output_token` and every prompt token
`timing.prefill_per_token`, whatever the load. A later model (throughput and latency as functions
of max-running-requests, chunked-prefill-size, memory fraction and the current load, with noise)
implements the same two methods and is picked by `perf_model_for`; nothing else changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bringup.scenario.config import EffectiveConfig
from bringup.scenario.schema import Scenario


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


def perf_model_for(sc: Scenario, cfg: EffectiveConfig) -> PerfModel:
    """The performance model for this scenario and configuration (the knobs are in cfg)."""
    return ConstantPerf(sc.timing.per_output_token, sc.timing.prefill_per_token)
