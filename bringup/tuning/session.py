"""A tuning session: the search, then the repeat phase, then the configuration it ends with.

As `bringup.session.run.Run` is the loop of a bring-up, this is the loop of a tuning, whatever
evaluates its points: `bringup tune` launches each point (bringup/session/tuning.py, the
evaluator of bringup/tuning/evaluator.py, on this machine's GPUs or a Ray cluster), and the
benchmarks (benchmarks/tuning_*.py) answer them offline from a scenario's performance model
(bringup/oracle/tuning.py). Both run the same search (`Tuner`), the same repeat phase
(`Repeats`, with a rule: bringup/tuning/verdict.py) and the same choice at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bringup.trial.executor import Executor
from bringup.tuning.repeats import Measure, MeasureBeside, RepeatOutcome, Repeats
from bringup.tuning.result import RepeatRun
from bringup.tuning.tuner import JobOf, Point, Tuner
from bringup.tuning.verdict import RepeatRule


@dataclass
class TuneSession:
    """One tuning: ``tuner`` searches; with a ``rule``, the baseline and the finalists are measured
    again, interleaved, until the rule settles which (if any) beats the baseline beyond noise."""

    tuner: Tuner
    rule: RepeatRule | None = None  # None: no repeat phase, the search's best measurement is the pick
    on_repeat: Callable[[RepeatRun], None] | None = None  # each repeat launch, as it comes back
    outcome: RepeatOutcome | None = field(default=None, init=False)  # the repeat phase's, once run

    def search(self, executor: Executor | None = None, job_of: JobOf | None = None) -> list[Point]:
        """The search: one point after another, or as many at once as ``executor`` has slots
        (``job_of`` makes each point's job)."""
        return self.tuner.run() if executor is None else self.tuner.run(executor, job_of)

    def repeat(self, measure: Measure, beside: MeasureBeside | None = None) -> RepeatOutcome | None:
        """The repeat phase (None without a rule): ``measure`` launches one configuration alone,
        ``beside`` several at once, for the first round when the search shared a host."""
        if self.rule is None:
            return None
        t = self.tuner
        self.outcome = Repeats(self.rule, measure, t.objective, beside, self.on_repeat).run(t.points, t.start)
        return self.outcome

    def run(
        self, measure: Measure | None = None, executor: Executor | None = None, job_of: JobOf | None = None
    ) -> RepeatOutcome | None:
        """The search, then (with a rule and ``measure``) the repeat phase."""
        self.search(executor, job_of)
        return self.repeat(measure) if measure is not None else None

    def chosen(self) -> dict[str, str] | None:
        """The configuration the tuning ends with: the repeat phase's verdict (its winner, or the
        baseline kept when it works), or without one the search's best."""
        out = self.outcome
        if out is not None:
            if out.winner is not None:
                return out.winner.knobs
            if not out.base.failed and out.base.number:
                return out.base.knobs
        best = self.tuner.best()
        return best.knobs if best else None
