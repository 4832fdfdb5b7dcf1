"""Failure signatures: log patterns that name a failure class, its phase, what it implicates.

Signatures live in ``bringup/data/signatures/*.yaml`` (schema in docs/knowledge.md). The
classifier finds the root-cause lines of a failed launch, not the generic last error: every
signature has a priority, and wrappers such as vLLM's "Engine core initialization failed. See
root cause above." carry a low one, so they are evidence only when nothing better matched.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bringup.core.datafiles import (
    DATA,
    classes,
    phase_index,
    phases,
    validated_entries,
)
from bringup.observe.digitblind import digit_blind
from bringup.observe.remedies import Remedy, find_remedies
from bringup.observe.tracebacks import LogAnalysis, PyException, errorish, strip_prefix
from bringup.observe.unknown import unknown_hint

if TYPE_CHECKING:
    from bringup.observe.rootcause import RootRule
from bringup.guard.safetext import safe_line

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
    """A signature, or a root-cause rule seen as one (the strategy reads its adjust)."""
    if not sig_id:
        return None
    sig = next((s for s in default_signatures() if s.id == sig_id), None)
    if sig is None:
        from bringup.observe.rootcause import rule_by_id

        rule = rule_by_id(sig_id)
        sig = signature_for_rule(rule) if rule is not None else None
    return sig


def eval_limit(expr: str, groups: Mapping[str, str | None]) -> float | None:
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


def _implicates(hit: Hit) -> list[str]:
    """A signature's implicated settings, the flag its own pattern captured first (argparse's
    "error: argument --dtype: invalid choice": the group `flag` names the setting it refused)."""
    out = list(hit.signature.implicates)
    m = hit.signature.regex.search(hit.line)
    flag = m.groupdict().get("flag") if m else None
    if flag and flag.startswith("--") and flag not in out:
        out.insert(0, flag)
    return out


@dataclass
class Classification:
    failure_class: str
    phase: str | None
    evidence: list[str]  # evidence[0] is the root-cause line, as the log printed it
    hint: str
    implicates: list[str] = field(default_factory=list)
    signature_id: str | None = (
        None  # a signature's id, or a root-cause rule's id (bringup/data/rootcause.yaml)
    )
    source: str | None = None
    hits: list[Hit] = field(default_factory=list)
    # factor -> the levels that load the package the failure names (missing-dependency and
    # failures raised inside a kernel library); empty when the failure names none.
    implicated_levels: dict[str, list[str]] = field(default_factory=dict)
    root_exception: str | None = None  # "Type: message in function (file:line)" of the root exception
    # The engine's own advice beneath the failure: (flag, value) pairs in the order it printed them
    # (bringup/observe/remedies.py); the search tries them first.
    remedies: list[Remedy] = field(default_factory=list)
    # the root exception's frames, innermost last ("vllm/v1/sample/ops/topk_topp_sampler.py:flashinfer_sample"):
    # the code it passed through names components its own line does not
    frames: list[str] = field(default_factory=list)


MEMO_LINES = 8192  # distinct lines (numbers ignored) a matcher remembers
_ZEROS = bytes.maketrans(b"123456789", b"000000000")  # a digit read as 0 (cheap: bytes.translate)


class Matcher:
    """Matches log lines against the signatures of one engine.

    A line is matched as printed and without its log decorations (process tag, level,
    timestamp), so a pattern anchored at the start of a message still finds it.
    """

    def __init__(self, engine: str | None, signatures: tuple[Signature, ...] | list[Signature] | None = None):
        sigs = signatures if signatures is not None else default_signatures()
        self.engine = engine
        self.signatures = [s for s in sigs if s.applies_to(engine)]
        # Signatures that cannot tell one digit from another (bringup/observe/digitblind.py) give
        # one answer for every line of a flood that differs only in its numbers: remembered by the
        # line with its digits read as 0 (the decorations stripped are read the same way). The
        # others are asked every time.
        self._blind = [(s, s.regex.search) for s in self.signatures if digit_blind(s.regex)]
        self._sensitive = [(s, s.regex.search) for s in self.signatures if not digit_blind(s.regex)]
        self._order = {id(s): i for i, s in enumerate(self.signatures)}
        self._memo: dict[bytes, list[Signature]] = {}

    @staticmethod
    def _hits(line: str, bare: str, searches: list) -> list[Signature]:
        if bare == line:
            return [s for s, search in searches if search(line)]
        return [s for s, search in searches if search(line) or search(bare)]

    def match(self, line: str) -> list[Signature]:
        key = line.encode("utf-8", "surrogatepass").translate(_ZEROS)
        blind = self._memo.get(key)
        bare = None
        if blind is None:
            bare = strip_prefix(line)[0]
            blind = self._hits(line, bare, self._blind)
            if len(self._memo) >= MEMO_LINES:
                self._memo.clear()
            self._memo[key] = blind
        if not self._sensitive:
            return list(blind)
        sens = self._hits(line, bare if bare is not None else strip_prefix(line)[0], self._sensitive)
        return sorted([*blind, *sens], key=lambda s: self._order[id(s)]) if sens else list(blind)

    def scan(self, lines: list[str]) -> list[Hit]:
        return [Hit(i, ln, s) for i, ln in enumerate(lines) for s in self.match(ln)]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _clean(line: str) -> str:
    """The line as the log printed it, without terminal colour codes; no escape sequences or
    control bytes reach a terminal or report."""
    return safe_line(_ANSI.sub("", line).rstrip())[:2000]


def _phase(
    served: bool, phase_reached: str | None, frames_phase: str | None, known: str | None
) -> str | None:
    """Once ready, the trial knows when it died (which probe); before that the frames of the root
    exception are the most precise, then the phase a signature or rule knows where the log's markers
    reached no further (a memory reservation is KV allocation even when the log last said
    "distributed init"), then the log markers: a later marker stands (a Hub id refused after the
    weights loaded is not an argument refused at parsing)."""
    if served:
        return phase_reached
    if known and phase_index(phase_reached) > phase_index(known):
        known = None  # a later marker stands: the log got past the phase the pattern usually strikes in
    return frames_phase or known or phase_reached


def failure_start(analysis: LogAnalysis) -> int:
    """The first line of the failure: its first exception (with or without a traceback) or its
    first ERROR record; 0 when the log shows neither. The engine's advice before it (deprecation
    notes, tuning tips) is not a remedy for this failure."""
    starts = [e.line.index for e in analysis.exceptions if e.is_root_candidate or e.is_wrapper]
    starts += [min(e.span) for e in analysis.exceptions if e.is_root_candidate]
    starts += [ln.index for ln in analysis.lines if ln.level in ("ERROR", "CRITICAL")]
    return min(starts, default=0)


MAX_FRAMES = 12


def frame_names(exc: PyException) -> list[str]:
    """The exception's innermost frames as "pkg/module.py:function", innermost last."""
    return [f"{f.module_path}:{f.func}" for f in exc.frames[-MAX_FRAMES:]]


