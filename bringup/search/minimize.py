"""Minimizing: the smallest set of changes from a failing baseline that still works.

Greedy deletion in passes, the way Hypothesis's shrinker deletes: try the working set without one
change; keep the deletion when it still works; repeat until a pass deletes nothing. Each test is a
launch (counted apart from the search's launches); a subset whose predicted effective
configuration was already launched reuses that outcome instead of launching again.

Why not Zeller's ddmin, which this replaced: the search's working candidate usually needs most
of its changes (each was made for a failure it saw), and ddmin starts with halves and single
changes, subsets that cannot work when three of four changes are needed; on a real three-mistake
vLLM CPU bring-up it spent all six of its launches on them and reported four changes where three
sufficed. One pass of deletions costs one test per change, the least that shows each change is
needed. The order comes from the model: the deletion it believes likeliest to still work first,
so that the changes tested after the last deletion need no second look (their removal already
failed on the final set).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bringup.core.candidate import Candidate, Change
from bringup.observe.outcome import Outcome


def apply(baseline: Candidate, changes: list[Change]) -> Candidate:
    return baseline.with_changes({c.flag: c.after for c in changes})


def shrink(
    changes: list[Change],
    works: Callable[[list[Change]], bool],
    likelihood: Callable[[list[Change]], float] | None = None,
    blames: Callable[[list[Change], Change], bool] | None = None,
) -> list[Change]:
    """A 1-minimal subset of ``changes`` for which ``works`` holds (it must hold for all of them;
    the empty set, the baseline, is taken to fail and is never tested). ``likelihood`` ranks the
    deletions of a pass (the subset likeliest to work first); without it, the given order.

    A deletion that failed is tried again on a smaller set (configurations are not monotone: a
    change can be needed only beside another that it compensates), unless ``blames`` says that
    failure named the deleted change itself (the setting it restores is what the failure is
    about, and restoring it fails beside fewer changes too)."""
    c = list(changes)
    failed_on: dict[int, tuple[int, ...] | None] = {}  # a change's index -> the set its deletion
    # failed on; None: whatever the set (the failure blamed the change itself)

    def ranked() -> list[int]:
        idx = [i for i in range(len(changes)) if changes[i] in c]
        if likelihood is None:
            return idx
        return sorted(idx, key=lambda i: -likelihood([x for x in c if x is not changes[i]]))

    deleted = True
    while deleted and len(c) > 1:
        deleted = False
        for i in ranked():
            now = tuple(j for j in range(len(changes)) if changes[j] in c)
            if changes[i] not in c or len(c) == 1 or (i in failed_on and failed_on[i] in (now, None)):
                continue
            rest = [x for x in c if x is not changes[i]]
            if works(rest):
                c, deleted = rest, True
            else:
                failed_on[i] = None if blames is not None and blames(rest, changes[i]) else now
    return c


class MinimizeBudgetSpent(Exception):
    """The launch budget for minimizing ran out before the shrinker finished."""


@dataclass
class MinimalFix:
    changes: list[Change]  # the minimal set of changes from the baseline
    verified: bool  # the shrinker finished within its budget (the set is 1-minimal)
    final: Candidate  # the baseline with those changes, when it was seen working; else the working one


def minimal_fix(
    baseline: Candidate,
    working: Candidate,
    key_of: Callable[[Candidate], str],
    outcomes: dict[str, Outcome],
    launch: Callable[[Candidate], Outcome],
    budget: int,
    ignored: set[str] | frozenset[str] = frozenset(),
    likelihood: Callable[[Candidate], float] | None = None,
) -> MinimalFix:
    """Shrink the changes between the baseline and the working candidate, launching (through
    `launch`) only subsets whose predicted effective configuration (`key_of`) has no outcome yet,
    and at most `budget` of them. A change to a flag the engine ignores (`ignored`: frozen
    factors) cannot be part of the fix. `likelihood` (the model's chance that a candidate works)
    orders the deletions. `outcomes` is updated with every launch."""
    base_key = key_of(baseline)
    effective = [c for c in working.diff(baseline) if c.flag not in ignored]
    launched = 0

    def works(subset: list[Change]) -> bool:
        nonlocal launched
        cand = apply(baseline, subset)
        key = key_of(cand)
        if key == base_key and base_key not in outcomes:
            return False  # the baseline is what failed (or was predicted to)
        if key in outcomes:
            return outcomes[key].status == "works"
        if launched >= budget:
            raise MinimizeBudgetSpent
        launched += 1
        out = launch(cand)
        outcomes[key] = out
        return out.status == "works"

    def chance(subset: list[Change]) -> float:
        """A subset already seen ranks by what it did; an unseen one by the model."""
        cand = apply(baseline, subset)
        seen = outcomes.get(key_of(cand))
        if seen is not None:
            return 1.0 if seen.status == "works" else -1.0
        return likelihood(cand) if likelihood is not None else 0.0

    def blames(subset: list[Change], change: Change) -> bool:
        """The subset's failure names the setting the deleted change restores."""
        out = outcomes.get(key_of(apply(baseline, subset)))
        return out is not None and (change.flag in out.implicates or change.flag in out.implicated_levels)

    if not effective:
        return MinimalFix([], False, working)
    try:
        minimal = shrink(effective, works, chance, blames) if len(effective) > 1 else effective
        verified = True
    except MinimizeBudgetSpent:
        minimal, verified = effective, False
    final = apply(baseline, minimal)
    seen = outcomes.get(key_of(final))
    return MinimalFix(minimal, verified, final if seen is not None and seen.status == "works" else working)
