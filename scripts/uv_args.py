"""pip's own configuration, said as uv's options, one per line (scripts/setup.sh installs with uv).

uv installs the same wheels as pip in a fraction of the time (the vLLM CPU build: about a minute
cold against pip's 3 min 20 s on a 2-core machine), but it reads no pip.conf and no PIP_*
variable. A machine's local mirrors and caps live there (find-links with a CPU torch, extra index
URLs, a constraints file): without them uv would resolve other wheels than pip, for example a CUDA
torch from PyPI. So the setup hands pip's effective settings to uv, read from `pip config list`
(files and environment alike, the environment winning, as in pip), and asks uv to pick the best
version across every index, as pip does (`--index-strategy unsafe-best-match`).

    python scripts/uv_args.py          # prints the options; run with the venv's python (it has pip)
"""

from __future__ import annotations

import shlex
import subprocess
import sys

# pip's key -> uv's option. Values are whitespace-separated lists in pip's config.
OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
# Where a key is set more than once, pip lets the later scope win; the environment wins over all.
SCOPE_ORDER = ["global", "user", "site", ":env:"]


def parse(listing: str) -> dict[str, list[str]]:
    """`pip config list` lines (`scope.key='value'`) -> key -> values of the strongest scope."""
    best: dict[str, tuple[int, list[str]]] = {}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        if not sep or "." not in name:
            continue
        scope, _, key = name.rpartition(".")
        if key not in OPTIONS and key != "no-index":
            continue
        rank = SCOPE_ORDER.index(scope) if scope in SCOPE_ORDER else 0
        words = shlex.split(value)
        values = words[0].split() if words else []
        if key not in best or rank >= best[key][0]:
            best[key] = (rank, values)
    return {k: v for k, (_, v) in best.items()}


def uv_options(config: dict[str, list[str]]) -> list[str]:
    """uv's options for pip's settings, and the index strategy that makes uv choose as pip does."""
    out = ["--index-strategy", "unsafe-best-match"]
    for key, option in OPTIONS.items():
        for v in config.get(key, []):
            out += [option, v]
    if config.get("no-index", ["false"])[0].lower() in {"1", "true", "yes", "on"}:
        out.append("--no-index")
    return out


def main() -> int:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    print("\n".join(uv_options(parse(listing))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
