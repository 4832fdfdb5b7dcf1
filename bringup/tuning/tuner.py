"""The tuner: Optuna over performance knobs, for the best goodput (or a Pareto front).

A launch that fails is classified by the trial runner and becomes an infeasible point, not a
crash; an out-of-memory failure also rules out every configuration that needs at least as much
memory (knobs marked monotone), so those are never launched. A point that is clearly worse than
the best so far is stopped early by the benchmark's stop hook. The same configuration is never
launched twice.

Points can run k at once (`run` with an executor, bringup/trial/executor.py): the tuner asks Optuna for
a point whenever a slot is free (the TPE sampler treats points still in flight as a constant
liar, so a batch spreads out instead of asking k times for the same guess), each on its own GPUs
and port, and tells each result as it arrives. A point Optuna asks for again while it is still
running is not launched twice: that ask is told the running point's result when it comes. Each
point records the run's clock when it started and ended (simulated seconds on a scenario), so the
time to a good point can be compared between one slot and several. The study can live in a
shared Optuna storage (a journal file in the tune folder) that other processes could join.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import optuna

from bringup.core.clock import Clock, clock_for
from bringup.knowledge.conditions import as_number
from bringup.observe.signatures import signature_by_id
from bringup.trial.executor import Done, Executor, Job
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
    workload_s: float | None = None  # simulated seconds of the workload after the launch (scenarios)
    gpus: list[str] = field(default_factory=list)  # where it ran, when points ran at once
    where: str = ""  # the Ray node it ran on (host/node id); "": this machine

    @property
    def trial_s(self) -> float | None:
        """Simulated seconds the whole point stands for: its launch and its workload."""
        if self.simulated_s is None and self.workload_s is None:
            return None
        return (self.simulated_s or 0.0) + (self.workload_s or 0.0)


Evaluate = Callable[[dict[str, str], float | None], Evaluation]
# A point to run through an executor: (seq, knobs, best so far) -> the job, with its GPU need.
# The executor's run function returns a TrialRun whose ``value`` is the point's Evaluation.
JobOf = Callable[[int, dict[str, str], float | None], Job]


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
    clock_start_s: float | None = None  # the run's clock when the point started (launched points)
    clock_end_s: float | None = None  # ... and when its result came back


class Tuner:
    def __init__(
        self,
        knobs: list[Knob],
        evaluate: Evaluate,
        objective: Objective = "goodput",
        budget: int = 20,
        seed: int = 0,
        sampler: Literal["tpe", "random", "grid"] = "tpe",
        predicted_infeasible: Callable[[dict[str, str]], str | None] | None = None,
        on_point: Callable[[Point], None] | None = None,
        latency_metric: str = "e2e_p99_s",
        start: dict[str, str] | None = None,
        storage: optuna.storages.BaseStorage | str | None = None,
        study_name: str | None = None,
        simulated: bool = False,
        clock: Clock | None = None,
    ):
        if not knobs:
            raise ValueError(
                "no knobs to tune: this engine version offers none of the known ones (see --knob)"
            )
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
        self.storage = storage  # None: in memory; else a shared Optuna storage (journal file, RDB URL)
        self.study_name = study_name
        # The tuning's clock (the engine's; without one, ``simulated`` says which kind): the
        # points' simulated seconds on a scenario, else wall time. ``clock`` is its reading when
        # the last point came back.
        self.run_clock = clock or clock_for(simulated)
        self.clock = 0.0
        self.lost: list[str] = []  # points lost with their Ray node (and run again): "#seq on node: why"

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
            self.infeasible_regions.append(
                (
                    bounds,
                    same,
                    direction,
                    f"{ev.failure_class} at " + ", ".join(f"{f} {knobs[f]}" for f in bounds),
                )
            )

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
    def _study(self, parallel: bool = False) -> optuna.Study:
        sampler: optuna.samplers.BaseSampler
        where: dict[str, Any] = {"storage": self.storage, "study_name": self.study_name}
        if self.objective == "pareto":
            sampler = optuna.samplers.NSGAIISampler(
                seed=self.seed, population_size=max(4, min(10, self.budget // 2))
            )
            return optuna.create_study(directions=["maximize", "minimize"], sampler=sampler, **where)
        if self.sampler == "random":
            sampler = optuna.samplers.RandomSampler(seed=self.seed)
        else:
            # A few random points first, then TPE modelling the knobs jointly (they interact).
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # multivariate/group are "experimental" in Optuna
                # Several at once: points in flight count as already seen at the worst value so far
                # (a constant liar), so the next ask goes elsewhere. One at a time, nothing is in
                # flight at an ask and the sampler is the sequential one.
                sampler = optuna.samplers.TPESampler(
                    seed=self.seed,
                    n_startup_trials=max(3, min(6, self.budget // 4)),
                    multivariate=True,
                    group=True,
                    constant_liar=parallel,
                )
        return optuna.create_study(direction="maximize", sampler=sampler, **where)

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
            return self._add(knobs, self._predicted(why))
        best = self.best()
        start = self.run_clock.now()
        ev = self.evaluate(knobs, best.objective if best else None)
        self.run_clock.reach(self.run_clock.end(start, ev.trial_s))
        self.clock = self.run_clock.now()
        return self._add(knobs, ev, start, self.clock)

    @staticmethod
    def _predicted(why: str) -> Evaluation:
        return Evaluation("infeasible", launched=False, reason=why, failure_class="predicted")

    def _add(
        self, knobs: dict[str, str], ev: Evaluation, start: float | None = None, end: float | None = None
    ) -> Point:
        """A point's result: learned from, cached, reported."""
        if ev.launched:
            self.launches += 1
            self._learn(knobs, ev)
        obj = (
            objective_value(ev.metrics, self.objective) if ev.launched and ev.status != "infeasible" else None
        )
        p = Point(len(self.points) + 1, knobs, ev, obj, start, end)
        self.points.append(p)
        self.cache[self._key(knobs)] = p
        if self.on_point:
            self.on_point(p)
        return p

    def run(self, executor: Executor | None = None, job_of: JobOf | None = None) -> list[Point]:
        """Search until the launch budget is spent (or every point is known). With an executor,
        points run as many at once as it has slots (``job_of`` makes each point's job)."""
        with _optuna_quiet():
            return self._run(executor, job_of)

    def _run(self, executor: Executor | None, job_of: JobOf | None) -> list[Point]:
        if executor is not None:
            if job_of is None:
                raise ValueError("an executor needs job_of to turn a point into a job")
            return self._run_parallel(executor, job_of)
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
            k.flag: optuna.distributions.IntDistribution(0, len(k.levels) - 1) for k in self.knobs
        }
        if self.start:
            study.enqueue_trial({k.flag: k.levels.index(self.start[k.flag]) for k in self.knobs})
        asks = 0
        while self.launches < self.budget and asks < self.budget * 30 and len(self.cache) < self.grid_size:
            t = study.ask(dists)
            asks += 1
            knobs = {k.flag: k.levels[int(t.params[k.flag])] for k in self.knobs}
            self._tell(study, t, self._visit(knobs))
        return self.points

    def _run_parallel(self, ex: Executor, job_of: JobOf) -> list[Point]:
        """Ask for a point whenever a slot is free, tell each result as it arrives."""
        f = _Flight(ex, job_of)
        if self.sampler == "grid":
            f.order = iter(grid(self.knobs))
        else:
            f.study = self._study(parallel=ex.width > 1)
            if self.start:
                f.study.enqueue_trial({k.flag: k.levels.index(self.start[k.flag]) for k in self.knobs})
        try:
            while True:
                self._fill(f)
                if not ex.in_flight():
                    break
                self._deliver(f, ex.wait())
        finally:
            ex.close()
        return self.points

    def _fill(self, f: _Flight) -> None:
        """Start points while slots are free; a point whose GPUs are taken waits for them."""
        while not f.exhausted and len(f.ex.in_flight()) < f.ex.width:
            if f.waiting is None:
                f.waiting = self._next_job(f)
                if f.waiting is None:
                    continue  # answered without a launch, or nothing more to ask
            t, knobs, job = f.waiting
            if not f.ex.fits(job):
                return  # what is in flight reports first
            f.waiting = None
            f.seq += 1
            f.flying[self._key(knobs)] = (t, knobs)
            f.ex.submit(job)

    def _next_job(self, f: _Flight) -> tuple[optuna.trial.Trial | None, dict[str, str], Job] | None:
        """The next point to launch, or None when an ask was answered without one (already
        measured, in flight, ruled out) or the search is over (``f.exhausted``)."""
        if (
            self.launches + len(f.flying) >= self.budget
            or len(self.cache) + len(f.flying) >= self.grid_size
            or (f.study is not None and f.asks >= self.budget * 30)
        ):
            f.exhausted = True
            return None
        asked = self._ask(f)
        if asked is None:
            f.exhausted = True
            return None
        t, knobs = asked
        key = self._key(knobs)
        if key in self.cache:
            self._tell_all(f, [t], self.cache[key])
            return None
        if key in f.flying:  # told the running point's result when it comes
            f.followers.setdefault(key, []).extend([t] if t is not None else [])
            return None
        why = self._ruled_out(knobs)
        job = None
        if not why:
            best = self.best()
            job = f.job_of(f.seq + 1, knobs, best.objective if best else None)
            job.extra["knobs"] = knobs
            if not f.ex.ever_fits(job):
                why = f"needs {job.need} GPUs; this tuning has fewer"
        if why or job is None:
            self._tell_all(f, [t], self._add(knobs, self._predicted(why or "")))
            return None
        return t, knobs, job

    def _ask(self, f: _Flight) -> tuple[optuna.trial.Trial | None, dict[str, str]] | None:
        """The sampler's next point (or the grid's); None when the grid is done."""
        f.asks += 1
        if f.order is not None:
            knobs = next(f.order, None)
            return (None, knobs) if knobs is not None else None
        assert f.study is not None
        dists: dict[str, optuna.distributions.BaseDistribution] = {
            k.flag: optuna.distributions.IntDistribution(0, len(k.levels) - 1) for k in self.knobs
        }
        t = f.study.ask(dists)
        return t, {k.flag: k.levels[int(t.params[k.flag])] for k in self.knobs}

    def _deliver(self, f: _Flight, d: Done) -> None:
        """A finished point: recorded, and told to its ask and to every ask that waited on it."""
        if d.run is None:  # lost with its node (Ray): the machine's failure, not the point's; again
            self.lost.append(f"#{d.job.seq} on {d.job.where}: {d.lost_why}")
            f.ex.submit(d.job)
            return
        key = self._key(d.job.extra["knobs"])
        t, knobs = f.flying.pop(key)
        self.clock = max(self.clock, d.clock)
        p = self._add(knobs, d.run.value, d.job.sim_start, d.clock)
        self._tell_all(f, [t, *f.followers.pop(key, [])], p)

    def _tell_all(self, f: _Flight, asks: list[optuna.trial.Trial | None], p: Point) -> None:
        for t in asks:
            if t is not None:
                self._tell(f.study, t, p)

    def _tell(self, study: optuna.Study | None, t: optuna.trial.Trial, p: Point) -> None:
        assert study is not None
        ev = p.evaluation
        if self.objective == "pareto":
            if ev.status == "ok":
                study.tell(
                    t,
                    [
                        float(ev.metrics.get("output_tps") or 0.0),
                        float(ev.metrics.get(self.latency_metric) or 1e9),
                    ],
                )
            else:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            return
        # Infeasible is the worst outcome, not an error: TPE learns to stay away from it.
        study.tell(t, p.objective if p.objective is not None else 0.0)

    def pareto(self) -> list[Point]:
        ok = [p for p in self.points if p.evaluation.status == "ok"]
        front = []
        for p in ok:
            tp, lat = (
                p.evaluation.metrics.get("output_tps") or 0.0,
                p.evaluation.metrics.get(self.latency_metric) or 1e9,
            )
            dominated = any(
                (q.evaluation.metrics.get("output_tps") or 0.0) >= tp
                and (q.evaluation.metrics.get(self.latency_metric) or 1e9) <= lat
                and (
                    (q.evaluation.metrics.get("output_tps") or 0.0) > tp
                    or (q.evaluation.metrics.get(self.latency_metric) or 1e9) < lat
                )
                for q in ok
            )
            if not dominated:
                front.append(p)
        return sorted(front, key=lambda p: p.evaluation.metrics.get(self.latency_metric) or 0.0)


@contextmanager
def _optuna_quiet() -> Iterator[None]:
    """Optuna's per-trial INFO lines off while the tuner runs, and its verbosity put back after:
    a library user's own Optuna logging stayed at WARNING once a tuning had run (issue 39)."""
    was = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(was)


def grid(knobs: list[Knob]) -> list[dict[str, str]]:
    return [
        dict(zip([k.flag for k in knobs], combo, strict=True))
        for combo in itertools.product(*[k.levels for k in knobs])
    ]


@dataclass
class _Flight:
    """The batch loop's state: what is in flight, which asks wait on it, what waits for GPUs."""

    ex: Executor
    job_of: JobOf
    study: optuna.Study | None = None
    order: Iterator[dict[str, str]] | None = None  # the grid sampler's points, in order
    flying: dict[tuple, tuple[optuna.trial.Trial | None, dict[str, str]]] = field(default_factory=dict)
    followers: dict[tuple, list[optuna.trial.Trial]] = field(default_factory=dict)
    waiting: tuple[optuna.trial.Trial | None, dict[str, str], Job] | None = None  # asked, no GPUs yet
    asks: int = 0
    seq: int = 0  # points launched
    exhausted: bool = False
