#!/usr/bin/env python3
"""A complexity ceiling that only goes down.

Every function whose McCabe complexity is above 10 (ruff's C901, the same count `ruff check
--select C901` reports) must be listed, with its score, in ``complexity-ceiling.txt``. The check
fails when

- a function that is not listed goes above 10 (new code stays simple: split it), or
- a listed function got more complex than its line says.

When a listed function gets simpler (or drops to 10 or below, or is deleted), the check passes and
says so: run ``python scripts/complexity.py --update`` and commit the file, so the ceiling moves
down with the code and cannot creep back up. ``--update`` refuses while the check fails, so it
never raises a ceiling (it writes a first ceiling only where there is no file); a function that
must stay complex is added to the file by hand, where a reviewer sees it.

Functions are named ``path::Class.method`` (nested functions ``path::outer.inner``). A function
moved to another file keeps its ceiling when its qualified name is unchanged.

Usage: ``python scripts/complexity.py [--update] [--ceiling FILE] [--max N] [PATH ...]``
(default paths: bringup tests benchmarks scripts, relative to the repository root).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = ["bringup", "tests", "benchmarks", "scripts"]
DEFAULT_CEILING = ROOT / "complexity-ceiling.txt"
MAX_COMPLEXITY = 10
_MESSAGE = re.compile(r"^`(?P<name>[^`]+)` is too complex \((?P<score>\d+) > \d+\)$")

HEADER = """\
# Functions above McCabe complexity {max} (ruff C901) and the most each may have: the ceiling only
# goes down. `make check` fails when a function not listed here goes above {max}, or a listed one
# gets more complex. When one gets simpler, run `python scripts/complexity.py --update` and commit.
# {count} functions, {excess} points above {max} in all.
"""


@dataclass(frozen=True)
class Finding:
    path: str  # relative to the root, with forward slashes
    qualname: str
    score: int

    @property
    def key(self) -> str:
        return f"{self.path}::{self.qualname}"


def _qualnames(source: str) -> dict[int, str]:
    """Line of each ``def`` -> its qualified name (Class.method, outer.inner)."""
    out: dict[int, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[child.lineno] = name
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return out


def measure(root: Path, paths: list[str], max_complexity: int = MAX_COMPLEXITY) -> list[Finding]:
    """Functions above `max_complexity` under `paths`, as ruff's C901 scores them.

    Isolated from the project's ruff settings and blind to `noqa`, so a suppression comment cannot
    hide a function from the ceiling."""
    cmd = [
        sys.executable,
        "-m",
        "ruff",
        "check",
        "--isolated",
        "--select",
        "C901",
        "--config",
        f"lint.mccabe.max-complexity = {max_complexity}",
        "--ignore-noqa",
        "--exit-zero",
        "--no-cache",
        "--output-format",
        "json",
        *paths,
    ]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"complexity: ruff failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    findings: list[Finding] = []
    names_of: dict[Path, dict[int, str]] = {}
    for item in json.loads(proc.stdout or "[]"):
        m = _MESSAGE.match(item["message"])
        if item.get("code") != "C901" or m is None:
            continue
        file = Path(item["filename"])
        if file not in names_of:
            names_of[file] = _qualnames(file.read_text(encoding="utf-8"))
        qualname = names_of[file].get(item["location"]["row"], m["name"])
        rel = file.resolve().relative_to(root.resolve()).as_posix()
        findings.append(Finding(rel, qualname, int(m["score"])))
    return _unique(findings)


def _unique(findings: list[Finding]) -> list[Finding]:
    """Two functions of one qualified name in one file (a redefinition) get #2, #3, ..."""
    seen: dict[str, int] = {}
    out = []
    for f in sorted(findings, key=lambda f: (f.path, f.qualname)):
        n = seen[f.key] = seen.get(f.key, 0) + 1
        out.append(f if n == 1 else Finding(f.path, f"{f.qualname}#{n}", f.score))
    return out


