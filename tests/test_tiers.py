"""The two test tiers `make test` runs one after the other both hold tests, and every mark is registered.

`make test` runs `-m "not engine and not slow"` then `-m "slow or engine"`; a tier that selected
nothing would make pytest exit 5 ("no tests collected"). Read from the source, so it costs nothing.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _marks(node: ast.AST) -> set[str]:
    """Names of `pytest.mark.X` / `pytest.mark.X(...)` in a list of decorators or a pytestmark value."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "mark":
            out.add(n.attr)
    return out


def _tests() -> dict[str, set[str]]:
    """Every test function (module::name) and the marks it carries, its module's pytestmark included."""
    found: dict[str, set[str]] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        module_marks: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
                module_marks |= _marks(node.value)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                marks = set().union(*(_marks(d) for d in node.decorator_list)) if node.decorator_list else set()
                found[f"{path.name}::{node.name}"] = marks | module_marks
    return found


def test_both_tiers_hold_tests():
    tests = _tests()
    fast = [t for t, m in tests.items() if not m & {"slow", "engine"}]
    rest = [t for t, m in tests.items() if m & {"slow", "engine"}]
    assert len(fast) > 50 and rest, (len(fast), len(rest))
    assert "test_tiers.py::test_both_tiers_hold_tests" in fast


def test_the_tier_marks_are_registered():
    """pytest warns on an unknown mark and a misspelt `@pytest.mark.slwo` would land a slow test in the fast tier."""
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    registered = {m.split(":")[0].strip() for m in markers}
    assert {"slow", "engine"} <= registered
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout"}
    used = set().union(*_tests().values())
    assert used <= registered | builtin, sorted(used - registered - builtin)


def test_make_test_runs_the_fast_tier_first_then_the_rest():
    make = (ROOT / "Makefile").read_text()
    var = dict(ln.split(" = ", 1) for ln in make.splitlines() if ln.startswith(("FAST = ", "REST = ")))
    assert var == {"FAST": "not engine and not slow", "REST": "slow or engine"}
    recipe = make.split("\ntest: ")[1].split("\n\n")[0].splitlines()[1:]
    assert [ln.strip() for ln in recipe] == ["$(call tier,$(FAST))", "$(call tier,$(REST))"]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")
