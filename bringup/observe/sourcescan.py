"""Where an engine's own source names a name: the functions of its files whose code does.

Two scans share this reading (text only, never an import): where each environment variable is read
(bringup/env/readers.py) and where each setting's field is read (bringup/observe/fieldreaders.py).
A failing frame in such a function, or in such a file, is evidence that the variable or setting
chose the code that failed (bringup/observe/links.py read_here, read_in_module); what a name looks
like in code is the scan's only difference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import yaml

from bringup.core.datafiles import load_yaml

_DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>\w+)")
_CLASS = re.compile(r"^(?P<indent>\s*)class\s+\w+")


def _sites_in_file(text: str, names: frozenset[str], token: re.Pattern[str]) -> dict[str, set[str]]:
    """name -> the functions of one file whose body names it ("<module>" at the top level);
    ``token``: what a name looks like in code (a variable's upper-case name, a setting's field)."""
    out: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []  # (indent, function name)
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        while stack and indent <= stack[-1][0]:
            stack.pop()
        m = _DEF.match(line)
        if m:
            stack.append((indent, m.group("name")))
            continue
        if _CLASS.match(line):
            stack.append((indent, ""))  # a class body is no function; its methods are
            continue
        if "_" not in stripped:
            continue
        for hit in (h for h in token.findall(line) if h in names):
            func = next((f for _, f in reversed(stack) if f), "<module>")
            out.setdefault(hit, set()).add(func)
    return out


def scan(
    package_dir: Path, names: Iterable[str], skip: Iterable[str], token: re.Pattern[str]
) -> dict[str, list[str]]:
    """name -> sorted "package/path.py:function" sites that read it, for the package at
    ``package_dir`` (``.../site-packages/vllm``); ``skip``: files relative to the package (the
    registry file, which declares every name); ``token``: what a name looks like in code."""
    wanted = frozenset(names)
    if not wanted:
        return {}
    root = Path(package_dir)
    skipped = {root / s for s in skip}
    out: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path in skipped:
            continue
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        rel = f"{root.name}/{path.relative_to(root).as_posix()}"
        if not any(n[:4] in text for n in _prefixes(wanted)):
            continue
        for name, funcs in _sites_in_file(text, wanted, token).items():
            out.setdefault(name, set()).update(f"{rel}:{f}" for f in funcs)
    return {k: sorted(v) for k, v in sorted(out.items())}


@lru_cache(maxsize=8)
def _prefixes(names: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted({n[:4] for n in names}))


def bundled_path(engine: str, version: str, root: Path) -> Path:
    return root / f"{engine}-{version}.yaml"


@lru_cache(maxsize=32)
def bundled(engine: str, version: str, root: Path) -> dict[str, tuple[str, ...]] | None:
    """name -> sites of one engine version's bundled scan under ``root`` (a local build's version,
    "0.32.0+cpu", reads its release's file); None where none is bundled."""
    for v in (version, version.split("+")[0]):
        p = bundled_path(engine, v, root)
        if p.is_file():
            doc = load_yaml(p) or {}
            return {k: tuple(v) for k, v in (doc.get("readers") or {}).items()}
    return None


def write_bundled(root: Path, engine: str, version: str, sites: dict[str, list[str]], head: str) -> Path:
    """Write one engine version's scan under ``root`` (``bundled`` reads it back), after ``head``:
    the comment lines that say what was scanned and how to regenerate it."""
    out = bundled_path(engine, version, root)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        head + yaml.safe_dump({"engine": engine, "version": version, "readers": sites}, sort_keys=False)
    )
    return out
