"""Minimizing: the smallest set of changes from a failing baseline that still works (delta debugging).

Zeller's ddmin over the changes between the baseline and the working candidate. Each test is a
launch (counted apart from the search's launches); a subset whose predicted effective
configuration was already launched reuses that outcome instead of launching again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bringup.core.candidate import Candidate, Change
from bringup.observe.outcome import Outcome


def apply(baseline: Candidate, changes: list[Change]) -> Candidate:
    return baseline.with_changes({c.flag: c.after for c in changes})


def ddmin(changes: list[Change], works: Callable[[list[Change]], bool]) -> list[Change]:
    """A 1-minimal subset of `changes` for which `works` holds (it must hold for all of them)."""
    c = list(changes)
    n = 2
    while len(c) >= 2:
        chunks = _split(c, n)
        reduced = False
        for chunk in chunks:
            if works(chunk):
                c, n, reduced = chunk, 2, True
                break
        if not reduced and n > 2:
            for chunk in chunks:
                comp = [x for x in c if x not in chunk]
                if works(comp):
                    c, n, reduced = comp, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(c):
                break
            n = min(len(c), 2 * n)
    return c


def _split(c: list[Change], n: int) -> list[list[Change]]:
    size, rem = divmod(len(c), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (1 if k < rem else 0)
        if j > i:
            out.append(c[i:j])
        i = j
    return out


class MinimizeBudgetSpent(Exception):
    """The launch budget for minimizing ran out before ddmin finished."""


@dataclass
class MinimalFix:
    changes: list[Change]  # the minimal set of changes from the baseline
    verified: bool  # ddmin finished within its budget (the set is 1-minimal)
    final: Candidate  # the baseline with those changes, when it was seen working; else the working one


def minimal_fix(
    baseline: Candidate,
    working: Candidate,
    key_of: Callable[[Candidate], str],
    outcomes: dict[str, Outcome],
    launch: Callable[[Candidate], Outcome],
    budget: int,
    ignored: set[str] | frozenset[str] = frozenset(),
) -> MinimalFix:
    """ddmin between the baseline and the working candidate, launching (through `launch`) only
    subsets whose predicted effective configuration (`key_of`) has no outcome yet, and at most
    `budget` of them. A change to a flag the engine ignores (`ignored`: frozen factors) cannot
    be part of the fix. `outcomes` is updated with every launch."""
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

    if not effective:
        return MinimalFix([], False, working)
    try:
        minimal = ddmin(effective, works) if len(effective) > 1 else effective
        verified = True
    except MinimizeBudgetSpent:
        minimal, verified = effective, False
    final = apply(baseline, minimal)
    seen = outcomes.get(key_of(final))
    return MinimalFix(minimal, verified, final if seen is not None and seen.status == "works" else working)
