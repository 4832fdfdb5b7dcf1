"""Journal replay: a run opened anew or resumed, and what earlier launches already taught it.

A run interrupted at any point resumes from the journal: its own finished trials are fed back to
the strategy (and its attempts) as if they had just answered, and its clock goes on from their
cost. Other runs on the same machine, engine version and model are priors: their failures are
evidence, their working candidates are tried first. Kept apart from the loop
(bringup/session/run.py) because replay happens once, before the loop, and must feed the strategy
exactly as the loop does (a screen as a screen, a preempted trial as nothing) for a resumed run to
decide as the uninterrupted one would have.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from bringup.core.candidate import Candidate
from bringup.engines.targets import Target
from bringup.guard import files
from bringup.guard.runlock import RunLock, RunLocked
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal, TrialRecord
from bringup.record.results import Attempt, Purpose
from bringup.search.strategy import Strategy
from bringup.session.settings import RunError


def new_run_id(root: Path, target: Target) -> str:
    """A fresh run's id: when, which engine, which model (numbered when taken)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = Path(target.model).name or "model"
    base = f"{stamp}-{target.engine.log_dialect}-{name}"[:80]
    rid, n = base, 1
    while files.is_taken(root / "runs" / rid):  # a dangling link at the name is taken too
        n += 1
        rid = f"{base}-{n}"
    return rid


def lock_writer(run_dir: Path, run_id: str) -> RunLock:
    """One writer per run: a second resume of a run in progress is refused, not run twice."""
    try:
        return RunLock(run_dir, run_id).acquire()
    except (RunLocked, OSError, files.UnsafeFile) as e:
        raise RunError(str(e)) from None


def run_folder(root: Path, run_id: str) -> Path:
    """A run's folder, `<runs folder>/runs/<id>`, made or checked so that nothing in it leads out
    of the runs folder: every folder on the way a real one (no link), its `trials` folder too
    (round three: links planted in a killed run's folder made a resume write outside it). The
    journal's recorded path is not followed: an id is one name, and the folder is where the runs
    folder keeps it."""
    if not run_id or run_id in (".", "..") or "/" in run_id or "\0" in run_id:
        raise RunError(f"run id {run_id!r} is not a folder name; the journal may have been edited")
    try:
        files.make_dirs(root / "runs" / run_id / "trials", inside=root)
    except files.UnsafeFile as e:
        raise RunError(str(e)) from None
    return root / "runs" / run_id


def reopen(journal: Journal, root: Path, run_id: str) -> Path:
    """A run to resume: its folder (RunError when the journal has no such run)."""
    if journal.run(run_id) is None:
        raise RunError(f"no run {run_id} in {root / 'journal.sqlite'}")
    return run_folder(root, run_id)


def mark_interrupted(journal: Journal, run_id: str) -> None:
    """A run that stopped while `running` (a signal, a full disk): marked so, best effort."""
    with contextlib.suppress(Exception):  # a full disk may refuse this too: the journal stays intact
        row = journal.run(run_id)
        if row is not None and row.status == "running":
            journal.set_status(run_id, "interrupted")


def learn_priors(
    journal: Journal,
    strategy: Strategy,
    target: Target,
    hw_fp: str,
    model_id: str,
    run_id: str,
    retry_known: bool,
) -> tuple[int, list[Candidate]]:
    """What other runs on this machine, engine version and model already know: their failures
    observed by the strategy; (how many trials they had, the candidates that worked there)."""
    priors = (
        []
        if retry_known
        else journal.prior_trials(hw_fp, target.engine.log_dialect, target.version, model_id, run_id)
    )
    known_good: list[Candidate] = []
    for rec in priors:
        if rec.purpose == "screen" and rec.outcome.status == "works":
            continue
        if rec.outcome.status == "cancelled":  # preempted: no verdict on its candidate
            continue
        cand = rec.candidate
        if rec.outcome.status == "works":
            if all(c.key() != cand.key() for c in known_good):
                known_good.append(cand)
            continue
        strategy.observe(cand, rec.outcome, source="journal")
    return len(priors), known_good


AttemptOf = Callable[[int, Purpose, Candidate, Outcome, Path, float, dict], Attempt]


def replay(
    done: list[TrialRecord],
    strategy: Strategy,
    attempts: list[Attempt],
    screened_ok: set[str],
    attempt_of: AttemptOf,
) -> tuple[int, Candidate | None]:
    """Feed this run's own finished trials back (resume) to the strategy and the attempts;
    returns (last seq, validated)."""
    seq, validated = 0, None
    for rec in done:
        seq = max(seq, rec.seq)
        purpose = cast(Purpose, rec.purpose)  # a run's own trials: search, screen or minimize
        attempts.append(
            attempt_of(
                rec.seq,
                purpose,
                rec.candidate,
                rec.outcome,
                Path(rec.trial_dir),
                rec.extra.get("wall_s", 0.0),
                rec.extra,
            )
        )
        if rec.purpose == "minimize" or rec.outcome.status == "cancelled":
            continue  # a preempted trial: no verdict on its candidate
        if rec.purpose == "screen":
            if rec.outcome.status == "works":
                screened_ok.add(strategy.predicted_key(rec.candidate))
            strategy.observe(rec.candidate, rec.outcome, source="screen")
            continue
        strategy.observe(rec.candidate, rec.outcome)
        if rec.outcome.status == "works":
            validated = rec.candidate
    return seq, validated
