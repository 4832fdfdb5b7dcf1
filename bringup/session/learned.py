"""Lessons of other runs in this one (`bringup run --lessons PATH`): read, matched, used as priors.

Each lesson (bringup/knowledge/learned.py) is weighed by how far its scope reaches this target and
used only where the user's baseline holds the levels its fix changes (a lesson about `--tp 8` says
nothing to a baseline without it). Then:

- **exact scope** (and a strength no later run cut below FIRST_MIN): its fix, applied to the
  baseline, is the first candidate; the fixes of every such lesson go together (two that set one
  flag differently: the stronger wins, and the notes say so). The dry run, where it applies, checks
  that candidate first, as every candidate (bringup/session/run.py `_next_launch`).
- **near** (another patch of the engine, another GPU of the same architecture, another size of
  the model ...): a belief only, with the weight the distance leaves (Strategy.expect: a predicted
  failure whose culprit is the levels the fix changes, the fix's values among the levels to try).
- **out of reach**, or a baseline without the fix's levels: nothing; a candidate never changes.

Every lesson used is in the run's notes and findings (how far, how much), and a file or entry that
cannot be used is named there and skipped: the run goes on without it. Kept apart from `prepare`
because it reads files a team shares, and must be as wary of them as of any input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from bringup.core.candidate import Candidate, FlagValue
from bringup.core.reserved import reserved_flag
from bringup.knowledge.learned import Lesson, Reach, Scope, first_worthy, weight
from bringup.knowledge.learned_files import read_lessons
from bringup.observe.effective import normalise
from bringup.record.results import LessonUse
from bringup.search.envfactors import as_factor
from bringup.search.strategy import Decision, Strategy

if TYPE_CHECKING:
    from bringup.engines.targets import Target


@dataclass
class Learned:
    """The lessons a run uses, what it refused, and the first candidate exact lessons make."""

    uses: list[LessonUse] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    first: Candidate | None = None
    first_why: list[str] = field(default_factory=list)
    _journal: set[str] = field(default_factory=set)  # keys of the journal's known-good candidates
    _offered: list[Candidate] = field(default_factory=list)  # the known-good list the run asks from

    def after(self, known_good: list[Candidate]) -> list[Candidate]:
        """The journal's known-good candidates (validated on this very machine) first, then the
        exact lessons' candidate."""
        self._journal = {c.key() for c in known_good}
        if self.first is None or self.first.key() in self._journal:
            return known_good
        self._offered = [*known_good, self.first]
        return self._offered

    def explained(self, d: Decision) -> Decision:
        """A decision with the lessons' reasons when its candidate is theirs (the strategy tells
        a known-good candidate by the journal's words)."""
        if self.first is None or d.candidate is None or d.candidate.key() != self.first.key():
            return d
        if self.first in self._offered:  # offered once: launched or refused now, never again (an
            self._offered.remove(self.first)  # observation's key can go stale as defaults are seen)
        if d.candidate.key() in self._journal:
            return Decision(d.candidate, d.p_success, [*d.reasons, *self.first_why], d.screen)
        return Decision(d.candidate, d.p_success, list(self.first_why), d.screen)


def lesson_paths(paths: list[str]) -> list[Path]:
    return [Path(p).expanduser() for p in paths if p]


def use_lessons(
    paths: list[str], target: Target, facts: dict[str, Any], baseline: Candidate, strategy: Strategy
) -> Learned:
    """Read the lessons at ``paths`` and put those in reach of this target into the strategy."""
    out = Learned()
    if not paths:
        return out
    loaded = read_lessons(lesson_paths(paths))
    out.refused += loaded.refused
    try:
        here = Scope.of(facts)
    except ValidationError as e:  # facts no lesson can be matched with: the run goes on without them
        strategy.notes.append(f"lessons: unused: this target's facts make no scope ({e.errors()[0]['msg']})")
        return out
    unreached = 0
    changes: dict[str, tuple[FlagValue | None, Lesson]] = {}
    copies = _weakest_copies(loaded.lessons, strategy.notes)
    for lesson, where in sorted(copies, key=lambda lw: -lw[0].strength):  # the stronger first
        r = weight(lesson, here)
        if r.kind == "none":
            unreached += 1
            continue
        fix, refused, why = _fix_here(lesson, target, baseline)
        if why:
            (out.refused if refused else strategy.notes).append(f"{where}: {why}")
            continue
        _add_env_factors(strategy, fix)
        if not strategy.expect(
            lesson.failure.key,
            lesson.failure.failure_class,
            lesson.failure.phase,
            fix,
            r.weight,
            _why(lesson, r),
        ):
            strategy.notes.append(f"{where}: {lesson.id}: its fix changes nothing this search can vary")
            continue
        first = first_worthy(lesson, r) and _take(changes, fix, lesson, strategy.notes)
        out.uses.append(_use(lesson, r, first, where))
    if unreached:
        strategy.notes.append(
            f"lessons: {unreached} out of reach of this target (another engine, GPU or model), unused"
        )
    strategy.notes += [f"lessons: refused {r}" for r in out.refused]
    if changes:
        out.first = baseline.with_changes({k: v for k, (v, _) in changes.items()})
        ids = sorted({ls.id for _, ls in changes.values()})
        out.first_why = [
            f"lessons of earlier runs in this exact scope ({', '.join(ids)}): their fixes on the baseline",
            *(
                f"{ls.id}: {ls.describe_fix()} cured {ls.failure.failure_class} in run {ls.source.run}"
                for ls in _uniq(changes)
            ),
        ]
    return out