def read_ceiling(path: Path) -> dict[str, int]:
    """``path::qualname score`` lines; a line starting with ``#`` is a comment."""
    ceiling: dict[str, int] = {}
    if not path.exists():
        return ceiling
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, score = line.rpartition(" ")
        if not key or not score.isdigit():
            raise SystemExit(f"{path}:{n}: expected `path::function score`, got {line!r}")
        ceiling[key.strip()] = int(score)
    return ceiling


def write_ceiling(path: Path, findings: list[Finding], max_complexity: int) -> None:
    excess = sum(f.score - max_complexity for f in findings)
    body = "".join(f"{f.key} {f.score}\n" for f in findings)
    path.write_text(
        HEADER.format(max=max_complexity, count=len(findings), excess=excess) + body, encoding="utf-8"
    )


@dataclass
class Verdict:
    failures: list[str]
    lowered: list[str]  # listed functions that got simpler or are gone: the ceiling can move down

    @property
    def ok(self) -> bool:
        return not self.failures


def compare(
    findings: list[Finding], ceiling: dict[str, int], max_complexity: int = MAX_COMPLEXITY
) -> Verdict:
    failures: list[str] = []
    lowered: list[str] = []
    current = {f.key: f for f in findings}
    gone = {k: v for k, v in ceiling.items() if k not in current}
    # A function moved to another file keeps its ceiling (same qualified name, old key gone).
    moved_from: dict[str, str] = {}
    for f in findings:
        if f.key in ceiling:
            continue
        old = next(
            (k for k in gone if k.split("::", 1)[1] == f.qualname and k not in moved_from.values()), None
        )
        if old is not None:
            moved_from[f.key] = old
    for f in findings:
        key = f.key if f.key in ceiling else moved_from.get(f.key)
        if key is None:
            failures.append(
                f"{f.key}: complexity {f.score} > {max_complexity}, a function not in the ceiling "
                f"(split it until it is {max_complexity} or less)"
            )
        elif f.score > ceiling[key]:
            failures.append(
                f"{f.key}: complexity {f.score}, more than its ceiling {ceiling[key]} "
                "(make it simpler, not more complex)"
            )
        elif f.score < ceiling[key] or key != f.key:
            lowered.append(
                f"{f.key}: {ceiling[key]} -> {f.score}" + (f" (moved from {key})" if key != f.key else "")
            )
    for k in gone:
        if k not in moved_from.values():
            lowered.append(f"{k}: {ceiling[k]} -> {max_complexity} or less (or gone)")
    return Verdict(failures, lowered)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("paths", nargs="*", default=DEFAULT_PATHS, help="files or folders, relative to --root")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root (default: this script's)")
    ap.add_argument(
        "--ceiling", type=Path, default=None, help="the ceiling file (default: ROOT/complexity-ceiling.txt)"
    )
    ap.add_argument("--max", type=int, default=MAX_COMPLEXITY, help="the complexity a new function may have")
    ap.add_argument(
        "--update", action="store_true", help="write the current scores (only when the check passes)"
    )
    args = ap.parse_args(argv)
    ceiling_path = args.ceiling or args.root / "complexity-ceiling.txt"
    findings = measure(args.root, args.paths, args.max)
    if args.update and not ceiling_path.exists():  # the first ceiling: today's scores
        write_ceiling(ceiling_path, findings, args.max)
        print(f"complexity: wrote {ceiling_path.name}: {len(findings)} functions above {args.max}")
        return 0
    verdict = compare(findings, read_ceiling(ceiling_path), args.max)
    for line in verdict.failures:
        print(f"complexity: FAIL {line}")
    if not verdict.ok:
        print(f"complexity: {len(verdict.failures)} function(s) above the ceiling in {ceiling_path.name}")
        return 1
    if args.update:
        write_ceiling(ceiling_path, findings, args.max)
        print(f"complexity: wrote {ceiling_path.name}: {len(findings)} functions above {args.max}")
        return 0
    excess = sum(f.score - args.max for f in findings)
    print(
        f"complexity: ok, {len(findings)} functions above {args.max} ({excess} points above it), none over its ceiling"
    )
    if verdict.lowered:
        print(
            "complexity: the ceiling can go down; run `python scripts/complexity.py --update` and commit "
            f"{ceiling_path.name}:"
        )
        for line in verdict.lowered:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
