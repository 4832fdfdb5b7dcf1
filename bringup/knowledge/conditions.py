"""Conditions: when a scenario entry or a knowledge rule applies, as a predicate over flags and facts.

A condition is written in YAML as a mapping ``{key: test, ...}`` (all must hold) or a list of
such mappings (any may hold). Keys are engine flags spelled without the dash prefix (aliases and
argparse-style prefixes resolve through the engine's help, so ``tp`` and ``tp-size`` are the same
key) or ``env:NAME`` for an environment variable of the server process. A test is a value
(equality), a list (any of) or a mapping of operators. Numbers compare numerically, so the
string ``"0.95"`` given on a command line equals the YAML number ``0.95``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

OPERATORS = ("eq", "ne", "gt", "ge", "lt", "le", "in", "not_in", "present", "absent")
_NUMBER = re.compile(r"^\s*-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConditionError(ValueError):
    """A condition that cannot be compiled; `where` is the field path inside the scenario."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


def as_number(v: Any) -> float | None:
    """A float for numbers and numeric strings; None for anything else (bools are not numbers)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and _NUMBER.match(v):
        return float(v)
    return None


def _as_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if v is None:
        return False  # an absent switch or env var is off
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    return None


def values_equal(actual: Any, expected: Any) -> bool:
    """Equality the way a person reading a command line means it."""
    if expected is None or actual is None:
        # `flag: null` means "not set"; a switch that is off counts as not set too.
        return (actual is None or actual is False) and (expected is None or expected is False)
    if isinstance(expected, bool) or isinstance(actual, bool):
        a, b = _as_bool(actual), _as_bool(expected)
        return a is not None and a == b
    na, nb = as_number(actual), as_number(expected)
    if na is not None and nb is not None:
        return na == nb
    if isinstance(actual, (list, tuple)) or isinstance(expected, (list, tuple)):
        la = [str(x) for x in (actual if isinstance(actual, (list, tuple)) else [actual])]
        lb = [str(x) for x in (expected if isinstance(expected, (list, tuple)) else [expected])]
        return la == lb
    return str(actual) == str(expected)


def _present(v: Any) -> bool:
    return v is not None and v is not False


@dataclass(frozen=True)
class Test:
    """One operator applied to one key."""

    key: str  # as written in the scenario (for messages)
    target: str  # a canonical flag ("--kv-cache-dtype") or "env:NAME"
    op: str
    value: Any

    def holds(self, actual: Any) -> bool:
        op, v = self.op, self.value
        if op == "eq":
            return values_equal(actual, v)
        if op == "ne":
            return not values_equal(actual, v)
        if op == "in":
            return any(values_equal(actual, x) for x in v)
        if op == "not_in":
            return not any(values_equal(actual, x) for x in v)
        if op == "present":
            return _present(actual) == bool(v)
        if op == "absent":
            return (not _present(actual)) == bool(v)
        a, b = as_number(actual), as_number(v)
        if a is None or b is None:
            return False  # an unset or non-numeric value is never greater or smaller
        return {"gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b}[op]


@dataclass(frozen=True)
class Clause:
    tests: tuple[Test, ...]

    def holds(self, lookup: Callable[[str], Any]) -> bool:
        return all(t.holds(lookup(t.target)) for t in self.tests)


@dataclass(frozen=True)
class Condition:
    """Any clause holds (a clause: all its tests hold). No clause at all: always true."""

    clauses: tuple[Clause, ...] = ()

    def holds(self, lookup: Callable[[str], Any]) -> bool:
        return not self.clauses or any(c.holds(lookup) for c in self.clauses)

    @property
    def targets(self) -> set[str]:
        return {t.target for c in self.clauses for t in c.tests}

    def describe(self) -> str:
        if not self.clauses:
            return "always"
        parts = []
        for c in self.clauses:
            parts.append(" and ".join(_describe_test(t) for t in c.tests))
        return " | ".join(f"({p})" if len(self.clauses) > 1 else p for p in parts)


def _describe_test(t: Test) -> str:
    name = t.key
    if t.op == "eq":
        return f"{name}={t.value}"
    if t.op == "in":
        return f"{name} in {list(t.value)}"
    if t.op in ("present", "absent"):
        return f"{name} {t.op}" if t.value else f"{name} not {t.op}"
    sym = {"ne": "!=", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "not_in": "not in"}[t.op]
    return f"{name} {sym} {t.value}"


def _check_scalar(where: str, v: Any) -> None:
    if isinstance(v, (dict, list)):
        raise ConditionError(where, f"expected a single value, got {type(v).__name__} {v!r}")


def _compile_tests(key: str, target: str, raw: Any, where: str) -> list[Test]:
    if isinstance(raw, list):
        for i, x in enumerate(raw):
            _check_scalar(f"{where}[{i}]", x)
        return [Test(key, target, "in", tuple(raw))]
    if not isinstance(raw, dict):
        return [Test(key, target, "eq", raw)]
    if not raw:
        raise ConditionError(where, "empty operator mapping; use a value, a list, or {op: value}")
    tests = []
    for op, v in raw.items():
        w = f"{where}.{op}"
        if op not in OPERATORS:
            raise ConditionError(w, f"unknown operator {op!r}; known: {', '.join(OPERATORS)}")
        if op in ("present", "absent"):
            if not isinstance(v, bool):
                raise ConditionError(w, f"{op} takes true or false, got {v!r}")
        elif op in ("in", "not_in"):
            if not isinstance(v, list):
                raise ConditionError(w, f"{op} takes a list, got {v!r}")
            for i, x in enumerate(v):
                _check_scalar(f"{w}[{i}]", x)
            v = tuple(v)
        elif op in ("gt", "ge", "lt", "le"):
            if as_number(v) is None:
                raise ConditionError(w, f"{op} needs a number, got {v!r}")
        else:
            _check_scalar(w, v)
        tests.append(Test(key, target, op, v))
    return tests


def compile_condition(raw: Any, resolve_key: Callable[[str], str], where: str) -> Condition:
    """Compile the YAML form. `resolve_key` turns a written key into its target or raises
    ValueError with a message (an unknown flag for this engine version)."""
    if raw is None:
        return Condition()
    mappings: list[tuple[str, Mapping[str, Any]]]
    if isinstance(raw, dict):
        mappings = [(where, raw)]
    elif isinstance(raw, list):
        if not raw:
            raise ConditionError(where, "an empty list matches nothing; leave `when` out to always match")
        mappings = []
        for i, m in enumerate(raw):
            if not isinstance(m, dict):
                raise ConditionError(f"{where}[{i}]", f"expected a mapping of flag: test, got {m!r}")
            mappings.append((f"{where}[{i}]", m))
    else:
        raise ConditionError(
            where, f"expected a mapping (all hold) or a list of mappings (any holds), got {raw!r}"
        )
    clauses = []
    for w, m in mappings:
        tests: list[Test] = []
        for key, test in m.items():
            kw = f"{w}.{key}"
            try:
                target = resolve_key(str(key))
            except ValueError as e:
                raise ConditionError(kw, str(e)) from None
            tests.extend(_compile_tests(str(key), target, test, kw))
        clauses.append(Clause(tuple(tests)))
    return Condition(tuple(clauses))
