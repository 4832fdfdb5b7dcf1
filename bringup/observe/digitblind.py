"""Whether a regex can tell one digit from another: the ground for reading a log's lines with
their numbers ignored, exactly.

A flood of log lines differs mostly in its numbers (timestamps, counters, throughputs). A pattern
that cannot tell `7` from `0` (no digit written in it, no class holding some digits but not others,
no backreference) gives the same answer on a line and on the line with every digit made `0`: so
its answer for one line of a flood is its answer for all of them, and a matcher may remember it
(bringup/observe/signatures.py `Matcher`). A pattern that can (`exit code -9`, `[Errno 98]`,
`SM>=80`) is always asked again.
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from typing import Any

# The regex compiler's own parser and vocabulary (re._parser in Python 3.11+): a pattern's tree.
P: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")

_DIGITS = frozenset(range(ord("0"), ord("9") + 1))


def _set_blind(items: list) -> bool:
    """A character class is blind when it holds every digit or none."""
    held: set[int] = set()
    for op, av in items:
        if op is C.LITERAL and av in _DIGITS:
            held.add(av)
        elif op is C.RANGE:
            held |= _DIGITS & set(range(av[0], av[1] + 1))
        elif op is C.CATEGORY and av in (
            C.CATEGORY_DIGIT,
            C.CATEGORY_NOT_DIGIT,
            C.CATEGORY_WORD,
            C.CATEGORY_NOT_WORD,
        ):
            held |= _DIGITS if av in (C.CATEGORY_DIGIT, C.CATEGORY_WORD) else set()
    return not held or held == _DIGITS


def _children(op: Any, av: Any) -> list:
    """The sub-patterns of a node (a group, a branch, a repeat, a lookaround)."""
    if op is C.SUBPATTERN:
        return [av[3]]
    if op is C.BRANCH:
        return list(av[1])
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        return [av[2]]
    if op in (C.ASSERT, C.ASSERT_NOT):
        return [av[1]]
    if op is getattr(C, "ATOMIC_GROUP", None):
        return [av]
    return []


def _blind(items: Any) -> bool:
    for op, av in items:
        if op in (C.LITERAL, C.NOT_LITERAL) and av in _DIGITS:
            return False
        if op is C.IN and not _set_blind(av):
            return False
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            return False
        if not all(_blind(s) for s in _children(op, av)):
            return False
    return True


@lru_cache(maxsize=4096)
def _blind_pattern(pattern: str, flags: int) -> bool:
    try:
        return _blind(P.parse(pattern, flags))
    except (re.error, TypeError, ValueError, AttributeError, IndexError):
        return False  # not understood: asked again every time


def digit_blind(rx: re.Pattern[str]) -> bool:
    """True when replacing every ASCII digit of a text by `0` never changes whether `rx` matches it."""
    return _blind_pattern(rx.pattern, rx.flags)
