"""Preemption economics: when a waiting full launch may cancel screens in flight for their GPUs.

With trials at once, a screen that passed queues its candidate's full launch, which may need GPUs
that other screens hold. Waiting for them costs time when the full launch would have worked;
cancelling them throws their work away when it would not. This module weighs the two (p x R
against (1 - p) x E, below), says when it will pay if it does not yet, and turns a cancelled
screen into what the journal keeps: no failure, no evidence about its candidate.

Kept apart from the loop (bringup/session/run.py) because it is a decision with its own model of
cost, not a step of the loop: the loop asks it, at the points where a launch waits for GPUs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bringup.core.candidate import Candidate
from bringup.core.clock import Clock
from bringup.guard import files
from bringup.record.results import Attempt
from bringup.search.screening import ScreeningPolicy
from bringup.search.strategy import Strategy
from bringup.trial.executor import Done, Executor, Job


@dataclass
class Preemption:
    """Whether to cancel screens in flight for a waiting full launch, and when to look again."""

    strategy: Strategy
    screening: ScreeningPolicy
    baseline: Candidate
    timeout: float  # the launch deadline (engine seconds): how far ahead ``wake`` may be
    attempts: list[Attempt]  # the run's, as they grow (the screens' expected lengths read them)
    wake: float | None = None  # when to look again at a launch waiting for GPUs (the run's clock)
    round: int = 0  # launches started together by the loop's latest fill

    def outlasts_likelier(self, job: Job, flying: list[Job]) -> bool:
        """A screen started now would end after a likelier one started earlier: if that one passes,
        its full launch wants the GPUs this one holds, and waits. (Screens started together end
        together; those are a batch.)"""
        p = job.extra.get("p_success") or 0.0
        return job.screen and any(
            j.screen and j.extra.get("round") != self.round and (j.extra.get("p_success") or 0.0) > p
            for j in flying
        )

    def preempt_for(self, ex: Executor, job: Job, width: int) -> bool:
        """Cancel screens in flight that hold GPUs a waiting full launch needs, when it is likelier
        to work than what each of them tests and starting it now is expected to reach a validated
        configuration sooner; whether any screen is (already) being cancelled for it.

        Starting the launch now saves, if it works, the time the screens still had to run (R, the
        longest expected remainder); if it fails, their answers come later by the work thrown away
        (E, the longest elapsed: a screen of a candidate still worth it runs again). Preempt when
        p x R > (1 - p) x E. A cancelled screen is no evidence: its candidate stays untried, and the
        strategy proposes it again or not as the answers say."""
        if job.screen or width <= 1:
            return False
        flying = ex.in_flight()
        going = [j for j in flying if j.cancelled_at is not None]
        if going and ex.fits(job, going):
            return True  # already freeing enough: wait for those
        p = self.strategy.success_probability(job.cand)
        victims = sorted(
            (
                j
                for j in flying
                if j.screen and j.cancelled_at is None and self.strategy.success_probability(j.cand) < p
            ),
            key=lambda j: (self.strategy.success_probability(j.cand), -j.sim_start),
        )
        chosen: list[Job] = []
        for v in victims:  # the least likely first, the latest started first among equals
            chosen.append(v)
            if ex.fits(job, going + chosen):
                break
        else:
            return bool(going)  # cancelling every likelier-beaten screen would not free enough
        now = ex.now()
        if not self._preempting_pays(p, chosen, now):
            # Look again when it would pay, if the screens are still running then.
            self.wake = self._pays_from(p, chosen, now)
            return bool(going)
        what = f"{job.cand.describe_diff(self.baseline)} (p={p:.2f})"
        for v in chosen:
            ex.cancel(v)
            if v.cancelled_at is not None:  # not one that has just answered by itself
                v.extra["preempted_by"] = what
                v.extra["preempted_p"] = round(self.strategy.success_probability(v.cand), 4)
        return True

    def _preempting_pays(self, p: float, chosen: list[Job], at: float) -> bool:
        """p x R > (1 - p) x E at clock time ``at`` (see preempt_for)."""
        left = max(self.screening.remaining_s(at - v.sim_start, self.attempts) for v in chosen)
        lost = max(at - v.sim_start for v in chosen)
        return p * left > (1 - p) * lost

    def _pays_from(self, p: float, chosen: list[Job], now: float) -> float | None:
        """The first clock time, up to the launch deadline, at which preempting ``chosen`` would
        pay if they are still running then (a screen past every other one's time is expected to
        run on: one that hangs is preempted before the hang deadline frees its GPUs); None: never."""
        step = max(1.0, self.timeout / 1000)
        for k in range(1, int(self.timeout / step) + 1):
            if self._preempting_pays(p, chosen, now + k * step):
                return now + k * step
        return None


def preempted(d: Done, clock: Clock) -> Done:
    """A screen cancelled for a likelier full launch, as the journal keeps it: cancelled, no failure
    class, nothing for the strategy to learn (on a double, what it would have shown after the
    cancel is not known at that time). Its outcome.json is rewritten so."""
    assert d.run is not None
    job, r = d.job, d.run
    out = r.outcome.model_copy(deep=True)
    out.status, out.failure_class, out.signature, out.root_exception = "cancelled", None, None, None
    out.implicates, out.implicated_levels, out.kv_report = [], {}, None
    cut = clock.cut_at_cancel(d.clock - job.sim_start)
    if cut is not None:  # the trial ran on in real time; on the run's clock it ended at the cancel
        out.phase, out.probes = None, []
        out.timings.simulated = cut
    by = job.extra.get("preempted_by", "a likelier full launch")
    out.evidence = [f"preempted at {d.clock:.0f} s of the run's clock: {by} waited for its GPUs"]
    out.hint = (
        "Cancelled to free its GPUs for a full launch judged likelier to work; not evidence "
        "about this candidate (it may be screened again)."
    )
    files.write_text(r.tdir / "outcome.json", out.model_dump_json(indent=2))
    return dataclasses.replace(d, run=dataclasses.replace(r, outcome=out))
