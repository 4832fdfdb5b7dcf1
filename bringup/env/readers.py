"""Where an engine reads each of its environment variables: the function of its source that does.

A failure raised in the very function that reads a variable (SGLang's ``init_torch_distributed``
reads ``SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK`` and raises "The memory capacity is unbalanced"
when it is on) implicates that variable though no line names it: that is the code it switches. This
is one of the three reasons a variable joins a search (the failure names it; its description names
the failing component; a failing frame reads it), never a word its name shares with the message.

The sites come from the engine's own source, scanned as text (no import): every function, method or
module body whose code names the variable, outside the registry file that declares it. A bundled
file per engine version (``bringup/data/env/readers/<engine>-<version>.yaml``, written by
``python -m bringup.env.readers ENGINE VERSION PACKAGE_DIR``) serves engines imitated or not installed;
an installed engine's own source is scanned once per process.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

import yaml

from bringup.core.datafiles import load_yaml
from bringup.env.extract import registry_spec

READERS_DATA = Path(__file__).resolve().parents[1] / "data" / "env" / "readers"
_DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>\w+)")
_CLASS = re.compile(r"^(?P<indent>\s*)class\s+\w+")


_UPPER = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![A-Za-z0-9_])")


def _sites_in_file(text: str, names: frozenset[str]) -> dict[str, set[str]]:
    """name -> the functions of one file whose body names it ("<module>" at the top level)."""
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
        for hit in (h for h in _UPPER.findall(line) if h in names):
            func = next((f for _, f in reversed(stack) if f), "<module>")
            out.setdefault(hit, set()).add(func)
    return out


def scan(package_dir: Path, names: Iterable[str], skip: Iterable[str] = ()) -> dict[str, list[str]]:
    """name -> sorted "package/path.py:function" sites that read it, for the package at
    ``package_dir`` (``.../site-packages/vllm``); ``skip``: files relative to the package (the
    registry file, which declares every name)."""
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
        for name, funcs in _sites_in_file(text, wanted).items():
            out.setdefault(name, set()).update(f"{rel}:{f}" for f in funcs)
    return {k: sorted(v) for k, v in sorted(out.items())}


@lru_cache(maxsize=8)
def _prefixes(names: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted({n[:4] for n in names}))


def bundled_path(engine: str, version: str) -> Path:
    return READERS_DATA / f"{engine}-{version}.yaml"


@lru_cache(maxsize=16)
def _bundled(engine: str, version: str) -> dict[str, tuple[str, ...]] | None:
    for v in (version, version.split("+")[0]):
        p = bundled_path(engine, v)
        if p.is_file():
            doc = load_yaml(p) or {}
            return {k: tuple(v) for k, v in (doc.get("readers") or {}).items()}
    return None


@lru_cache(maxsize=8)
def _installed(path: str, mtime: float, names: tuple[str, ...], skip: str) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in scan(Path(path), names, (skip,)).items()}


def readers(
    engine: str, version: str | None, names: Iterable[str], package_dir: Path | None = None
) -> Mapping[str, tuple[str, ...]]:
    """name -> the sites that read it: the bundled file of this version, else the installed
    package's source (``package_dir``), else nothing."""
    if version:
        got = _bundled(engine, version)
        if got is not None:
            return got
    if package_dir is None or not Path(package_dir).is_dir():
        return {}
    try:
        skip = registry_spec(engine)["file"]
    except Exception:  # an engine with no registry: nothing is declared, nothing to skip
        skip = ""
    p = Path(package_dir)
    return _installed(str(p), p.stat().st_mtime, tuple(sorted(set(names))), skip)


def read_here(sites: Iterable[str], frames: Iterable[str], package: str | None) -> str | None:
    """The failing frame ("path:function", innermost last) that is a site reading the variable."""
    from bringup.observe.links import package_path

    own = set(sites)
    for f in reversed(list(frames)):
        p = package_path(f, package) if package else f
        if p is not None and ":" in f and f"{p.split(':', 1)[0]}:{f.rsplit(':', 1)[1]}" in own:
            return f
    return None


def read_in_module(
    sites: Iterable[str], frames: Iterable[str], package: str | None, innermost: int = 4
) -> str | None:
    """The innermost failing frame of the engine's own (one of the ``innermost`` last) whose file
    reads the variable, in any of its functions: weaker than the very function (``read_here``),
    and a lead only for a variable the user set (a person asks which of their settings the failing
    code reads: VLLM_MQ_MAX_CHUNK_BYTES_MB is read by the multiprocessing executor's set-up, which
    builds the message queue whose enqueue failed, two frames below its collective_rpc)."""
    from bringup.observe.links import engine_frames

    files = {s.split(":", 1)[0] for s in sites}
    for p in reversed(engine_frames(list(frames), package, innermost)):
        if p.split(":", 1)[0] in files:
            return p
    return None


def main(argv: list[str] | None = None) -> int:
    """Write the bundled readers of one engine version from its unpacked package directory."""
    from bringup.env.extract import extract

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("engine")
    ap.add_argument("version")
    ap.add_argument("package_dir", type=Path, help="the engine's package directory (.../site-packages/vllm)")
    a = ap.parse_args(argv)
    spec = registry_spec(a.engine)
    doc = extract((a.package_dir / spec["file"]).read_text(), spec)
    names = [v["name"] for v in doc["variables"]]
    sites = scan(a.package_dir, names, (spec["file"],))
    out = bundled_path(a.engine, a.version)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = (
        f"# {a.engine} {a.version}: where each environment variable of its registry is read, generated from\n"
        f"# the engine's own source by `python -m bringup.env.readers` (do not edit; regenerate).\n"
        "# Schema: readers: {NAME: [package/path.py:function, ...]}.\n"
    )
    out.write_text(
        head + yaml.safe_dump({"engine": a.engine, "version": a.version, "readers": sites}, sort_keys=False)
    )
    print(f"{out}: {len(sites)} of {len(names)} variables read outside {spec['file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
