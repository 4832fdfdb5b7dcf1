"""What a finished run proved, as lessons another machine can use (`bringup lessons export`).

A run that validated holds a fix (the minimal one when the minimizer ran: `minimal: true`) and the
launches on the way from its baseline to that fix: the baseline itself, the search's candidates
that made only some of the fix's changes, the minimizer's subsets. Each failure those launches
showed becomes one lesson, cured by the fix's changes its launches single out: every launch that
showed the failure kept the level the change replaces, and none that got past the failure's phase
did. A change of the fix no failure singles out (a pair that fails alike) goes with the failure
the working launch got past last, so the lessons of a run together hold its whole fix. Failures
of launches off that way (a level the search tried and dropped) say nothing of the baseline and
are not lessons.

The lessons of other runs that this run used (bringup/session/learned.py) come out again when the
run tested them: weakened with the evidence when a launch held the fix and failed the same way,
with this run among their `confirmed` when the fix got past the failure. Nothing written holds a
secret or a path of this machine: trial logs are named relative to the run's folder, root lines
are normalised (bringup.search.evidence.normalised_line).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bringup.core.candidate import Candidate, Change
from bringup.core.datafiles import phase_index
from bringup.guard.limits import InputError, read_text_limited
from bringup.knowledge.learned import (
    WEAKEN,
    Evidence,
    Failure,
    FixChange,
    Lesson,
    Scope,
    Source,
    lesson_id,
)
from bringup.knowledge.learned_files import fix_problem
from bringup.observe.effective import normalise
from bringup.observe.outcome import Outcome
from bringup.record.results import LessonUse, RunResult
from bringup.search.evidence import SERVING_RANK, blocker_key, normalised_line, reach_of, root_line

FINDINGS_MAX = 64 << 20


class ExportError(ValueError):
    """A run that cannot be exported: which, and why."""


@dataclass
class Launch:
    """One launch of the run, as the export reads it."""

    trial: str  # relative to the run folder: trials/NN-purpose-key
    cand: Candidate
    out: Outcome
    key: str = ""  # its failure's identity (empty: it worked, or says nothing)


@dataclass
class Exported:
    lessons: list[Lesson] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_run(run_dir: Path) -> RunResult:
    try:
        text = read_text_limited(run_dir / "findings.json", FINDINGS_MAX, "findings.json")
        return RunResult.model_validate_json(text)
    except InputError as e:
        raise ExportError(f"{run_dir}: no finished run here ({e})") from None
    except ValidationError as e:
        raise ExportError(f"{run_dir}/findings.json: not a run's findings ({e.errors()[0]['msg']})") from None


def _launches(run_dir: Path, result: RunResult) -> list[Launch]:
    """The run's launches and dry-run refusals with their outcomes (screens ran other flags)."""
    out = []
    for a in result.attempts:
        if a.purpose == "screen":
            continue
        tdir = run_dir / "trials" / Path(a.trial_dir).name  # where the folder is now, wherever it ran
        try:
            o = Outcome.model_validate_json(read_text_limited(tdir / "outcome.json", FINDINGS_MAX, "outcome"))
        except (InputError, ValidationError):
            continue
        if o.status == "cancelled" or not o.candidate:
            continue
        rel = f"trials/{tdir.name}/" + ("server.log" if (tdir / "server.log").exists() else "outcome.json")
        said = o.status != "works" and not (o.status == "timeout" and o.failure_class is None)
        out.append(Launch(rel, Candidate.from_json(o.candidate), o, blocker_key(o) if said else ""))
    return out


def _value(cand: Candidate, flag: str) -> str:
    v = cand.env_dict.get(flag[4:]) if flag.startswith("env:") else cand.flag_dict.get(flag)
    return normalise(v)


def _holds(cand: Candidate, flag: str, value: Any) -> bool:
    return _value(cand, flag) == normalise(value)


def _on_path(launch: Launch, baseline: Candidate, fix: list[Change]) -> bool:
    """The launch made only changes of the fix: what it showed is the baseline's own."""
    want = {c.flag: normalise(c.after) for c in fix}
    return all(want.get(c.flag) == normalise(c.after) for c in launch.cand.diff(baseline))


def _cures(key: str, path: list[Launch], fix: list[Change]) -> list[Change]:
    """The fix's changes this failure's launches single out (module docstring)."""
    showed = [ln for ln in path if ln.key == key]
    rank = reach_of(showed[0].out)
    past = [ln for ln in path if ln.key != key and reach_of(ln.out) > rank]
    return [
        c
        for c in fix
        if all(_holds(ln.cand, c.flag, c.before) for ln in showed)
        and not any(_holds(ln.cand, c.flag, c.before) for ln in past)
    ]


def _failure(out: Outcome, key: str) -> Failure:
    return Failure.model_validate(
        {
            "key": key,
            "class": out.failure_class or ("wrong-output" if out.status == "wrong-output" else "unknown"),
            "phase": out.phase,
            "signature": out.signature,
            "root": normalised_line(root_line(out)),
        }
    )


def _as_fix(changes: list[Change]) -> list[FixChange]:
    def v(x: Any) -> Any:
        return list(x) if isinstance(x, tuple) else x

    return [FixChange(flag=c.flag, before=v(c.before), after=v(c.after)) for c in changes]