def classify(
    lines: list[str],
    engine: str | None,
    phase_reached: str | None,
    signatures: tuple[Signature, ...] | list[Signature] | None = None,
    max_evidence: int = 6,
    settings: dict[str, str] | None = None,
    matcher: Matcher | None = None,
) -> Classification:
    """Find the root cause of a failed launch in its log, and the remedies the engine printed.
    ``settings``: the launch's own flags and variables ("--flag" or "env:NAME" -> value), when the
    caller launched it (a trial); else what the log's dump of its arguments says. ``matcher``: one
    that already read these lines (a trial's), whose memory of them is reused."""
    from bringup.observe.tracebacks import parse_log

    analysis = parse_log(lines)
    if matcher is None or signatures is not None or matcher.engine != engine:
        matcher = Matcher(engine, signatures)
    cls = _classify(lines, matcher, phase_reached, max_evidence, analysis, settings)
    if cls.failure_class == "model-load":
        _setting_not_model(cls, lines, engine, settings)
    cls.remedies = find_remedies(lines[failure_start(analysis) :], engine)
    if analysis.root is not None:
        cls.frames = frame_names(analysis.root)
    return cls


def _setting_not_model(
    cls: Classification, lines: list[str], engine: str | None, settings: dict[str, str] | None
) -> None:
    """A "cannot read the model" failure whose words quote the value of another setting of the
    launch (a draft model's path in a speculative config, a config or tokenizer path) is that
    setting's: bad-flag, the setting first among the suspects (issue 36, a class from where the
    path came from)."""
    from bringup.observe.links import quoted, value_tokens
    from bringup.observe.rootcause import known_settings

    words = [*cls.evidence, cls.root_exception or ""]
    for flag, value in known_settings(lines, engine, settings).items():
        if any(quoted(words, tok) for tok in value_tokens(value) if "/" in tok or len(tok) >= 6):
            cls.failure_class = "bad-flag"
            cls.implicates = [flag, *(i for i in cls.implicates if i != flag)]
            cls.hint = (
                f"The engine could not read what {flag} names (its value is quoted in the error): fix "
                "the path or name, or drop the setting."
            )
            return


LEAD_UP = 8  # records of the failing process just before its failure that a person reads upward


