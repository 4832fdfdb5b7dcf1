"""Text from outside made safe to show: no terminal escape sequences, no control bytes, no
invisible or direction-changing characters.

A log line, a model's files or a findings.json can hold anything the engine (or a model, or an
attacker feeding it input) printed: raw bytes, ANSI sequences that retitle or clear a terminal, NUL
bytes that cut Markdown short, and characters that show nothing yet change what a reader sees:
bidi embeddings, overrides and isolates (LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI) that reorder
the rest of a line ("Trojan Source"), the marks LRM, RLM and ALM, zero-width space and joiners, the
word joiner, BOM, soft hyphen, tag characters. Every sink escapes them once, shown visibly
(``\\x1b``, ``\\u202e``) rather than silently dropped: the terminal (bringup/cli/_common.py's
consoles escape every segment of text they write), FINDINGS.md (report/findings.py
`render_markdown`) and report.html (the templates' Jinja2 `finalize`, then the whole page).

`safe_line` escapes a line (tab and newline too) and cuts it to a bounded length; `safe_text`
escapes a document, keeping its newlines and tabs.
"""

from __future__ import annotations

import re

MAX_LINE = 2000

# Every character of Unicode's categories Cc (controls), Cf (format: invisible, bidi), Zl and Zp
# (line and paragraph separators), as of Unicode 15 (tests/guard/test_safetext.py checks this list
# against the running Python's unicodedata).
_INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CONTROL = re.compile("[\\x00-\\x08\\x0a-\\x1f\\x7f-\\x9f" + _INVISIBLE + "]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    if c < 0x100:
        return f"\\x{c:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def safe_line(text: str, limit: int = MAX_LINE) -> str:
    """One line with every control character escaped, at most `limit` characters (plus a mark)."""
    if len(text) > limit:
        text = text[:limit] + " …[cut]"
    return _CONTROL.sub(_escape, text)


_CONTROL_KEEP_LINES = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f" + _INVISIBLE + "]")


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


# -- Markdown (FINDINGS.md, a tuning's FINDINGS.md, NODE-TYPES.md) -----------------------------------
def md_text(text: object, limit: int = MAX_LINE) -> str:
    """Text from outside as Markdown prose or a table cell: one line, its pipes escaped (a table's
    columns stay), '<' written as '&lt;' (a viewer renders no HTML from an engine line), control and
    invisible characters escaped."""
    one = " ".join(str(text or "").split("\n")).strip()
    return safe_line(one.replace("|", "\\|").replace("<", "&lt;"), limit)


def md_code(text: object, limit: int = MAX_LINE) -> str:
    """Text from outside as a Markdown code span it cannot break out of: fenced with one backtick more
    than the longest run inside (an engine line with a backtick ended the span and went on as
    Markdown), pipes escaped for GFM tables, one line, control and invisible characters escaped."""
    one = safe_line(" ".join(str(text or "").split("\n")).strip(), limit).replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", one)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    return f"{fence}{pad}{one}{pad}{fence}"


def md_block(text: str) -> list[str]:
    """A command as a fenced code block its own backticks cannot close (the lines of the block)."""
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, safe_text(text), fence]
