"""Where an engine's code reads each of its launch settings: the functions that name its field.

A person whose launch fails inside a module asks which of their own settings that module reads.
SGLang 0.5.23's ``pynccl_allocator.py`` reads ``enable_symm_mem`` (the user's ``--enable-symm-mem``)
and raises "CUDA driver error: operation not supported" from ``get_nccl_mem_pool`` on a machine
without NCCL symmetric memory: no line names the flag, and no word of the file's name is a word
of the flag's (issue 36: "the failing frames are in the component the setting selects ... from the
installed source's module tree, not from a hand list per flag"). This module is that tree, read:
for each setting's destination (a field with an underscore, as the engine's argument class
declares it), the functions of the engine's own source that name it (an attribute, a parameter, a
key), found as text, never imported. The same scan serves environment variables
(bringup/env/readers.py), both from bringup/observe/sourcescan.py; only what a name looks like differs.

A field read in many files (``tp_size``, ``model_path``) says nothing of one failure: the search
reads only fields whose readers are few (``specific``). The bundled file of the engine's version
(``bringup/data/help/readers/<engine>-<version>.yaml``, written by ``python -m
bringup.observe.fieldreaders ENGINE VERSION PACKAGE_DIR ARGS_FILE``) is all it reads: an installed engine's
source is not scanned for flags at run time, and a version with no file has no such links.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from bringup.observe.sourcescan import bundled, scan, write_bundled

READERS_DATA = Path(__file__).resolve().parents[1] / "data" / "help" / "readers"
# A setting's field as code spells it: lower-case words joined by underscores (one at least, so
# that "model", "port" or "dtype", words every file uses, are never read as the setting).
_FIELD = re.compile(r"(?<![A-Za-z0-9_])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![A-Za-z0-9_])")
# The fields of the engine's argument class (a dataclass: SGLang's ServerArgs, vLLM's EngineArgs).
_ARGS_CLASS = re.compile(r"^class (?:ServerArgs|EngineArgs)\b")
_CLASS_FIELD = re.compile(r"^    (?P<name>[a-z]\w*_\w*)\s*:\s*[^=(]")
# Readers in more files than this make a field everyone's (tensor-parallel size, the model path).
SPECIFIC_FILES = 8


def fields(args_source: str) -> list[str]:
    """The fields of the engine's argument class, in order, from its source file's text."""
    out: list[str] = []
    inside = False
    for line in args_source.splitlines():
        if line.startswith("class "):
            inside = bool(_ARGS_CLASS.match(line))
            continue
        m = _CLASS_FIELD.match(line) if inside else None
        if m and m.group("name") not in out:
            out.append(m.group("name"))
    return out


def _under(site: str, package: str, folders: Iterable[str]) -> bool:
    path = site.split(":", 1)[0]
    return any(path == f"{package}/{f}" or path.startswith(f"{package}/{f.rstrip('/')}/") for f in folders)


def readers(engine: str, version: str | None) -> Mapping[str, tuple[str, ...]]:
    """dest -> the sites ("package/path.py:function") that read it, for this engine version's
    bundled scan; empty where none is bundled."""
    return (bundled(engine, version, READERS_DATA) or {}) if version else {}


def specific(sites: Iterable[str]) -> bool:
    """The field is read in few enough files to say something of a failure in one of them."""
    return 0 < len({s.split(":", 1)[0] for s in sites}) <= SPECIFIC_FILES


def main(argv: list[str] | None = None) -> int:
    """Write the bundled readers of one engine version from its unpacked package directory."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("engine")
    ap.add_argument("version")
    ap.add_argument(
        "package_dir", type=Path, help="the engine's package directory (.../site-packages/sglang)"
    )
    ap.add_argument(
        "args_file",
        help="the file of its argument class, relative to the package (srt/server_args.py), or a --help "
        "capture (a .txt path) whose destinations are the fields",
    )
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        help="a file or folder of the package that declares or checks "
        "the arguments (srt/arg_groups): where every field is named, it reads none",
    )
    a = ap.parse_args(argv)
    if a.args_file.endswith(".txt"):
        from bringup.help.text import parse_help

        names = [o.dest for o in parse_help(Path(a.args_file).read_text()).options if "_" in o.dest]
        skip: tuple[str, ...] = ()
    else:
        names, skip = fields((a.package_dir / a.args_file).read_text()), (a.args_file,)
    skip += tuple(a.skip)
    pkg = a.package_dir.name
    # a function reads a field; a module's top level declares or documents it. Only the fields read
    # in few files are kept: the others say nothing of a failure (specific).
    sites = {
        k: kept
        for k, v in scan(a.package_dir, names, skip, _FIELD).items()
        if specific(kept := [x for x in v if not x.endswith(":<module>") and not _under(x, pkg, skip)])
    }
    head = (
        f"# {a.engine} {a.version}: where each field of its argument class is read, generated from the\n"
        f"# engine's own source by `python -m bringup.observe.fieldreaders` (do not edit; regenerate).\n"
        f"# Only fields read in 1 to {SPECIFIC_FILES} files (specific). Schema: readers: {{field:\n"
        "# [package/path.py:function, ...]}.\n"
    )
    out = write_bundled(READERS_DATA, a.engine, a.version, sites, head)
    print(f"{out}: {len(sites)} of {len(names)} fields read in 1 to {SPECIFIC_FILES} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