def lead_up(analysis: LogAnalysis, root: PyException, settings: dict[str, str]) -> list[str]:
    """The records the failing process logged just before its failure that name a setting of the
    launch by its field (issue 36: "the setting's destination or config-field name appears"). A
    person reads upward from a traceback: vLLM logs "reserved 150.0 GiB memory for KV Cache as
    specified by kv_cache_memory_bytes config" three records before the CUDA OOM that the user's
    ``--kv-cache-memory-bytes`` caused, and the OOM itself names nothing. Only a field spelled as an
    identifier (with an underscore: "max_model_len", never "model" or "port", which prose uses) or
    a variable's name counts, in a record that names no other setting of the launch: never the
    engine's dump of its configuration, nor a status line that lists several of its values
    (SGLang's "max_total_num_tokens=..., chunked_prefill_size=8192, max_running_requests=...")."""
    from bringup.observe.effective import config_dump

    names = {
        (f.lstrip("-").replace("-", "_") if f.startswith("--") else f.removeprefix("env:")) for f in settings
    }
    names = {n for n in names if "_" in n and len(n) >= 6}
    if not names:
        return []
    rx = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, sorted(names))) + r")(?![\w-])")
    start = failure_start(analysis)
    mine = [ln for ln in analysis.lines[:start] if ln.tag == root.line.tag and ln.text.strip()]
    return [
        ln.raw for ln in mine[-LEAD_UP:] if len(set(rx.findall(ln.text))) == 1 and not config_dump(ln.raw)
    ]


def _classify(
    lines: list[str],
    matcher: Matcher,
    phase_reached: str | None,
    max_evidence: int,
    analysis: LogAnalysis,
    settings: dict[str, str] | None = None,
) -> Classification:
    """Find the root cause of a failed launch in its log.

    The root exception is the original exception of the first process that failed (parsed
    from the tracebacks, bringup/observe/tracebacks.py). Candidates for the cause: the signatures that
    match its lines or its chain, the specific signatures on lines that belong to no exception
    (a CUDA kernel's assertion, a logged message), and the first root-cause rule that fits the
    exception (bringup/observe/rootcause.py). The highest priority wins; a signature on the lines of
    another process's exception (a consequence) or a generic wrapper line never outranks the
    root exception. With no exception in the log, the best signature hit decides, as before.
    """
    from bringup.observe.rootcause import describe, match_rules

    engine = matcher.engine
    hits = [h for h in matcher.scan(lines) if h.signature.fatal]
    root = analysis.root
    served = phase_index(phase_reached) >= phase_index("ready")
    if root is None:
        return _classify_hits(hits, lines, phase_reached, served, max_evidence, matcher.engine)

    chain = next(c for c in analysis.chains if root in c.exceptions)
    chain_idx = {i for e in chain.exceptions for i in e.span}
    other_exc_idx = {i for e in analysis.exceptions for i in e.span} - chain_idx
    root_idx = set(root.span)
    candidates = [h for h in hits if not h.signature.generic and h.index not in other_exc_idx]
    rm = match_rules(root, engine, phase_reached, lines, settings)
    best = max(candidates, key=lambda h: (h.signature.priority, h.index in root_idx, -h.index), default=None)
    key = root.key_line
    evidence: list[str] = []
    from bringup.observe.rootcause import known_settings

    # the trial's own settings where it gives them (an engine's dump lists values it chose itself)
    before = lead_up(analysis, root, settings if settings else known_settings(lines, engine, None))

    def add(*lines: str) -> None:
        for line in lines:
            c = _clean(line)
            if c and c not in evidence:
                evidence.append(c)

    if best is not None and best.signature.priority >= rm.priority:
        sig = best.signature
        # The root exception is the evidence unless the winning line lies outside its chain
        # (a kernel's own assertion printed before the Python exception that reports it).
        add(best.line if best.index not in chain_idx else key.raw, root.line.raw, *before)
        add(*(h.line for h in sorted(candidates, key=lambda h: h.index)))
        return Classification(
            failure_class=sig.failure_class,
            phase=_phase(served, phase_reached, rm.phase, sig.phase),
            evidence=evidence[:max_evidence],
            hint=sig.hint,
            implicates=_implicates(best),
            signature_id=sig.id,
            source=sig.source,
            hits=hits,
            implicated_levels=rm.implicated_levels,
            root_exception=describe(root),
        )

    add(key.raw, root.line.raw, *before, *rm.notes, *(c.raw for c in root.continuation[:2]))
    add(*(h.line for h in sorted(candidates, key=lambda h: h.index)))
    if rm.rule is not None:
        rule = rm.rule
        return Classification(
            failure_class=rule.failure_class,
            phase=_phase(served, phase_reached, rm.phase, rule.phase),
            evidence=evidence[:max_evidence],
            hint=rule.hint,
            implicates=rm.implicates,
            signature_id=signature_for_rule(rule).id,
            source=rule.source,
            hits=hits,
            implicated_levels=rm.implicated_levels,
            root_exception=describe(root),
        )
    from bringup.observe.rootcause import launch_settings, where_class

    later = chain.exceptions[chain.exceptions.index(root) + 1 :]
    where = where_class(root, engine, rm.phase or phase_reached, lines, settings, later)
    return Classification(
        failure_class=where[0] if where is not None else "unknown",
        phase=_phase(served, phase_reached, rm.phase, None),
        evidence=evidence[:max_evidence],
        hint=(f"Classed {where[0]} by where it was raised ({where[1]}). " if where is not None else "")
        # the launch's own settings when the trial gives them; else (explain) the log's dump of them
        + unknown_hint(describe(root), frame_names(root), settings or launch_settings(lines, engine)),
        implicates=rm.implicates,
        hits=hits,
        implicated_levels=rm.implicated_levels,
        root_exception=describe(root),
    )


