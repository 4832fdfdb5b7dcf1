"""The two test tiers `make test` runs one after the other both hold tests, and every mark is registered.

`make test` runs `-m "not engine and not slow and not sglang"` then `-m "(slow or engine) and not sglang"`
(real SGLang has its own target, `make test-sglang`); a tier that selected
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
    """Every test function (path under tests/::name, e.g. `search/test_strategy.py::test_x`) and the
    marks it carries, its module's pytestmark included: the files at the root and in every folder."""
    found: dict[str, set[str]] = {}
    for path in sorted(p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts):
        tree = ast.parse(path.read_text())
        module_marks: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "pytestmark" for t in node.targets
            ):
                module_marks |= _marks(node.value)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                marks = (
                    set().union(*(_marks(d) for d in node.decorator_list)) if node.decorator_list else set()
                )
                found[f"{path.relative_to(TESTS).as_posix()}::{node.name}"] = marks | module_marks
    return found


def test_both_tiers_hold_tests():
    tests = _tests()
    fast = [t for t, m in tests.items() if not m & {"slow", "engine", "sglang"}]
    rest = [t for t, m in tests.items() if m & {"slow", "engine"} and "sglang" not in m]
    assert len(fast) > 50 and rest, (len(fast), len(rest))
    assert "test_tiers.py::test_both_tiers_hold_tests" in fast


def test_real_sglang_tests_are_in_neither_tier_of_make_test():
    """Real SGLang needs an 11 GB venv: its tests run only under `make test-sglang`, and every one of
    them is marked `sglang` (a launch of it unmarked would fail `make test` on a machine without it)."""
    tests = _tests()
    sglang = [t for t, m in tests.items() if "sglang" in m]
    assert sglang and all(t.startswith("engines/test_sglang_real.py::") for t in sglang)
    assert all("sglang" in m for t, m in tests.items() if t.startswith("engines/test_sglang_real.py::"))
    make = (ROOT / "Makefile").read_text()
    var = dict(ln.split(" = ", 1) for ln in make.splitlines() if ln.startswith(("FAST = ", "REST = ")))
    assert all(v.endswith("and not sglang") for v in var.values())
    recipe = make.split("\ntest-sglang: ")[1].split("\n\n")[0]
    assert (
        "setup-sglang" in recipe.splitlines()[0]
        and "-m sglang" in recipe
        and "BRINGUP_SGLANG_PYTHON=" in recipe
    )


def test_the_tier_marks_are_registered():
    """pytest warns on an unknown mark and a misspelt `@pytest.mark.slwo` would land a slow test in the fast tier."""
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    registered = {m.split(":")[0].strip() for m in markers}
    assert {"slow", "engine", "sglang"} <= registered
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout"}
    used = set().union(*_tests().values())
    assert used <= registered | builtin, sorted(used - registered - builtin)


def test_make_test_runs_the_fast_tier_first_then_the_rest():
    make = (ROOT / "Makefile").read_text()
    var = dict(ln.split(" = ", 1) for ln in make.splitlines() if ln.startswith(("FAST = ", "REST = ")))
    assert var == {
        "FAST": "not engine and not slow and not sglang",
        "REST": "(slow or engine) and not sglang",
    }
    recipe = make.split("\ntest: ")[1].split("\n\n")[0].splitlines()[1:]
    assert [ln.strip() for ln in recipe] == ["$(call tier,$(FAST))", "$(call tier,$(REST))"]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")
