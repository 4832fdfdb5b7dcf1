"""Issue 40, item 6: text from outside is escaped for the terminal, Markdown and HTML, invisible and
direction-changing characters included, shown visibly (``\\u202e``) rather than dropped.

Before: `bringup report` wrote raw escape sequences and bidi characters from an engine line to the
terminal and into FINDINGS.md (its Markdown was not passed through the escaping the run's own writer
used); LRM, RLM, ALM, zero-width space and BOM reached the terminal, FINDINGS.md and report.html raw
(the escaping knew C0, C1 and nine bidi controls only); an engine line with a backtick ended its code
span in FINDINGS.md and went on as Markdown.
"""

from __future__ import annotations

import io
import re
import sys
import unicodedata
from pathlib import Path

from typer.testing import CliRunner

from bringup.cli import app
from bringup.cli._common import SafeConsole
from bringup.guard.safetext import md_code, md_text, safe_line, safe_text
from bringup.record.results import Attempt
from bringup.report.findings import write_report
from bringup.report.html import write_html
from tests.report.test_report import seed_like_result

# Each character the issue names, by name: bidi embeddings, overrides, pop, isolates; the marks;
# zero-width space and joiners; BOM. Then an escape sequence and C0/C1 controls.
NAMED = {
    "LRE": "\u202a",
    "RLE": "\u202b",
    "PDF": "\u202c",
    "LRO": "\u202d",
    "RLO": "\u202e",
    "LRI": "\u2066",
    "RLI": "\u2067",
    "FSI": "\u2068",
    "PDI": "\u2069",
    "LRM": "\u200e",
    "RLM": "\u200f",
    "ALM": "\u061c",
    "ZWSP": "\u200b",
    "ZWNJ": "\u200c",
    "ZWJ": "\u200d",
    "BOM": "\ufeff",
}
HOSTILE = "".join(NAMED.values()) + "\x1b]0;retitled\x07\x1b[2J\x9b31m\x00"
ENGINE_LINE = f"RuntimeError: kernel `sm_120` {HOSTILE} failed <script>x</script> | col"


def _raw(text: str) -> list[str]:
    return [
        n
        for n, c in {**NAMED, "ESC": "\x1b", "BEL": "\x07", "CSI": "\x9b", "NUL": "\x00"}.items()
        if c in text
    ]


def test_every_control_format_and_separator_character_is_escaped() -> None:
    """The list of characters is checked against the running Python's Unicode database: every Cc,
    Cf, Zl and Zp character (tab and newline kept by `safe_text`) comes out as a visible escape."""
    missed = []
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c not in "\t\n":
            if safe_text(c) == c or safe_line(c) == c:
                missed.append(f"U+{cp:04X} {unicodedata.name(c, '?')}")
    assert missed == []
    for name, c in NAMED.items():
        assert safe_text(f"a{c}b") == f"a\\u{ord(c):04x}b", name  # shown, not dropped
    assert safe_text("\U000e0041") == "\\U000e0041"  # a tag character (hidden text)
    assert safe_text("a\tb\nc") == "a\tb\nc" and safe_line("a\nb") == "a\\x0ab"


def test_markdown_text_and_code_spans_cannot_be_broken_out_of() -> None:
    assert md_code("a `b` ``c`` | d\ne") == "```a `b` ``c`` \\| d e```"
    assert md_code("`x`") == "`` `x` ``"  # a span may not begin or end with its own fence
    assert md_code("plain") == "`plain`"
    assert md_text("<img src=x> | y") == "&lt;img src=x> \\| y"


def test_the_terminal_shows_no_raw_control_or_invisible_character() -> None:
    """Every segment a console writes, whatever a command forgot to escape (a table cell, a
    markup-free print of outside text, a status line)."""
    buf = io.StringIO()
    con = SafeConsole(file=buf, force_terminal=True, width=300)
    con.print(ENGINE_LINE, markup=False, style="bold red")  # styled: Rich's own escapes stay
    out = buf.getvalue()
    assert "\x1b[1;31m" in out  # Rich's own styles
    assert _raw(re.sub(r"\x1b\[[0-9;]*m", "", out)) == []  # and nothing else
    assert "\\u202e" in out and "\\x1b" in out and "retitled" in out


def _hostile_result(tmp_path: Path):
    r = seed_like_result(tmp_path)
    r.attempts = [
        *r.attempts,
        Attempt(
            number=9, purpose="search", changes="--x y", status="fails", evidence=ENGINE_LINE, hint=HOSTILE
        ),
    ]
    r.stop_reason = ENGINE_LINE
    r.warnings = [ENGINE_LINE]
    return r


def test_findings_md_report_and_report_html_show_outside_text_escaped(tmp_path: Path) -> None:
    r = _hostile_result(tmp_path)
    md = write_report(r, tmp_path).read_text()
    (tmp_path / "FINDINGS.md").unlink()
    res = CliRunner().invoke(app, ["report", str(tmp_path)])  # rewrites FINDINGS.md, prints it
    html = write_html(tmp_path, r, []).read_text()
    for where, text in {
        "FINDINGS.md (run)": md,
        "bringup report (terminal)": res.output,
        "FINDINGS.md (report)": (tmp_path / "FINDINGS.md").read_text(),
        "report.html": html,
    }.items():
        assert _raw(text) == [], where
        assert "\\u202e" in text and "\\u200b" in text and "\\ufeff" in text, where
    assert res.exit_code == 0
    assert "<script>" not in html and "&lt;script&gt;" in html
    evidence = next(line for line in md.splitlines() if line.startswith("| 9 |"))
    assert "| ``RuntimeError: kernel `sm_120` " in evidence and "\\| col`` |" in evidence  # one code span
