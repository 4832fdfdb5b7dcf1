"""A bring-up run: the loop that launches what the strategy decides, until one validates.

The loop asks the strategy for the next launch (and whether to screen it first), launches it as a
trial, waits for an answer, records it and feeds it back to the strategy, and stops when a
configuration passes every probe or the budget is spent; then minimizing finds the smallest change
from the baseline that fixes it. Everything else lives beside it in bringup/session/: what the run
starts from (`prepare`), how a job becomes a trial (`launching`), when a waiting launch cancels
screens (`preempt`), a resumed run's replay of the journal (`resume`), what a finished trial writes
(`recording`), minimizing (`minimizing`) and the result the reports read (`result`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate
from bringup.guard import secrets
from bringup.guard.runlock import RunLock
from bringup.observe.outcome import Outcome
from bringup.record.journal import TrialRecord
from bringup.record.results import RunResult
from bringup.search.minimize import MinimalFix
from bringup.session.launching import fits_budget, held_gpus_stop
from bringup.session.minimizing import minimize
from bringup.session.preempt import Preemption, preempted
from bringup.session.prepare import PreparedRun
from bringup.session.recording import Recorder
from bringup.session.result import keep_result, resume_hint, run_result
from bringup.session.resume import (
    learn_priors,
    lock_writer,
    mark_interrupted,
    new_run_id,
    reopen,
    replay,
    run_folder,
)
from bringup.session.settings import QuietObserver, RunError, RunObserver, RunSettings, settings_target
from bringup.trial.executor import Done, Executor, Job, TrialRun
from bringup.trial.process import library_call

__all__ = ["QuietObserver", "Run", "RunError", "RunObserver", "RunSettings", "settings_target"]


class Run(PreparedRun):
    """The loop of one bring-up run, over what `PreparedRun` decided before the first launch."""

    _writer: RunLock | None = None  # this process writes the run (one writer per run)

    # -- launching (bringup/session/launching.py) -------------------------------------------------
    def _run_job(self, job: Job) -> TrialRun:
        return self.launcher.run_job(job)

    def _remote_job(self, job: Job) -> tuple[Any, Path]:
        return self.launcher.remote_job(job)

    def _executor(self) -> Executor:
        return self.launcher.executor(self._run_job, self._remote_job, self.hw_fp)

    def _submit(self, ex: Executor, job: Job) -> None:
        self.observer.launching(job.seq, job.purpose, job.cand.describe_diff(self.baseline), job.screen)
        ex.submit(job)

    def _launch(self, cand: Candidate) -> Outcome:
        """One trial now, with nothing else in flight (minimizing is one question at a time)."""
        self._seq += 1
        job = self.launcher.job(self._seq, "minimize", cand, {})
        self._submit(self.ex, job)
        while True:
            d = self.ex.wait()
            if d.run is not None:
                return self.recorder.record(d, self.launcher.width)
            self.lost.append(f"#{d.job.seq} on {d.job.where}: {d.lost_why}")
            self._submit(self.ex, d.job)  # a lost trial is the machine's failure: run it again

    # -- opening, or resuming (bringup/session/resume.py) -----------------------------------------
    def _open(self) -> list[TrialRecord]:
        """Create the run, or reopen it on resume; returns this run's finished trials."""
        assert self.journal is not None
        fresh, t = self.run_id is None, self.target
        self.run_id = rid = self.run_id or new_run_id(self.root, t)
        self.run_dir = run_folder(self.root, rid) if fresh else reopen(self.journal, self.root, rid)
        self._writer = lock_writer(self.run_dir, rid)
        self.launcher.run_dir = self.run_dir
        if not fresh:
            self.journal.set_status(rid, "running")
            return self.journal.trials(rid)
        dialect, settings = t.engine.log_dialect, self.settings.model_dump()
        self.journal.create_run(rid, dialect, t.version, self.model_id, self.hw_fp, settings, self.run_dir)
        return []

    def _learn_priors(self) -> tuple[int, list[Candidate]]:
        assert self.journal is not None and self.run_id is not None
        t, retry, j = self.target, self.settings.retry_known, self.journal
        n, good = learn_priors(j, self.strategy, t, self.hw_fp, self.model_id, self.run_id, retry)
        return n, self.learned.after(good)  # the journal's known-good first, then the lessons' (learned.py)

    # -- the run ----------------------------------------------------------------------------------
    @library_call
    def execute(self) -> RunResult:
        try:
            return self._execute()
        except BaseException:  # a signal or a full disk at any phase: the run is not left `running`
            if self.journal is not None and self.run_id is not None and self._writer is not None:
                mark_interrupted(self.journal, self.run_id)  # (not a refused second writer's run)
            raise
        finally:
            if self._writer is not None:
                self._writer.release()

    def _execute(self) -> RunResult:
        self.prepare()
        t0 = time.time()
        done = self._open()
        assert self.journal is not None and self.run_id is not None
        run_json = {"run_id": self.run_id, "settings": secrets.scrub(self.settings.model_dump())}
        secrets.write_text(self.run_dir / "run.json", json.dumps(run_json, indent=2, default=str))
        self.observer.started(self.run_id, self.run_dir, self.space, len(done))
        priors, self._known_good = self._learn_priors()  # candidates that worked in other runs here
        self.recorder = Recorder.of(self)
        self.attempts = self.recorder.attempts
        self.lost: list[str] = []  # trials lost with their node (run again)
        self._screened_ok: set[str] = set()  # predicted keys of the candidates whose screen passed
        self._seq, validated = replay(
            done, self.strategy, self.attempts, self._screened_ok, self.recorder.attempt
        )
        self.replayed_s = sum(self.screening.cost_s(a) for a in self.attempts)  # earlier sessions' clock
        try:
            # Inside the try: an executor that cannot start (no Ray node of this hardware) marks the
            # run interrupted in the journal, not forever "running".
            self.ex = ex = self._executor()
        except BaseException:
            self.journal.set_status(self.run_id, "interrupted")
            raise
        s = self.settings
        self.preempt = Preemption(self.strategy, self.screening, self.baseline, s.timeout, self.attempts)
        self._follow: list[Job] = []  # full launches of screens that passed; trials lost with their node
        try:
            status, stop_reason, validated = self._search(ex, validated)
            search_clock = ex.now()
            while ex.in_flight():  # what was launched beside the winner still reports, for the record
                d = ex.wait()
                if d.run is not None:
                    self._deliver(d)
            fix = MinimalFix([], False, validated) if validated is not None else None
            if validated is not None and s.minimize:
                budget = s.max_minimize_launches - sum(1 for a in self.attempts if a.purpose == "minimize")
                fix = minimize(
                    self.strategy, self.journal, self.run_id, self.baseline, validated, budget, self._launch
                )
        except BaseException:
            self.journal.set_status(self.run_id, "interrupted")
            raise
        finally:
            ex.close()
            if self.dry is not None:
                self.dry.close()
        result = run_result(self, status, stop_reason, validated, fix, t0, priors, search_clock)
        keep_result(self, result)
        self.observer.finished(result)
        return result

    def _search(self, ex: Executor, validated: Candidate | None) -> tuple[str, str, Candidate | None]:
        """Ask, launch, answer, until one validates or the search stops: (status, why, validated)."""
        status, stop_reason = "budget", ""
        while validated is None:
            self.preempt.wake = None  # when to look again at a launch waiting for GPUs
            stop = self._fill(ex)
            if not ex.in_flight():
                held = None if stop else held_gpus_stop(ex, self.attempts)
                if held == "":
                    continue  # the GPUs the next launch waited for are back
                stop = stop or (("not-found", held + self._resume_hint()) if held else None)
                status, stop_reason = stop or (status, stop_reason)
                break
            d = self._answer(ex)
            if d is not None:
                validated = self._deliver(d)
        if validated is not None:
            status, stop_reason = "validated", "a configuration passed every probe"
        return status, stop_reason, validated

    def _fill(self, ex: Executor) -> tuple[str, str] | None:
        """Start launches while slots are free; returns why the search stops, if it does."""
        s = self.settings
        self.preempt.round += 1  # launches started together, in this call
        while len(ex.in_flight()) < ex.width:
            flying = ex.in_flight()
            launches = sum(1 for a in self.attempts if a.purpose in ("search", "screen")) + len(flying)
            if launches >= s.max_launches:
                return self._spent()
            if self._follow:  # a screened candidate's full launch, or a trial lost with its node
                if not self._follow_up(ex):
                    break  # it waits for its GPUs; no new trial takes them meanwhile
                continue
            if s.max_hours is not None and (self.replayed_s + ex.now()) / 3600 >= s.max_hours:
                return "budget", f"time budget ({s.max_hours} h) spent"
            d = self._next_launch(flying)
            hold = self._hold(d, flying, s.max_launches - launches)
            if hold == "wait":
                break  # an answer in flight may open another way, or needs its confirmation
            if isinstance(hold, tuple):
                return hold
            extra = {"p_success": d.p_success, "reasons": d.reasons}
            job = self.launcher.job(
                self._seq + 1, "screen" if d.screen else "search", d.candidate, extra, d.screen
            )
            if not ex.fits(job) and self.preempt.preempt_for(ex, job, self.launcher.width):
                # Queued: it starts as soon as the preempted screens have given their GPUs back.
                job.seq, job.extra["p_then"] = 0, self.strategy.success_probability(job.cand)
                self._follow.insert(sum(1 for j in self._follow if j.seq != 0), job)
                break
            if not ex.fits(job) or self.preempt.outlasts_likelier(job, flying):
                break  # it waits for its GPUs; what is in flight reports first
            self._seq += 1
            job.extra["round"] = self.preempt.round
            self._submit(ex, job)
        return None

    def _hold(self, d: Any, flying: list[Job], left: int) -> tuple[str, str] | str | None:
        """None: the next launch starts; "wait": for what is in flight; else why the search stops.
        The launches left keep one for the confirmation of every screen (fits_budget)."""
        if d.candidate is not None and fits_budget(d, left, flying, self._follow):
            return None
        if flying:
            return "wait"
        if d.candidate is not None:
            return self._spent()
        why = self.strategy.explain_stop() + self._resume_hint()
        return "impossible" if self.strategy.impossible() else "not-found", why

    def _next_launch(self, flying: list[Job]) -> Any:
        """The strategy's next launch, past every candidate the installed engine's own checks
        refuse (each recorded as its refusal, the next attempt, observed, never launched)."""
        while True:
            d = self.learned.explained(  # a lesson's candidate told as such (bringup/session/learned.py)
                self.strategy.next_launch(
                    self._known_good, self.attempts, self._screened_ok, pending=[j.cand for j in flying]
                )
            )
            cand = d.candidate
            refusal = (
                None if cand is None else self.launcher.refused(self.dry, self._seq + 1, cand, self.attempts)
            )
            if cand is None or refusal is None:
                return d
            self._seq += 1
            out, tdir, started, ended, more = refusal
            extra = {"p_success": d.p_success, "reasons": d.reasons, **more}
            self.recorder.log(self._seq, "dry-run", cand, out, tdir, started, ended, extra)
            self.strategy.observe(cand, out, source="dry-run")

    def _full_answers(self) -> int:
        return sum(o.source == "launch" for o in self.strategy.observations)

    def _follow_up(self, ex: Executor) -> bool:
        """Start the first follow-up if its GPUs are free (or drop it: an answer that came back
        since its screen makes it unlikely); whether the loop may go on filling."""
        job = self._follow[0]
        # A passed screen's full launch is not dropped for what other screens say; once a full
        # launch has answered since (a phase no screen reaches: two passed screens, the first
        # confirmation out of memory in graph capture), it is reconsidered like any follow-up.
        kept = job.extra.get("confirms_screen") and job.extra.get("full_then") == self._full_answers()
        worth = kept or self.strategy.still_worth(job.cand, job.extra.get("p_then", 0.0))
        if job.seq == 0 and not worth:
            self._follow.pop(0)
            return True
        if not ex.fits(job):
            self.preempt.preempt_for(ex, job, self.launcher.width)
            return False
        self._follow.pop(0)
        job.extra.pop("p_then", None)
        job.extra.pop("full_then", None)
        if job.seq == 0:
            self._seq += 1
            job.seq = self._seq
        self._submit(ex, job)
        return True

    def _answer(self, ex: Executor) -> Done | None:
        """The next trial that answered, for the strategy; None: a wake-up (preempting may pay by
        now, bringup/session/preempt.py) or a trial lost with its node (run again first, not a failure)."""
        d = ex.wait_until(self.preempt.wake)
        if d is None or d.run is not None:
            return d
        if not d.cancelled:  # preempted and lost on the way: nothing to record or rerun
            self.lost.append(f"#{d.job.seq} on {d.job.where}: {d.lost_why}")
            self._follow.insert(0, d.job)
        return None

    def _deliver(self, d: Done) -> Candidate | None:
        """An answer back to the strategy; the candidate when it validated."""
        job = d.job
        if d.cancelled:  # preempted: into the journal as cancelled, nothing for the strategy
            self.recorder.record(preempted(d, self.ex.clock), self.launcher.width)
            return None
        out = self.recorder.record(d, self.launcher.width)
        if not job.screen:
            self.strategy.observe(job.cand, out)
            return job.cand if out.status == "works" else None
        if out.status != "works" and (out.failure_class or "").startswith("oom") and job.extra.get("shrunk"):
            # A screen cannot judge memory, least of all one shrunk to a GPU: its few layers did
            # not fit where the estimate said they would. Inconclusive, not evidence against the
            # candidate (the strategy may propose it again): screens keep their parallel sizes
            # from now on.
            self.launcher.screen_shrink = {}
            self.screening.beside = False
            return None
        if out.status != "works":
            self.strategy.observe(job.cand, out, source="screen")
            return None
        # A screen that passed: its full launch goes next, as soon as its GPUs are free (trials at
        # once: unless an answer that comes back meanwhile makes it unlikely, see _follow_up).
        self._screened_ok.add(self.strategy.predicted_key(job.cand))
        self.strategy.observe(job.cand, out, source="screen")
        extra = {k: v for k, v in job.extra.items() if k != "shrunk"}
        p_then = self.strategy.success_probability(job.cand)
        extra.update(p_then=p_then, confirms_screen=True, full_then=self._full_answers())
        self._follow.append(self.launcher.job(0, "search", job.cand, extra))
        # The most likely first (answers arrive in any order); lost trials (seq given) stay ahead.
        self._follow.sort(key=lambda j: (j.seq == 0, -j.extra.get("p_then", 0.0)))
        return None

    def _spent(self) -> tuple[str, str]:
        n = self.settings.max_launches
        return "budget", f"launch budget ({n}) spent; {self.strategy.summary()}{self._resume_hint()}"

    def _resume_hint(self) -> str:
        return resume_hint(self.strategy.impossible() is not None, self.settings.max_launches, self.run_id)
