"""Delta debugging: the smallest set of changes from a failing baseline that still works.

Zeller's ddmin over the changes between the baseline and the working candidate. Each test is a
launch (counted apart from the search's launches); a subset whose predicted effective
configuration was already launched reuses that outcome instead of launching again.
"""

from __future__ import annotations

from collections.abc import Callable

from bringup.candidate import Candidate, Change


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
