"""bringup's architecture, read from its imports: the folders' floors, and the counts docs/design.md quotes.

    python scripts/architecture.py          # the table (modules per folder, imports back up, the largest)

A folder is a stage of DESIGN.md's data flow. Folders stand on floors: a module imports only from
its own folder or from folders on lower floors, so no import runs back up and there is no loop
between folders. tests/test_architecture.py checks the same rules with this reader.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "bringup"
DOUBLE = "bringup.scenario"  # the scenario engine, a test double
ADAPTER = "bringup.engines.scenario"  # its adapter: the one product module that may import it
ORACLE = "bringup.oracle"  # what only tests and benchmarks use: nothing in the product imports it

# Bottom first. Folders on one floor do not import each other.
FLOORS: list[tuple[str, ...]] = [
    ("guard",),  # bounded reads, size limits, safe text, secrets, one writer per run
    ("help", "facts", "loadgen"),  # --help parsed; the machine and the model; the load generator
    ("core",),  # the candidate, reserved flags, the data-file loader
    ("observe", "knowledge"),  # reading a launch's log; rules and conditions
    ("record", "verify", "env", "scenario"),  # the journal; probes; the env registry; the double
    ("search", "engines", "testmodel"),  # space, evidence, beliefs, strategy; adapters; tiny models
    ("trial", "dryrun"),  # one launch and where it runs; the engine's own checks
    ("tuning",),
    ("report",),
    ("session", "oracle"),  # the bring-up loop; the test-only oracle
    ("cli",),
]
FLOOR = {f: i for i, fs in enumerate(FLOORS) for f in fs}
TOP = len(FLOORS)  # bringup/__init__.py and __main__.py stand above every folder


def folder(module: str) -> str:
    """The folder a module lives in ('' for the package's own __init__ and __main__)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (len(parts) > 2 or (PKG / parts[1]).is_dir()) else ""


def floor(module: str) -> int:
    return FLOOR.get(folder(module), TOP)


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


MODULES = {_module_name(p): p for p in PKG.rglob("*.py") if "data" not in p.relative_to(PKG).parts[:1]}


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


def back_up() -> list[str]:
    """Imports that run back up (to a higher floor, or across one floor) or reach the oracle or the double."""
    bad = []
    for m, deps in _graph().items():
        for d in sorted(deps):
            fm, fd = folder(m), folder(d)
            if fm == fd or not fd:
                continue
            if floor(d) >= floor(m):
                bad.append(f"{m} (floor {floor(m)}, {fm or 'top'}) imports {d} (floor {floor(d)}, {fd})")
            elif d.startswith(ORACLE) and not m.startswith(ORACLE):
                bad.append(f"{m} imports {d}: the oracle is for tests and benchmarks only")
            elif d.startswith(DOUBLE) and not m.startswith((DOUBLE, ORACLE)) and m != ADAPTER:
                bad.append(f"{m} imports {d}: only the scenario adapter and the oracle drive the double")
    return bad


def unplaced() -> list[str]:
    """Folders of the package that stand on no floor."""
    return sorted({folder(m) for m in MODULES} - set(FLOOR) - {"", "data", "templates"})


def _largest_function() -> tuple[str, int]:
    best = ("", 0)
    for m, p in MODULES.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > best[1]:
                    best = (f"{m}.{node.name}", n)
    return best


def main() -> int:
    per: dict[str, list[int]] = {}
    for m, p in MODULES.items():
        per.setdefault(folder(m) or "(top)", []).append(len(p.read_text().splitlines()))
    print(f"{'floor':>5}  {'folder':<10} {'modules':>7} {'lines':>6}")
    for name in sorted(per, key=lambda f: (FLOOR.get(f, TOP), f)):
        print(f"{FLOOR.get(name, TOP):>5}  {name:<10} {len(per[name]):>7} {sum(per[name]):>6}")
    big = max(MODULES.items(), key=lambda kv: len(kv[1].read_text().splitlines()))
    fn, n = _largest_function()
    bad = back_up()
    print(f"\nmodules: {len(MODULES)} in {len(per)} folders; imports running back up: {len(bad)}")
    print(
        f"largest module: {big[0]} ({len(big[1].read_text().splitlines())} lines); largest function: {fn} ({n} lines)"
    )
    for b in bad + [f"folder on no floor: {u}" for u in unplaced()]:
        print("  " + b)
    return 1 if bad or unplaced() else 0


if __name__ == "__main__":
    sys.exit(main())