def _uniq(changes: dict[str, tuple[FlagValue | None, Lesson]]) -> list[Lesson]:
    seen: dict[str, Lesson] = {}
    for _, ls in changes.values():
        seen.setdefault(ls.id, ls)
    return list(seen.values())


def _weakest_copies(lessons: list[tuple[Lesson, str]], notes: list[str]) -> list[tuple[Lesson, str]]:
    """One copy per lesson id: where merged files kept copies that disagree, the weakest (a
    contradiction outweighs a confirmation), said in the notes."""
    by_id: dict[str, tuple[Lesson, str]] = {}
    for ls, where in lessons:
        have = by_id.get(ls.id)
        if have is None:
            by_id[ls.id] = (ls, where)
        elif ls.strength != have[0].strength:
            weaker = (ls, where) if ls.strength < have[0].strength else have
            notes.append(
                f"lesson {ls.id}: copies disagree (strength {have[0].strength:g} and {ls.strength:g}); "
                f"the weaker is used ({weaker[1]})"
            )
            by_id[ls.id] = weaker
    return list(by_id.values())


def _fix_here(
    lesson: Lesson, target: Target, baseline: Candidate
) -> tuple[dict[str, FlagValue | None], bool, str]:
    """The fix in this engine's own flag names; whether the lesson is refused (a fix this engine
    version cannot take) and why it is not used here (empty: it is)."""
    spec = target.spec
    fix: dict[str, FlagValue | None] = {}
    for c in lesson.fix:
        name = c.flag
        if name.startswith("--") and spec is not None:
            opt = spec.resolve(name)
            if opt is None:
                return (
                    {},
                    True,
                    (
                        f"{lesson.id}: its fix sets {name}, which {target.engine.log_dialect} "
                        f"{target.version} does not accept (its --help)"
                    ),
                )
            name = opt.name
        if why := reserved_flag([name], spec, target.engine.info.model_flag):
            return {}, True, f"{lesson.id}: its fix sets a flag bringup sets itself: {why}"
        have = baseline.env_dict.get(name[4:]) if name.startswith("env:") else baseline.flag_dict.get(name)
        if normalise(have) != normalise(c.before):
            return (
                {},
                False,
                f"{lesson.id}: not for this baseline (its fix changes {c.flag} from {c.before!r}; here {have!r})",
            )
        fix[name] = tuple(c.after) if isinstance(c.after, list) else c.after
    return fix, False, ""


def _add_env_factors(strategy: Strategy, fix: dict[str, FlagValue | None]) -> None:
    """A variable the fix sets joins the space (a flag joins through the engine's --help)."""
    for name, value in fix.items():
        if not name.startswith("env:") or strategy.space.get(name) is not None or strategy.env is None:
            continue
        f = as_factor(
            strategy.env.var(name[4:]), [str(value)] if isinstance(value, str) else [], origin="lesson"
        )
        if f is not None:
            strategy.add_factor(f)


def _take(
    changes: dict[str, tuple[FlagValue | None, Lesson]],
    fix: dict[str, FlagValue | None],
    lesson: Lesson,
    notes: list[str],
) -> bool:
    """The lesson's fix joins the first candidate, unless a stronger exact lesson set one of its
    flags otherwise (two fixes that disagree are not mixed)."""
    for name, value in fix.items():
        if name in changes and normalise(changes[name][0]) != normalise(value):
            other = changes[name][1]
            if other.strength >= lesson.strength:
                notes.append(
                    f"lesson {lesson.id}: not in the first candidate: {other.id} sets {name} otherwise"
                )
                return False
    for name, value in fix.items():
        changes[name] = (value, lesson)
    return True


def _why(lesson: Lesson, r: Reach) -> str:
    how = "exact scope" if r.kind == "exact" else "near: " + "; ".join(r.why)
    return f"lesson {lesson.id} ({how}; weight {r.weight:.2f}) from run {lesson.source.run} on {lesson.source.machine}"


def _use(lesson: Lesson, r: Reach, first: bool, where: str) -> LessonUse:
    return LessonUse(
        id=lesson.id,
        how="exact" if r.kind == "exact" else "near",
        weight=r.weight,
        first=first,
        why=r.why,
        where=where,
        lesson=lesson.model_dump(mode="json", by_alias=True, exclude_none=True),
    )
