"""The repeat phase of a tuning: the baseline and the best points measured again, interleaved.

One measurement per point names noise as a winner on a shared or drifting host. After the search,
the baseline and the top ``finalists`` points are launched again in rounds, B F1 F2 B F1 F2 ...
(interleaved, so drift in the host hits every configuration alike, not A A A B B B), until the
rule of bringup/tuning/verdict.py says the order is settled or the repeat budget is spent. Each
repeat has no early stop (its workload runs in full).

When the search ran points side by side on one host (``--parallel``), they shared it: the first
round measures every configuration beside the others at once (``beside``), then every later round
measures each alone, so the report shows how much a neighbour costs (interference), and the
verdict rests on the alone runs only: the finalists are re-measured alone before a winner is named.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bringup.tuning.result import RepeatReport, RepeatRun, Spread, TuneResult
from bringup.tuning.stats import mad, median, median_interval
from bringup.tuning.tuner import Evaluation, Objective, Point, objective_value
from bringup.tuning.verdict import (
    NO_WINNER,
    TEST_NAME,
    Arm,
    Comparison,
    Decision,
    RepeatRule,
    decide,
    drop_losers,
    interference,
)

Measure = Callable[[dict[str, str]], Evaluation]  # one launch alone, its workload in full
MeasureBeside = Callable[[list[dict[str, str]]], list[Evaluation]]  # several at once, same order


def finalists(points: list[Point], baseline: dict[str, str] | None, k: int) -> list[Point]:
    """The search's best ``k`` points that measured cleanly (no failed request), baseline aside."""
    ok = [
        p
        for p in points
        if p.evaluation.status == "ok"
        and p.objective is not None
        and not p.evaluation.metrics.get("failed")
        and p.knobs != baseline
    ]
    return sorted(ok, key=lambda p: -(p.objective or 0.0))[:k]


def baseline_arm(points: list[Point], baseline: dict[str, str] | None) -> Arm:
    p = next((p for p in points if baseline is not None and p.knobs == baseline), None)
    if p is None:
        return Arm(0, dict(baseline or {}), "baseline", failed="not measured")
    arm = Arm(p.number, p.knobs, "baseline", p.objective)
    if p.evaluation.status == "infeasible":
        arm.failed = f"{p.evaluation.failure_class or 'infeasible'} at launch"
    return arm


@dataclass
class RepeatOutcome:
    base: Arm
    arms: list[Arm]
    decision: Decision
    rounds: int
    runs: list[RepeatRun] = field(default_factory=list)
    beside: dict[int, float] = field(default_factory=dict)
    shared_host: bool = False
    wall_s: float = 0.0
    simulated_s: float = 0.0
    finalists: int = 0

    @property
    def winner(self) -> Arm | None:
        return self.decision.winner

    @property
    def launches(self) -> int:
        return len(self.runs)