def _classify_hits(
    hits: list[Hit],
    lines: list[str],
    phase_reached: str | None,
    served: bool,
    max_evidence: int,
    engine: str | None = None,
) -> Classification:
    """A log with no Python exception: the highest-priority signature hit is the root cause; where
    only a generic line (a wrapper's "died unexpectedly") or nothing matched, an error line that
    names the native source it was raised in gives the class (rootcause.native_where)."""
    from bringup.observe.rootcause import native_where

    specific = [h for h in hits if not h.signature.generic]
    if not specific:
        where = native_where(lines, phase_reached, engine)
        if where is not None:
            first = _clean(where.line)
            rest = [c for h in sorted(hits, key=lambda h: h.index) if (c := _clean(h.line)) != first]
            return Classification(
                failure_class=where.failure_class,
                phase=_phase(served, phase_reached, None, None),
                evidence=[first, *rest][:max_evidence],
                hint=f"Classed {where.failure_class} by where it was raised ({where.why}); no signature "
                "knows this line.",
                hits=hits,
                implicated_levels=where.levels,
                frames=[where.path],
            )
    if not hits:
        tail = [ln for ln in lines if errorish(ln)][-max_evidence:]
        if not tail:
            tail = [ln for ln in lines if ln.strip()][-3:]
        return Classification("unknown", phase_reached, [_clean(t) for t in tail], unknown_hint(None, [], {}))
    best = max(hits, key=lambda h: (h.signature.priority, -h.index))
    chosen = specific if specific else hits
    ordered: list[str] = []
    for h in sorted(chosen, key=lambda h: (h.index != best.index, h.index)):
        c = _clean(h.line)
        if c not in ordered:
            ordered.append(c)
    sig = best.signature
    return Classification(
        failure_class=sig.failure_class,
        phase=_phase(served, phase_reached, None, sig.phase),
        evidence=ordered[:max_evidence],
        hint=sig.hint if not sig.generic else sig.hint + " (No Python traceback in the log.)",
        implicates=_implicates(best),
        signature_id=sig.id,
        source=sig.source,
        hits=hits,
    )


@lru_cache(maxsize=64)
def _rule_signature(rule_id: str):
    from bringup.observe.rootcause import rule_by_id

    rule = rule_by_id(rule_id)
    assert rule is not None
    return Signature.model_validate(
        {
            "id": rule.id,
            "pattern": rule.message or "(?!)",
            "class": rule.failure_class,
            "priority": rule.priority,
            "implicates": rule.implicates,
            "hint": rule.hint,
            "source": rule.source,
            "adjust": rule.adjust,
        }
    )


def signature_for_rule(rule: RootRule) -> Signature:
    """The rule as a Signature, so code that reads a signature's adjust reads a rule's too."""
    return _rule_signature(rule.id)


_WARMED: set[str | None] = set()
_WARM_LOCK = threading.Lock()


def warm_up(engine: str | None) -> None:
    """Load what the classifier reads on its first call (its modules, the rules, the engines' help
    tables), in a thread, once per engine and process: a trial starts it with the server, so the
    verdict after a fatal line is not the classifier's cold start (about half a second here)."""
    with _WARM_LOCK:
        if engine in _WARMED:
            return
        _WARMED.add(engine)

    def work() -> None:
        with contextlib.suppress(Exception):  # a warm-up that fails costs the verdict its speed only
            classify(["Traceback (most recent call last):", "RuntimeError: warm-up"], engine, "spawn")

    threading.Thread(target=work, name="classifier-warm-up", daemon=True).start()
