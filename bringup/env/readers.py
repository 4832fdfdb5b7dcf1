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

from bringup.env.extract import registry_spec
from bringup.observe.sourcescan import bundled, scan, write_bundled

READERS_DATA = Path(__file__).resolve().parents[1] / "data" / "env" / "readers"


_UPPER = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![A-Za-z0-9_])")


@lru_cache(maxsize=8)
def _installed(path: str, mtime: float, names: tuple[str, ...], skip: str) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in scan(Path(path), names, (skip,), _UPPER).items()}


def readers(
    engine: str, version: str | None, names: Iterable[str], package_dir: Path | None = None
) -> Mapping[str, tuple[str, ...]]:
    """name -> the sites that read it: the bundled file of this version, else the installed
    package's source (``package_dir``), else nothing."""
    if version:
        got = bundled(engine, version, READERS_DATA)
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
    sites = scan(a.package_dir, names, (spec["file"],), _UPPER)
    head = (
        f"# {a.engine} {a.version}: where each environment variable of its registry is read, generated from\n"
        f"# the engine's own source by `python -m bringup.env.readers` (do not edit; regenerate).\n"
        "# Schema: readers: {NAME: [package/path.py:function, ...]}.\n"
    )
    out = write_bundled(READERS_DATA, a.engine, a.version, sites, head)
    print(f"{out}: {len(sites)} of {len(names)} variables read outside {spec['file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
