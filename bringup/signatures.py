"""Failure signatures: log patterns that name a failure class, its phase, what it implicates.

Signatures live in ``bringup/data/signatures/*.yaml`` (schema in docs/knowledge.md). The
classifier finds the root-cause lines of a failed launch, not the generic last error: every
signature has a priority, and wrappers such as vLLM's "Engine core initialization failed. See
root cause above." carry a low one, so they are evidence only when nothing better matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bringup.knowledge_files import (
    DATA,
    classes,
    phase_index,
    phases,
    validated_entries,
)
from bringup.safetext import safe_line

SIGNATURE_DIR = DATA / "signatures"
GENERIC_PRIORITY = 10  # at or below: a wrapper line, never the evidence when a better line exists


class Adjust(BaseModel):
    """Which way a numeric flag must move after this failure, and a bound read from the line."""

    model_config = ConfigDict(extra="forbid")
    direction: Literal["lower", "raise"]
    limit: str | None = None  # arithmetic over the pattern's named groups, e.g. "avail / total"


class Signature(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    id: str
    pattern: str
    failure_class: str = Field(alias="class")
    engines: list[str] | None = None  # None: any engine
    phase: str | None = None  # the phase this error strikes in, when the log's markers cannot tell
    fatal: bool = True  # seeing it ends the trial at once (fail fast)
    priority: int = 50
    implicates: list[str] = Field(default_factory=list)  # flags, env:NAME, or model./gpu. facts
    hint: str
    source: str
    adjust: dict[str, Adjust] = Field(default_factory=dict)  # numeric flags, in order of preference

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"pattern does not compile: {e}") from e
        return v

    @field_validator("failure_class")
    @classmethod
    def _known_class(cls, v: str) -> str:
        if v not in classes():
            raise ValueError(f"unknown class {v!r}; known: {', '.join(classes())}")
        return v

    @field_validator("phase")
    @classmethod
    def _known_phase(cls, v: str | None) -> str | None:
        if v is not None and v not in phases():
            raise ValueError(f"unknown phase {v!r}; known: {', '.join(phases())}")
        return v

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def applies_to(self, engine: str | None) -> bool:
        return self.engines is None or engine is None or engine in self.engines

    @property
    def generic(self) -> bool:
        return self.priority <= GENERIC_PRIORITY


def signature_by_id(sig_id: str | None) -> Signature | None:
    return next((s for s in default_signatures() if s.id == sig_id), None) if sig_id else None


def eval_limit(expr: str, groups: dict[str, str | None]) -> float | None:
    """Evaluate "avail / total" style arithmetic over a match's named groups (numbers only)."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and groups.get(node.id) is not None:
            return float(str(groups[node.id]).replace(",", ""))
        raise ValueError(f"cannot evaluate {ast.dump(node)}")

    try:
        return ev(ast.parse(expr, mode="eval").body)
    except (ValueError, SyntaxError, ZeroDivisionError):
        return None


@lru_cache(maxsize=512)
def _compile(p: str) -> re.Pattern[str]:
    return re.compile(p)


def load_signatures(paths: list[Path] | None = None) -> list[Signature]:
    paths = paths if paths is not None else sorted(SIGNATURE_DIR.glob("*.yaml"))
    return [sig for _, _, sig in validated_entries(paths, "signatures", Signature)]


@lru_cache(maxsize=1)
def default_signatures() -> tuple[Signature, ...]:
    return tuple(load_signatures())


@dataclass
class Hit:
    index: int  # line number in the log (0-based)
    line: str
    signature: Signature


@dataclass
class Classification:
    failure_class: str
    phase: str | None
    evidence: list[str]
    hint: str
    implicates: list[str] = field(default_factory=list)
    signature_id: str | None = None
    source: str | None = None
    hits: list[Hit] = field(default_factory=list)


class Matcher:
    """Matches log lines against the signatures of one engine."""

    def __init__(self, engine: str | None, signatures: tuple[Signature, ...] | list[Signature] | None = None):
        sigs = signatures if signatures is not None else default_signatures()
        self.engine = engine
        self.signatures = [s for s in sigs if s.applies_to(engine)]

    def match(self, line: str) -> list[Signature]:
        return [s for s in self.signatures if s.regex.search(line)]

    def scan(self, lines: list[str]) -> list[Hit]:
        return [Hit(i, ln, s) for i, ln in enumerate(lines) for s in self.match(ln)]


_ERRORISH = re.compile(r"(Error|Exception|error:|FAILED|Traceback|Assertion|assert|fatal|Killed)", re.I)


def _clean(line: str) -> str:
    return safe_line(line.rstrip())  # no escape sequences or control bytes reach a terminal or report


def classify(lines: list[str], engine: str | None, phase_reached: str | None,
             signatures: tuple[Signature, ...] | list[Signature] | None = None,
             max_evidence: int = 6) -> Classification:
    """Pick the root cause among every signature hit in a log.

    The root cause is the hit with the highest priority (the earliest line among equals). The
    evidence is its line, then the other specific (non-generic) hits in log order; generic
    wrapper lines appear only when nothing specific matched.
    """
    # Non-fatal signatures are warnings worth knowing, never a root cause.
    hits = [h for h in Matcher(engine, signatures).scan(lines) if h.signature.fatal]
    if not hits:
        tail = [ln for ln in lines if _ERRORISH.search(ln)][-max_evidence:]
        if not tail:
            tail = [ln for ln in lines if ln.strip()][-3:]
        return Classification("unknown", phase_reached, [_clean(t) for t in tail],
                              "No known signature matched: read the evidence lines and the log; "
                              "add a signature to bringup/data/signatures/ once the cause is known.")
    best = max(hits, key=lambda h: (h.signature.priority, -h.index))
    specific = [h for h in hits if not h.signature.generic]
    chosen = specific if specific else hits
    ordered: list[str] = []
    for h in sorted(chosen, key=lambda h: (h.index != best.index, h.index)):
        c = _clean(h.line)
        if c not in ordered:
            ordered.append(c)
    evidence = ordered[:max_evidence]
    sig = best.signature
    # Once the server was ready the trial knows exactly when it died (which probe); before
    # that, a signature that knows its phase is more precise than the coarse log markers.
    served = phase_index(phase_reached) >= phase_index("ready")
    return Classification(
        failure_class=sig.failure_class,
        phase=phase_reached if served else (sig.phase or phase_reached),
        evidence=evidence,
        hint=sig.hint,
        implicates=list(sig.implicates),
        signature_id=sig.id,
        source=sig.source,
        hits=hits,
    )
