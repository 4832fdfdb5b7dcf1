"""Evaluate tuning points on a scenario's performance model, without launching anything.

The tuner is benchmarked where the true optimum is known: the scenario's offline evaluator
(bringup/scenario/perfsim.py, the same step model and scheduler the scenario server serves with)
gives each point's metrics, and an infeasible point is classified from the scenario rule's own
log lines by the real signatures, so the tuner learns from it exactly as from a real launch.
Each evaluation also says how many simulated seconds it stands for: the launch up to ready (or
up to where its failure strikes), as the scenario server would walk it, then the workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bringup.scenario.lifecycle import FAIL_AT
from bringup.scenario.perfsim import engine_config, expected
from bringup.scenario.schema import Scenario
from bringup.signatures import classify
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


class ScenarioOracle:
    def __init__(
        self, sc: Scenario, base: Mapping[str, Any], workload: Mapping[str, Any], noise_seed: int | None = 0
    ):
        self.sc = sc
        self.base = {k.lstrip("-"): v for k, v in base.items()}
        self.workload = dict(workload)
        self.noise_seed = noise_seed
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
        return expected(
            self.sc, self.flags(knobs), self.workload, seed=seed if seed is not None else self.noise_seed
        )

    def launch_seconds(self, knobs: Mapping[str, str], failure_phase: str | None = None) -> float:
        """Simulated seconds of a full launch (bringup/scenario/lifecycle.py's walk): to ready, or
        FAIL_AT into the phase where it fails."""
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
        m = self.metrics(knobs, None if self.noise_seed is None else self.noise_seed + call)
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
