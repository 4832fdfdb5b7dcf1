"""The folder tree is the data flow: checks that keep it so.

- no import cycles between bringup's modules (imports inside functions count; imports only for
  type checkers, under `if TYPE_CHECKING:`, do not);
- no private name (`_x`) imported from another module;
- the scenario engine, a test double, is imported only by itself and by its engine adapter
  (bringup/engines/scenario.py): the core drives every engine through the Engine interface.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "bringup"
DOUBLE = "bringup.scenario"
ADAPTER = "bringup.engines.scenario"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every import in a file, outside `if TYPE_CHECKING:` blocks."""
    tree = ast.parse(path.read_text())
    mod = _module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, []) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = pkg.split(".")[: len(pkg.split(".")) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                out.append((base, [a.name for a in child.names]))
            visit(child)

    visit(tree)
    return out


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(target: str, names: list[str]) -> list[str]:
    """The bringup modules an import loads: `from a.b import c` is a.b, or a.b.c when c is a module."""
    if not target.startswith("bringup"):
        return []
    mods = [target] if target in MODULES else []
    mods += [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
    return mods


def _graph() -> dict[str, set[str]]:
    return {
        m: {d for t, names in _imports(p) for d in _resolve(t, names) if d != m} for m, p in MODULES.items()
    }


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
        if m == DOUBLE or m.startswith(DOUBLE + ".") or m in allowed:
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
        ("if TYPE_CHECKING:\n    import bringup.run\n", []),
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
