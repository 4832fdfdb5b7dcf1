"""Classify a saved log offline: the same classifier and fields as a live trial."""

from __future__ import annotations

import re
from pathlib import Path

from bringup.core.datafiles import KnowledgeFileError
from bringup.engines.base import Engine, engine_info, engine_names, get_engine, later_phase
from bringup.observe.logread import select_lines
from bringup.observe.outcome import Outcome, OverrideRecord
from bringup.observe.signatures import Matcher, Signature, classify

_HTTP_500 = re.compile(r'"(POST|GET) \S+ HTTP/[\d.]+" 5\d\d')
_REQUEST = re.compile(r'"POST /v1/(chat/)?completions HTTP/[\d.]+" (\d{3})')
_READY = re.compile(
    r"Application startup complete|The server is fired up and ready to roll|Starting vLLM server on"
)


def detect_engine(lines: list[str]) -> str:
    """The engine whose log marker (engines.yaml `log_marker`) shows first; vLLM when none does."""
    head = lines[:400]
    for name in engine_names():
        marker = engine_info(name).log_marker
        if marker and any(re.search(marker, ln) for ln in head):
            return name
    return "vllm"


def _adapter(engine: str) -> Engine | None:
    """The engine's adapter, or None for an engine bringup has no adapter for (yet): its log is
    still classified, without phase markers or the effective configuration."""
    try:
        return get_engine(engine)
    except KnowledgeFileError:
        return None


def explain_lines(
    lines: list[str], engine: str | None = None, signatures: tuple[Signature, ...] | None = None
) -> Outcome:
    """What a trial would say about this log. ``signatures``: the signatures to match (None: the
    shipped ones; an empty tuple measures the generic rules alone, benchmarks/classify_logs.py)."""
    engine = engine or detect_engine(lines)
    eng = _adapter(engine)
    lines = eng.before_teardown(lines) if eng else lines
    phase = "spawn"
    ready = False
    served_ok = 0
    matcher = Matcher(engine, signatures)
    for ln in lines:
        phase = later_phase(phase, eng.phase_of(ln) if eng else None)
        if _READY.search(ln) or (eng is not None and eng.is_ready_line(ln)):
            ready = True
            phase = later_phase(phase, "ready")
        if ready and any(s.fatal for s in matcher.match(ln)):
            break
        m = _REQUEST.search(ln)
        if ready and m:
            if m.group(2) == "200":
                served_ok += 1
            elif _HTTP_500.search(ln):
                break
    if ready:
        # A streamed request is logged "200" when its stream starts, before the engine fails on
        # it: only a second answered request shows that decoding had worked.
        phase = later_phase(phase, "decode" if served_ok > 1 else "first-request")
    if phase == "spawn" and lines:
        phase = "parse-args"
    cls = classify(lines, engine, phase, signatures)
    eff = eng.effective(lines, {}, None) if eng else None
    # vLLM's "non-default args" is what was requested: compare it with what the engine then used.
    requested: dict = {}
    for ln in lines:
        if "non-default args:" in ln:
            from bringup.observe.effective import parse_non_default_args

            requested = parse_non_default_args(ln) or {}
    overrides = []
    eff_values = eff.values if eff else {}
    for rule_dest, value in eff_values.items():
        if rule_dest in requested and str(requested[rule_dest]) != str(value):
            overrides.append(
                OverrideRecord(
                    flag="--" + rule_dest.replace("_", "-"),
                    requested=requested[rule_dest],
                    effective=str(value),
                )
            )
    fatal_hit = any(h.signature.fatal for h in cls.hits)
    crashed, survived = _crashed(lines, ready)
    failed = fatal_hit or crashed or not ready
    return Outcome(
        status="fails" if failed else "works",
        failure_class=cls.failure_class if failed else None,
        phase=cls.phase if failed else None,
        evidence=cls.evidence if failed else [],
        hint=cls.hint if failed else None,
        implicates=cls.implicates,
        signature=cls.signature_id,
        implicated_levels=cls.implicated_levels if failed else {},
        root_exception=cls.root_exception if failed else None,
        remedies=cls.remedies if failed else [],
        frames=cls.frames if failed else [],
        requested={k: str(v) for k, v in requested.items()},
        effective={
            k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
            for k, v in eff_values.items()
        },
        overrides=overrides,
        selected=eng.implementation_lines(lines) if eng else [],
        engine=engine,
        launched=True,
        warnings=[survived] if survived and not failed else [],
    )


def _crashed(lines: list[str], ready: bool) -> tuple[bool, str]:
    """(the log shows a crash, a note when it shows a request that failed and a server that went
    on): a traceback or an HTTP 500 is the server's end unless a request is answered 200 after it
    (`transformers serve` logs a whole traceback for a GET /v1/models it cannot answer, and serves on)."""
    bad = [
        i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln or _HTTP_500.search(ln)
    ]
    if not bad:
        return False, ""
    after = lines[bad[-1] + 1 :]
    if ready and any((m := _REQUEST.search(ln)) and m.group(2) == "200" for ln in after):
        first = next((ln.strip() for ln in lines[bad[0] :] if _HTTP_500.search(ln)), lines[bad[0]].strip())
        return False, f"a request failed ({first[:160]}) and the server went on answering 200 after it"
    return True, ""


def explain_file(
    path: Path, engine: str | None = None, signatures: tuple[Signature, ...] | None = None
) -> Outcome:
    """Streamed with bounded memory, whatever the file's size or content (bringup.observe.logread)."""
    sel = select_lines(Path(path))
    out = explain_lines(sel.lines, engine, signatures)
    out.log_path = str(path)
    out.warnings = [*sel.notes, *out.warnings]
    return out
