"""The names an engine tested on its way to the line it raised at.

An engine's own check that refuses a setting often says what conflicts, not what was turned on:
SGLang 0.5.16's ``check_server_args`` raised "PD-Multiplexing is not compatible with chunked
prefill." from inside ``if self.enable_pdmux:`` (server_args.py:7640-7646). The message names the
chunked prefill the engine chose by default; the test around the line names the user's switch that
made the check run at all. A person opens the file at the line of the traceback and reads the
``if`` above it; so does this module: the installed source at the root exception's file and line
(the engine runs on this machine, so its traceback's paths are real), where that line is the
engine's own code, the tests of the ``if`` and ``while`` statements that enclose the line, and the
test of the ``assert`` or the ``if`` that raised.

The names are every attribute and name those tests read (``self.enable_pdmux``,
``args.speculative_model``, ``envs.SGLANG_X``): the search keeps those that are a setting's field
or variable (bringup/observe/links.py). A likelihood, not a certainty: the test may read a field the
engine derived from another one. Where the file is not there (a log read on another machine, a
replayed scenario) there is nothing to read, and nothing is linked.
"""

from __future__ import annotations

import ast
import stat
from functools import lru_cache
from pathlib import Path

from bringup.observe.rootcause import RAISED_AT

_MAX_BYTES = 4 * 1024 * 1024  # an engine's largest module (SGLang's server_args.py) is about 400 kB


def raise_site(root_exception: str | None) -> tuple[str, int] | None:
    """The file and line the root exception was raised at, from its one-line description; only an
    absolute path (a traceback's own), never one read relative to wherever bringup runs."""
    m = RAISED_AT.search((root_exception or "").strip())
    if m is None or not m.group("path").startswith("/") or not m.group("path").endswith(".py"):
        return None
    return m.group("path"), int(m.group("line"))


@lru_cache(maxsize=32)
def _parsed(path: str, mtime: float) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _tree(path: str) -> ast.Module | None:
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
        return None
    return _parsed(str(p), st.st_mtime)


def _read_names(node: ast.AST) -> set[str]:
    """Attribute and plain names an expression reads (``self.enable_pdmux`` -> enable_pdmux)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Name):
            out.add(n.id)
    return out


def _spans(node: ast.AST, line: int) -> bool:
    end = getattr(node, "end_lineno", None)
    return getattr(node, "lineno", line + 1) <= line and end is not None and line <= end


def names_tested_before(path: str, line: int) -> set[str]:
    """The names read by the tests that lead to ``line`` of ``path``: each ``if``, ``elif`` and
    ``while`` inside the innermost function whose body holds the line (a test that held), and the
    test of the ``assert`` at the line. Empty where the file cannot be read or parsed."""
    tree = _tree(path)
    if tree is None:
        return set()
    out: set[str] = set()
    node: ast.AST = tree
    while True:
        inner = next(
            (c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt) and _spans(c, line)), None
        )
        if inner is None:
            break
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out = set()  # only the tests inside the function that raised
        elif isinstance(inner, (ast.If, ast.While)) and any(_spans(b, line) for b in inner.body):
            out |= _read_names(inner.test)  # its body: the test held (an else branch's did not)
        elif isinstance(inner, ast.Assert):
            out |= _read_names(inner.test)
        node = inner
    return out


def guard_names(root_exception: str | None, package: str | None) -> set[str]:
    """The names tested on the way to where the root exception was raised (names_tested_before),
    where that is the engine's own code (``package``): a library's tests read its own variables
    (torch's ``if dtype is None``), which share names with settings by chance only."""
    site = raise_site(root_exception)
    if site is None or not package or f"/{package}/" not in site[0]:
        return set()
    return names_tested_before(*site)