def _attributed(path: list[Launch], fix: list[Change]) -> list[tuple[str, list[Change]]]:
    """Each failure on the way with the changes that cure it; what none singles out goes with the
    failure the working launch got past last."""
    keys = list(dict.fromkeys(ln.key for ln in path if ln.key))
    cures = {k: _cures(k, path, fix) for k in keys}
    left = [c for c in fix if not any(c in cs for cs in cures.values())]
    if left and keys:
        last = max(keys, key=lambda k: reach_of(next(ln.out for ln in path if ln.key == k)))
        cures[last] = [c for c in fix if c in cures[last] or c in left]
    return [(k, cs) for k, cs in cures.items() if cs]


def _machine(run_dir: Path, result: RunResult) -> str:
    """The machine's fingerprint: in findings.json, or (a run before it was kept there) in the
    journal of the runs folder the run sits in."""
    if result.hardware_fp:
        return result.hardware_fp
    journal = run_dir.parent.parent / "journal.sqlite"
    if journal.is_file():
        from bringup.record.journal import Journal, JournalDamaged

        try:
            row = Journal(journal, readonly=True).run(result.run_id)
        except (JournalDamaged, OSError):
            row = None
        if row is not None:
            return row.hardware_fp
    return "unknown"


def learned(run_dir: Path, today: str | None = None) -> Exported:
    """The lessons of one finished run (module docstring)."""
    result = load_run(run_dir)
    result.hardware_fp = _machine(run_dir, result)
    ex = Exported()
    launches = _launches(run_dir, result)
    ex.lessons += _retested(result, launches, today)
    if not result.validated or not result.final_candidate:
        ex.notes.append(f"{result.run_id}: not validated ({result.status}): no fix to learn from")
        return ex
    baseline = Candidate.from_json(result.baseline)
    fix = Candidate.from_json(result.final_candidate).diff(baseline)
    path = [ln for ln in launches if _on_path(ln, baseline, fix)]
    try:
        scope = Scope.of(result.facts)
    except ValidationError as e:
        raise ExportError(f"{run_dir}: its facts make no lesson scope ({e.errors()[0]['msg']})") from None
    found = _attributed(path, fix)
    if not fix or not found:
        why = "the baseline works" if not fix else "no launch on the way from the baseline to the fix failed"
        ex.notes.append(f"{result.run_id}: {why}: nothing to learn")
    for key, cures in found:
        ls = _lesson(result, scope, key, cures, path, today)
        if isinstance(ls, str):
            ex.notes.append(ls)
        else:
            _add(ex.lessons, ls)
    return ex


def _lesson(
    result: RunResult, scope: Scope, key: str, cures: list[Change], path: list[Launch], today: str | None
) -> Lesson | str:
    showed = [ln for ln in path if ln.key == key]
    failure = _failure(showed[0].out, key)
    fix = _as_fix(cures)
    rank = reach_of(showed[0].out)
    cured = [ln.trial for ln in path if ln.key != key and reach_of(ln.out) > rank]
    source = Source(
        run=result.run_id,
        machine=result.hardware_fp or "unknown",
        trials=[ln.trial for ln in showed][:4] + cured[:2],
        exported=today or datetime.date.today().isoformat(),
    )
    try:
        ls = Lesson(
            id=lesson_id(failure, fix, scope),
            failure=failure,
            fix=fix,
            scope=scope,
            minimal=result.minimal_fix_verified,
            source=source,
        )
    except ValidationError as e:
        return f"{result.run_id}: {failure.failure_class}: not exported ({e.errors()[0]['msg']})"
    if why := fix_problem(ls):
        return f"{result.run_id}: {failure.failure_class}: not exported: {why}"
    return ls


def _add(lessons: list[Lesson], new: Lesson) -> None:
    """One entry per id: a lesson this run learned again joins the copy it re-exports."""
    same = next((ls for ls in lessons if ls.id == new.id), None)
    if same is None:
        lessons.append(new)
    elif new.source.run not in {same.source.run, *(s.run for s in same.confirmed)}:
        same.confirmed.append(new.source)


def _retested(result: RunResult, launches: list[Launch], today: str | None) -> list[Lesson]:
    """The lessons this run used and tested: weakened when a launch held their fix and failed the
    same way, confirmed by this run when one held it and got past the failure."""
    out = []
    for use in result.lessons:
        ls = _used(use)
        if ls is None:
            continue
        held = [ln for ln in launches if all(_holds(ln.cand, c.flag, c.after) for c in ls.fix)]
        against = [ln for ln in held if ln.key == ls.failure.key]
        past = [ln for ln in held if _past(ln, ls.failure)]
        if against:
            ln = against[0]
            line = normalised_line(root_line(ln.out))
            ls.against.append(Evidence(run=result.run_id, trial=ln.trial, line=line))
            ls.strength = round(max(0.01, ls.strength * WEAKEN), 4)
        elif past:
            ls.confirmed.append(
                Source(
                    run=result.run_id,
                    machine=result.hardware_fp or "unknown",
                    trials=[ln.trial for ln in past][:2],
                    exported=today or datetime.date.today().isoformat(),
                )
            )
        else:
            continue
        out.append(ls)
    return out


def _past(ln: Launch, failure: Failure) -> bool:
    """The launch went past the failure: it worked, or failed of something else in a later phase."""
    if ln.out.status == "works":
        return True
    serving = failure.key.startswith("wrong-output|")
    rank = (SERVING_RANK if serving else 0) + max(
        0, phase_index(failure.phase or ("decode" if serving else "spawn"))
    )
    return bool(ln.key) and ln.key != failure.key and reach_of(ln.out) > rank


def _used(use: LessonUse) -> Lesson | None:
    try:
        return Lesson.model_validate(use.lesson)
    except ValidationError:
        return None
