"""The folder tree is the data flow: checks that keep it so.

- no import cycles between bringup's modules (imports inside functions count; imports only for
  type checkers, under `if TYPE_CHECKING:`, do not);
- no private name (`_x`) imported from another module;
- the scenario engine, a test double, is imported only by itself, by its engine adapter
  (bringup/engines/scenario.py) and by the test-only oracle: the core drives every engine through
  the Engine interface;
- folders stand on floors (scripts/architecture.py, FLOORS): no import runs back up, so there is no
  loop between folders, and nothing in the product imports the oracle.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PKG_ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("architecture", PKG_ROOT / "scripts" / "architecture.py")
assert _spec and _spec.loader
arch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(arch)
PKG, MODULES, DOUBLE, ADAPTER = arch.PKG, arch.MODULES, arch.DOUBLE, arch.ADAPTER
_imports, _resolve, _graph = arch._imports, arch._resolve, arch._graph


@pytest.mark.slow
def test_no_import_cycles():
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            # A package's __init__ importing its own submodules is how packages work, not a cycle.
            if m != d.rsplit(".", 1)[0] and state.get(d) == 1 and not d.startswith(m + "."):
                cycles.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                dfs(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            dfs(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.slow
def test_no_private_names_imported_across_modules():
    bad = []
    for m, p in MODULES.items():
        for target, names in _imports(p):
            if target.startswith("bringup") and target != m:
                bad += [
                    f"{m}: from {target} import {n}"
                    for n in names
                    if n.startswith("_") and n != "__version__"
                ]
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_the_core_never_imports_the_test_double():
    allowed = {ADAPTER}
    bad = []
    for m, p in MODULES.items():
        if m == DOUBLE or m.startswith((DOUBLE + ".", arch.ORACLE + ".")) or m in allowed:
            continue
        for target, names in _imports(p):
            loaded = _resolve(target, names) or [target]
            bad += [f"{m} imports {d}" for d in loaded if d == DOUBLE or d.startswith(DOUBLE + ".")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "snippet, expect",
    [
        ("import bringup.scenario.loader\n", ["bringup.scenario.loader"]),
        ("from bringup.scenario import loader\n", ["bringup.scenario", "bringup.scenario.loader"]),
        ("if TYPE_CHECKING:\n    import bringup.session.run\n", []),
        ("def f():\n    from bringup import report\n", ["bringup", "bringup.report"]),
    ],
)
def test_the_import_reader_itself(tmp_path, snippet, expect):
    """The checks above are only as good as this reader: it must see lazy imports and skip type-only ones."""
    f = PKG / "_arch_probe_tmp.py"
    f.write_text(snippet)
    try:
        got = [d for t, names in _imports(f) for d in _resolve(t, names)]
    finally:
        f.unlink()
    assert got == expect


@pytest.mark.slow
def test_every_folder_stands_on_a_floor():
    assert not arch.unplaced(), f"add these folders to FLOORS in scripts/architecture.py: {arch.unplaced()}"


@pytest.mark.slow
def test_no_import_runs_back_up():
    """A module imports only its own folder or lower floors; nothing in the product reaches the oracle."""
    bad = arch.back_up()
    assert not bad, "\n".join(bad)


def test_the_floor_check_sees_an_import_back_up():
    """The check above is only as good as its rule: a facts module importing the session is caught."""
    probe = PKG / "facts" / "_arch_probe_up.py"
    probe.write_text("from bringup.session import run\n")
    MODULES["bringup.facts._arch_probe_up"] = probe
    try:
        bad = arch.back_up()
    finally:
        del MODULES["bringup.facts._arch_probe_up"]
        probe.unlink()
    assert any("bringup.facts._arch_probe_up" in b and "bringup.session.run" in b for b in bad), bad
