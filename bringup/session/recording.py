"""Recording a finished trial: the journal's row, the memory plan's error, the attempt, the display.

Every answer a run gets goes through here once, whatever it was (a launch, a screen, a refusal of
the engine's own checks, a preempted screen), so the journal, the attempts the report shows and
the live display never disagree. Kept apart from the loop (bringup/session/run.py), which only
says what to record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.core.candidate import Candidate
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal, TrialRecord
from bringup.record.results import Attempt, Purpose
from bringup.search.strategy import Strategy
from bringup.session.plan_check import record_kv
from bringup.session.result import attempt_of
from bringup.session.settings import RunObserver
from bringup.trial.executor import Done

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint
    from bringup.session.prepare import PreparedRun


@dataclass
class Recorder:
    """Writes a run's finished trials; ``attempts`` is the run's list of them, in order."""

    journal: Journal
    run_id: str
    dialect: str  # the engine's log dialect (how its KV report reads)
    facts: dict[str, Any]
    fingerprint: Fingerprint | None
    hw_fp: str
    model_id: str
    strategy: Strategy  # its predicted key is what the journal calls a trial's effective key
    baseline: Candidate
    observer: RunObserver
    attempts: list[Attempt] = field(default_factory=list)

    @classmethod
    def of(cls, run: PreparedRun) -> Recorder:
        """The recorder of a prepared run whose journal is open (``run_id`` set)."""
        assert run.journal is not None and run.run_id is not None
        t = run.target
        return cls(
            run.journal,
            run.run_id,
            t.engine.log_dialect,
            run.facts,
            run.fingerprint,
            run.hw_fp,
            run.model_id,
            run.strategy,
            run.baseline,
            run.observer,
        )

    def record(self, d: Done, width: int) -> Outcome:
        """A finished trial into the journal, the memory plan's record and the attempts."""
        assert d.run is not None
        job, r = d.job, d.run
        if not d.cancelled:  # a trial cut short tells the memory plan nothing
            record_kv(
                r.outcome,
                r.tdir,
                self.dialect,
                self.facts,
                self.fingerprint,
                self.journal,
                self.hw_fp,
                self.model_id,
                self.run_id,
                job.seq,
            )
        extra = dict(job.extra)
        if width > 1 or job.where != "local":
            extra.update(gpus=job.gpus, where=job.where, clock_start_s=job.sim_start, clock_end_s=d.clock)
        self.log(job.seq, job.purpose, job.cand, r.outcome, r.tdir, r.started, r.ended, extra)
        return r.outcome

    def log(
        self,
        seq: int,
        purpose: Purpose,
        cand: Candidate,
        out: Outcome,
        tdir: Path,
        started: float,
        ended: float,
        extra: dict[str, Any],
    ) -> None:
        """One trial's row, attempt and display line."""
        key = self.strategy.predicted_key(cand)
        kept = {**extra, "wall_s": ended - started}
        self.journal.add_trial(
            TrialRecord(
                run_id=self.run_id,
                seq=seq,
                purpose=purpose,
                candidate=cand,
                effective_key=key,
                outcome=out,
                trial_dir=str(tdir),
                extra=kept,
                started=started,
                ended=ended,
                hardware_fp=self.hw_fp,
                model_id=self.model_id,
            )
        )
        a = self.attempt(seq, purpose, cand, out, tdir, ended - started, extra)
        self.attempts.append(a)
        self.observer.attempted(a)

    def attempt(
        self, seq: int, purpose: Purpose, cand: Candidate, out: Outcome, tdir: Path, wall: float, extra: dict
    ) -> Attempt:
        return attempt_of(self.baseline, seq, purpose, cand, out, tdir, wall, extra)