class Repeats:
    def __init__(
        self,
        rule: RepeatRule,
        measure: Measure,
        objective: Objective = "goodput",
        beside: MeasureBeside | None = None,
        on_run: Callable[[RepeatRun], None] | None = None,
    ):
        self.rule = rule
        self.measure = measure
        self.objective = objective
        self.beside = beside  # the search shared a host: measure once side by side first
        self.on_run = on_run

    def run(self, points: list[Point], baseline: dict[str, str] | None) -> RepeatOutcome:
        t0 = time.monotonic()
        base = baseline_arm(points, baseline)
        arms = [
            Arm(p.number, p.knobs, "finalist", p.objective)
            for p in finalists(points, baseline, self.rule.finalists)
        ]
        out = RepeatOutcome(base, arms, Decision(True, None, ""), 0, shared_host=self.beside is not None)
        out.finalists = len(arms)
        if not arms:
            out.decision = Decision(
                True,
                None,
                "no other configuration measured cleanly: the baseline is kept"
                if not base.failed
                else f"the baseline fails ({base.failed}) and no other configuration works",
            )
            return out
        if self.beside is not None:
            self._beside_round(out)
        for r in range(1, self.rule.max_rounds + 1):
            for arm in self._order(out):
                self._record(out, arm, r, self.measure(arm.knobs))
            out.rounds = r
            drop_losers(arms, base, r, self.rule)
            out.decision = decide(arms, base, r, self.rule, len(arms))
            if out.decision.settled:
                break
        out.wall_s = time.monotonic() - t0
        return out

    @staticmethod
    def _order(out: RepeatOutcome) -> list[Arm]:
        """One round: the baseline (if it works), then each finalist still in: A B A B ..."""
        return ([out.base] if not out.base.failed else []) + [a for a in out.arms if a.active]

    def _beside_round(self, out: RepeatOutcome) -> None:
        group = self._order(out)
        for arm, ev in zip(group, self.beside([a.knobs for a in group]) if self.beside else [], strict=True):
            run = self._run_of(arm, 0, ev, beside=True)
            out.runs.append(run)
            out.simulated_s += ev.trial_s or 0.0
            if run.value is not None:
                out.beside[arm.number] = run.value
            if self.on_run:
                self.on_run(run)

    def _run_of(self, arm: Arm, r: int, ev: Evaluation, beside: bool = False) -> RepeatRun:
        failed = int(ev.metrics.get("failed") or 0)
        if ev.status == "infeasible":
            status, why, value = "infeasible", f"{ev.failure_class or 'failed'} at launch", None
        elif failed:
            status, why, value = "rejected", f"{failed} failed request{'s' if failed != 1 else ''}", None
        elif ev.status != "ok":
            status, why, value = ev.status, ev.reason or ev.status, None
        else:
            status, why, value = "ok", "", objective_value(ev.metrics, self.objective)
        return RepeatRun(
            number=arm.number,
            round=r,
            status=status,
            value=value,
            beside=beside,
            why=why,
            metrics=dict(ev.metrics),
            trial_dir=ev.trial_dir,
            launch_s=ev.launch_s,
        )

    def _record(self, out: RepeatOutcome, arm: Arm, r: int, ev: Evaluation) -> None:
        run = self._run_of(arm, r, ev)
        out.runs.append(run)
        out.simulated_s += ev.trial_s or 0.0
        if run.value is not None:
            arm.values.append(run.value)
        elif arm.role == "finalist":  # a run with failed requests, or a failed launch: out
            arm.dropped = f"round {r}: {run.why}"
        if self.on_run:
            self.on_run(run)


def report(out: RepeatOutcome, rule: RepeatRule) -> RepeatReport:
    """The repeat phase as tune.json keeps it: the rule, the verdict, every configuration's spread."""
    comps = {c.number: c for c in out.decision.comparisons}
    spreads = [_spread(a, comps.get(a.number), out.beside.get(a.number)) for a in [out.base, *out.arms]]
    k = max(1, out.finalists)
    w = out.winner
    return RepeatReport(
        rule=rule.describe(k),
        test=TEST_NAME,
        alpha=rule.alpha,
        level=rule.level(k),
        looks=rule.looks(k),
        finalists=out.finalists,
        min_rounds=rule.min_rounds,
        max_rounds=rule.max_rounds,
        rounds=out.rounds,
        launches=out.launches,
        settled=out.rounds < rule.max_rounds or w is not None,
        verdict=out.decision.verdict or NO_WINNER,
        winner=w.number if w is not None else None,
        beats_baseline=w is not None,
        baseline=out.base.number or None,
        spreads=spreads,
        runs=out.runs,
        shared_host=out.shared_host,
        interference=interference(out.beside, {a.number: a.values for a in [out.base, *out.arms]}),
        wall_s=out.wall_s,
        simulated_s=out.simulated_s or None,
    )


def _spread(a: Arm, c: Comparison | None, beside: float | None) -> Spread:
    s = Spread(
        number=a.number,
        knobs=a.knobs,
        role=a.role,
        search_value=a.search_value,
        samples=list(a.values),
        n=len(a.values),
        dropped=a.dropped,
        failed=a.failed,
        beside_value=beside,
    )
    if a.values:
        iv = median_interval(a.values)
        s.median, s.mad, s.ci_lo, s.ci_hi, s.ci_coverage = (
            median(a.values),
            mad(a.values),
            iv.lo,
            iv.hi,
            iv.coverage,
        )
    if c is not None:
        s.p_value, s.gain, s.noise, s.passed = c.p_value, c.gain, c.noise, c.passed
    return s


def apply_to(result: TuneResult, out: RepeatOutcome, rule: RepeatRule) -> None:
    """The verdict into the result: ``best`` is the winner beyond noise, else the baseline kept
    (when it works); the search's own pick stays in ``search_best``."""
    result.repeats = report(out, rule)
    result.search_best = result.best.number if result.best else None
    number = out.winner.number if out.winner else (out.base.number if not out.base.failed else None)
    chosen = next((p for p in result.points if p.number == number), None)
    if chosen is not None:
        result.best = chosen
        result.best_command = chosen.command
