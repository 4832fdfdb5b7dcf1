"""The tuner: Optuna over performance knobs, for the best goodput (or a Pareto front).

A launch that fails is classified by the trial runner and becomes an infeasible point, not a
crash; an out-of-memory failure also rules out every configuration that needs at least as much
memory (knobs marked monotone), so those are never launched. A point that is clearly worse than
the best so far is stopped early by the benchmark's stop hook. The same configuration is never
launched twice.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, cast

import optuna

from bringup.conditions import as_number
from bringup.signatures import signature_by_id
from bringup.tuning.knobs import Knob

Objective = Literal["goodput", "throughput", "pareto"]


@dataclass
class Evaluation:
    status: Literal["ok", "infeasible", "pruned"]
    metrics: dict[str, float] = field(default_factory=dict)
    failure_class: str | None = None
    phase: str | None = None
    evidence: str | None = None
    signature: str | None = None
    launch_s: float = 0.0
    simulated_s: float | None = None
    trial_dir: str = ""
    command: str = ""
    launched: bool = True
    reason: str = ""


Evaluate = Callable[[dict[str, str], float | None], Evaluation]


def objective_value(metrics: dict[str, float], objective: Objective) -> float:
    """Higher is better. Goodput counts requests that met every SLO; without SLOs it is the
    request rate. Throughput is output tokens per second."""
    if objective == "throughput":
        return float(metrics.get("output_tps") or 0.0)
    g = metrics.get("goodput_rps")
    return float(g if g is not None else metrics.get("rps") or 0.0)


@dataclass
class Point:
    number: int
    knobs: dict[str, str]
    evaluation: Evaluation
    objective: float | None


class Tuner:
    def __init__(self, knobs: list[Knob], evaluate: Evaluate, objective: Objective = "goodput", budget: int = 20,
                 seed: int = 0, sampler: Literal["tpe", "random", "grid"] = "tpe",
                 predicted_infeasible: Callable[[dict[str, str]], str | None] | None = None,
                 on_point: Callable[[Point], None] | None = None,
                 latency_metric: str = "e2e_p99_s", start: dict[str, str] | None = None):
        if not knobs:
            raise ValueError("no knobs to tune: this engine version offers none of the known ones (see --knob)")
        self.knobs = knobs
        self.evaluate = evaluate
        self.objective = objective
        self.budget = budget
        self.seed = seed
        self.sampler = sampler
        self.predicted = predicted_infeasible
        self.on_point = on_point
        self.latency_metric = latency_metric
        self.start = start  # the working configuration: measured first, the point to beat
        self.points: list[Point] = []
        self.cache: dict[tuple, Point] = {}
        # (memory knob bounds, the other knobs' values, direction, why)
        self.infeasible_regions: list[tuple[dict[str, float], dict[str, str], str, str]] = []
        self.launches = 0

    @property
    def grid_size(self) -> int:
        return math.prod(len(k.levels) for k in self.knobs)

    def _key(self, knobs: dict[str, str]) -> tuple:
        return tuple((k.flag, knobs[k.flag]) for k in self.knobs)

    # -- learning from failures ------------------------------------------------------------------
    def _learn(self, knobs: dict[str, str], ev: Evaluation) -> None:
        """An out-of-memory failure at these values rules out values needing as much memory."""
        if ev.status != "infeasible" or not (ev.failure_class or "").startswith("oom-"):
            return
        sig = signature_by_id(ev.signature)
        direction = "lower"
        if sig is not None and sig.adjust:
            direction = next(iter(sig.adjust.values())).direction
        numbers = {k.flag: as_number(knobs[k.flag]) for k in self.knobs if k.monotone_memory}
        bounds = {f: v for f, v in numbers.items() if v is not None}
        # Other knobs (parallel sizes, batch limits) may be the real cause: the region only
        # covers points that share their values.
        same = {k.flag: knobs[k.flag] for k in self.knobs if not k.monotone_memory}
        if bounds:
            self.infeasible_regions.append((bounds, same, direction, f"{ev.failure_class} at " +
                                            ", ".join(f"{f} {knobs[f]}" for f in bounds)))

    def _ruled_out(self, knobs: dict[str, str]) -> str | None:
        for bounds, same, direction, why in self.infeasible_regions:
            if any(knobs[f] != v for f, v in same.items()):
                continue
            vals = {f: as_number(knobs[f]) for f in bounds}
            if direction == "lower" and all((v := vals[f]) is not None and v >= b for f, b in bounds.items()):
                return f"needs at least the memory of a failed point ({why})"
            if direction == "raise" and all((v := vals[f]) is not None and v <= b for f, b in bounds.items()):
                return f"leaves at most the memory of a failed point ({why})"
        return self.predicted(knobs) if self.predicted else None

    # -- the search ------------------------------------------------------------------------------
    def _study(self) -> optuna.Study:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler: optuna.samplers.BaseSampler
        if self.objective == "pareto":
            sampler = optuna.samplers.NSGAIISampler(seed=self.seed, population_size=max(4, min(10, self.budget // 2)))
            return optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
        if self.sampler == "random":
            sampler = optuna.samplers.RandomSampler(seed=self.seed)
        else:
            # A few random points first, then TPE modelling the knobs jointly (they interact).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # multivariate/group are "experimental" in Optuna
                sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=max(3, min(6, self.budget // 4)),
                                                     multivariate=True, group=True)
        return optuna.create_study(direction="maximize", sampler=sampler)

    def best(self) -> Point | None:
        ok = [p for p in self.points if p.evaluation.status == "ok" and p.objective is not None]
        return max(ok, key=lambda p: cast(float, p.objective)) if ok else None  # ok: objective is set

    def _visit(self, knobs: dict[str, str]) -> Point:
        """Evaluate one point, or rule it out without a launch; cached by knob values."""
        key = self._key(knobs)
        if key in self.cache:
            return self.cache[key]
        why = self._ruled_out(knobs)
        if why:
            ev = Evaluation("infeasible", launched=False, reason=why, failure_class="predicted")
            p = Point(len(self.points) + 1, knobs, ev, None)
        else:
            best = self.best()
            ev = self.evaluate(knobs, best.objective if best else None)
            self.launches += 1
            self._learn(knobs, ev)
            obj = objective_value(ev.metrics, self.objective) if ev.status != "infeasible" else None
            p = Point(len(self.points) + 1, knobs, ev, obj)
        self.points.append(p)
        self.cache[key] = p
        if self.on_point:
            self.on_point(p)
        return p

    def run(self) -> list[Point]:
        if self.sampler == "grid":  # every point in order (the exhaustive baseline)
            for knobs in grid(self.knobs):
                if self.launches >= self.budget:
                    break
                self._visit(knobs)
            return self.points
        study = self._study()
        # Knob levels are ordered (fractions, batch sizes, chunk sizes): give the sampler their
        # index as an integer, so it can model "more is better up to a point" instead of treating
        # each level as an unrelated category.
        dists: dict[str, optuna.distributions.BaseDistribution] = {
            k.flag: optuna.distributions.IntDistribution(0, len(k.levels) - 1) for k in self.knobs}
        if self.start:
            study.enqueue_trial({k.flag: k.levels.index(self.start[k.flag]) for k in self.knobs})
        asks = 0
        while self.launches < self.budget and asks < self.budget * 30 and len(self.cache) < self.grid_size:
            t = study.ask(dists)
            asks += 1
            knobs = {k.flag: k.levels[int(t.params[k.flag])] for k in self.knobs}
            self._tell(study, t, self._visit(knobs))
        return self.points

    def _tell(self, study: optuna.Study, t: optuna.trial.Trial, p: Point) -> None:
        ev = p.evaluation
        if self.objective == "pareto":
            if ev.status == "ok":
                study.tell(t, [float(ev.metrics.get("output_tps") or 0.0), float(ev.metrics.get(self.latency_metric) or 1e9)])
            else:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            return
        # Infeasible is the worst outcome, not an error: TPE learns to stay away from it.
        study.tell(t, p.objective if p.objective is not None else 0.0)

    def pareto(self) -> list[Point]:
        ok = [p for p in self.points if p.evaluation.status == "ok"]
        front = []
        for p in ok:
            tp, lat = p.evaluation.metrics.get("output_tps") or 0.0, p.evaluation.metrics.get(self.latency_metric) or 1e9
            dominated = any((q.evaluation.metrics.get("output_tps") or 0.0) >= tp
                            and (q.evaluation.metrics.get(self.latency_metric) or 1e9) <= lat
                            and ((q.evaluation.metrics.get("output_tps") or 0.0) > tp
                                 or (q.evaluation.metrics.get(self.latency_metric) or 1e9) < lat)
                            for q in ok)
            if not dominated:
                front.append(p)
        return sorted(front, key=lambda p: p.evaluation.metrics.get(self.latency_metric) or 0.0)


def grid(knobs: list[Knob]) -> list[dict[str, str]]:
    return [dict(zip([k.flag for k in knobs], combo, strict=True)) for combo in
            itertools.product(*[k.levels for k in knobs])]
