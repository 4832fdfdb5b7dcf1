"""Text from a server's log made safe to show: no terminal escape sequences, no control bytes.

A log line can hold anything the engine (or a model, or an attacker feeding it input) printed:
raw bytes, ANSI sequences that retitle or clear a terminal, NUL bytes that cut Markdown short.
Every line bringup shows on a terminal or puts in FINDINGS.md or report.html goes through
`safe_line` first: control characters (C0 except tab, DEL, C1) become visible escapes such as
``\\x1b``, and the line is cut to a bounded length.
"""

from __future__ import annotations

import re

MAX_LINE = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_line(text: str, limit: int = MAX_LINE) -> str:
    """One line with every control character escaped, at most `limit` characters (plus a mark)."""
    if len(text) > limit:
        text = text[:limit] + " …[cut]"
    return _CONTROL.sub(_escape, text)


_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str) -> str:
    """A whole document (FINDINGS.md, report.html) with every control character escaped but its
    newlines and tabs: the last line of defence for text from outside that a writer forgot."""
    return _CONTROL_KEEP_LINES.sub(_escape, text)


def is_binary(text: str) -> bool:
    """A decoded line that is mostly undecodable bytes or control characters (not a log line)."""
    if not text:
        return False
    sample = text[:512]
    bad = sample.count("\ufffd") + len(_CONTROL.findall(sample))
    return bad * 4 > len(sample)
