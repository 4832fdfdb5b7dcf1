"""CLI start-up time (issue 13): how long `bringup --help` and a few light commands take to answer.

Each command runs N times in a fresh interpreter, as a user starts it (`python -m bringup ...`);
the table gives the median and the fastest run in seconds, beside `python -c pass` (the floor
no CLI can beat) and the modules each command loaded that the CLI keeps out of start-up.
The target is `bringup --help` under 0.3 s. Tests assert which modules load, not the time.

Run:  .venv/bin/python benchmarks/cli_startup.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "tests" / "data" / "logs" / "sglang-nan-decode.log"
WATCH = ("optuna", "aiohttp", "jinja2", "starlette", "uvicorn", "numpy", "pydantic", "httpx")
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "bringup --help": [sys.executable, "-m", "bringup", "--help"],
    "bringup doctor --help": [sys.executable, "-m", "bringup", "doctor", "--help"],
    "bringup tune --help": [sys.executable, "-m", "bringup", "tune", "--help"],
    "bringup explain LOG --json": [sys.executable, "-m", "bringup", "explain", str(LOG), "--json"],
    "bringup doctor --json": [sys.executable, "-m", "bringup", "doctor", "--json"],
}
# Prints the loaded modules of interest after the CLI ran (the CLI exits through SystemExit).
PROBE = f"""import json, sys
sys.argv = ["bringup", *sys.argv[1:]]
try:
    from bringup.cli import main
    main()
except SystemExit:
    pass
print("\\nMODULES " + json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({WATCH!r}))))
"""


def timed(argv: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - t0


def loaded(argv: list[str], env: dict) -> str:
    if argv[1:3] != ["-m", "bringup"]:
        return ""
    out = subprocess.run([sys.executable, "-c", PROBE, *argv[3:]], capture_output=True, text=True, env=env).stdout
    line = next((x for x in out.splitlines() if x.startswith("MODULES ")), "MODULES []")
    return ", ".join(json.loads(line[8:])) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    table = Table(title=f"CLI start-up, {args.repeat} runs each, {os.cpu_count()} CPUs", title_justify="left")
    for c in ("command", "median s", "min s", f"loaded of {', '.join(WATCH)}"):
        table.add_column(c, justify="left" if c == "command" or c.startswith("loaded") else "right")
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)  # doctor and report look at ./bringup-runs: keep the repository clean
        for name, argv in CASES.items():
            timed(argv, env)  # warm the file cache
            times = [timed(argv, env) for _ in range(args.repeat)]
            table.add_row(name, f"{statistics.median(times):.3f}", f"{min(times):.3f}", loaded(argv, env))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
