"""Evaluate tuning points on a scenario's performance model, without launching anything.

The tuner is benchmarked where the true optimum is known: the scenario's offline evaluator
(bringup/oracle/perfsim.py, the same step model and scheduler the scenario server serves with)
gives each point's metrics, and an infeasible point is classified from the scenario rule's own
log lines by the real signatures, so the tuner learns from it exactly as from a real launch.
Each evaluation also says how many simulated seconds it stands for: the launch up to ready (or
up to where its failure strikes), as the scenario server would walk it, then the workload.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from bringup.observe.signatures import classify
from bringup.oracle.perfsim import engine_config, expected
from bringup.scenario.lifecycle import FAIL_AT
from bringup.scenario.schema import Scenario
from bringup.tuning.knobs import DEFAULT
from bringup.tuning.tuner import Evaluation

METRICS = (
    "goodput_rps",
    "output_tps",
    "rps",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p99_s",
    "e2e_p99_s",
    "tpot_p99_s",
    "slo_attainment",
)


THROUGHPUTS = ("goodput_rps", "output_tps", "rps")


class ScenarioOracle:
    """``run_noise``: the sigma of a mean-one lognormal factor on each launch's throughputs (its
    latencies divided by it), drawn from ``run_seed`` and the call number: the whole-run noise of
    a shared or drifting host, at a known level, on top of (or, with ``noise_seed`` None, instead
    of) the step noise. ``cache``: one simulation per configuration (with ``noise_seed`` None the
    model is deterministic, so a benchmark of many tunings needs each point simulated once)."""

    def __init__(
        self,
        sc: Scenario,
        base: Mapping[str, Any],
        workload: Mapping[str, Any],
        noise_seed: int | None = 0,
        run_noise: float = 0.0,
        run_seed: int = 0,
        cache: dict[tuple, dict[str, Any]] | None = None,
    ):
        self.sc = sc
        self.base = {k.lstrip("-"): v for k, v in base.items()}
        self.workload = dict(workload)
        self.noise_seed = noise_seed
        self.run_noise = run_noise
        self.run_seed = run_seed
        self.cache = cache
        self.calls = 0

    def flags(self, knobs: Mapping[str, str]) -> dict[str, Any]:
        f = dict(self.base)
        for k, v in knobs.items():
            if v == DEFAULT:
                f.pop(k.lstrip("-"), None)
            else:
                f[k.lstrip("-")] = v
        return f

    def metrics(self, knobs: Mapping[str, str], seed: int | None = None) -> dict[str, Any]:
        s = seed if seed is not None else self.noise_seed
        if self.cache is None:
            return expected(self.sc, self.flags(knobs), self.workload, seed=s)
        key = (tuple(sorted(knobs.items())), s)
        if key not in self.cache:
            self.cache[key] = expected(self.sc, self.flags(knobs), self.workload, seed=s)
        return self.cache[key]

    def noisy(self, m: dict[str, Any], call: int) -> dict[str, Any]:
        """The run's metrics with its whole-run noise factor (none when run_noise is 0)."""
        if not self.run_noise:
            return m
        z = random.Random(f"bringup-run-noise/{self.run_seed}/{call}").gauss(0.0, 1.0)
        f = math.exp(self.run_noise * z - 0.5 * self.run_noise**2)
        out = dict(m)
        for k, v in m.items():
            if isinstance(v, float | int) and not isinstance(v, bool):
                if k in THROUGHPUTS:
                    out[k] = v * f
                elif k.endswith("_s") and k != "duration_s":
                    out[k] = v / f
        return out

    def launch_seconds(self, knobs: Mapping[str, str], failure_phase: str | None = None) -> float:
        """Simulated seconds of a full launch (bringup/scenario/lifecycle.py's walk): to ready, or
        FAIL_AT into the phase where it fails (kept in the cache, when there is one)."""
        if self.cache is None:
            return self._launch_seconds(knobs, failure_phase)
        key = ("launch", tuple(sorted(knobs.items())), failure_phase)
        if key not in self.cache:
            self.cache[key] = {"s": self._launch_seconds(knobs, failure_phase)}
        return float(self.cache[key]["s"])

    def _launch_seconds(self, knobs: Mapping[str, str], failure_phase: str | None) -> float:
        t = self.sc.timing
        graphs = engine_config(self.sc, self.flags(knobs)).cuda_graphs
        walk = [
            ("start", t.start),
            ("distributed-init", t.distributed_init),
            ("load-weights", t.load_weights),
            ("kv-alloc", t.kv_alloc),
            ("kernel-warmup", t.kernel_warmup),
            ("graph-capture", t.graph_capture if graphs else 0.0),
            ("warmup", t.warmup),
        ]
        total = 0.0
        for name, seconds in walk:
            if name == failure_phase:
                return total + FAIL_AT * seconds
            total += seconds
        return total

    def __call__(self, knobs: dict[str, str], best: float | None) -> Evaluation:
        self.calls += 1
        return self.evaluate_at(knobs, self.calls)

    def evaluate_at(self, knobs: Mapping[str, str], call: int) -> Evaluation:
        """The ``call``-th launch's evaluation: its noise seed depends on the call number only, so
        points run at once on threads see the same noise as one after another."""
        # each launch sees its own step noise, as repeated real measurements would
        m = self.noisy(self.metrics(knobs, None if self.noise_seed is None else self.noise_seed + call), call)
        if not m.get("feasible"):
            rule = next(
                (
                    r
                    for r in self.sc.rules
                    if r.label == m.get("failure_rule") or getattr(r, "id", None) == m.get("failure_rule")
                ),
                None,
            )
            lines = list(rule.fail.lines) if rule is not None and rule.fail is not None else []
            cls = classify(lines, self.sc.engine, m.get("failure_phase")) if lines else None
            return Evaluation(
                "infeasible",
                failure_class=cls.failure_class if cls else "hang",
                phase=m.get("failure_phase"),
                evidence=(cls.evidence[0] if cls and cls.evidence else None),
                signature=cls.signature_id if cls else None,
                simulated_s=self.launch_seconds(knobs, m.get("failure_phase")),
            )
        return Evaluation(
            "ok",
            {k: float(m[k]) for k in METRICS if m.get(k) is not None},
            simulated_s=self.launch_seconds(knobs),
            workload_s=float(m.get("duration_s") or 0.0),
        )
