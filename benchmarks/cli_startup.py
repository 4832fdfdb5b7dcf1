"""CLI start-up time (issue 13): how long `bringup --help` and a few light commands take to answer.

Each command runs N times in a fresh interpreter, as a user starts it (`python -m bringup ...`);
the table gives the median and the fastest run in seconds, beside `python -c pass` and a
two-command Typer app (the floors no Typer CLI can beat), and the modules each command loaded of
those the CLI keeps out of start-up. Other work on the machine moves every row alike: compare rows.
The target is `bringup --help` under 0.3 s. Tests assert which modules load, not the time.

Run:  .venv/bin/python benchmarks/cli_startup.py [--repeat 10] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
# The floor for any Typer CLI: two commands and nothing else, its help rendered by Rich like ours.
MINIMAL_TYPER = """import typer
app = typer.Typer(no_args_is_help=True, add_completion=False)
@app.command()
def a(x: int = 1):
    "A command."
@app.command()
def b(x: int = 1):
    "Another."
app()
"""
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "a two-command Typer app --help": [sys.executable, "-c", MINIMAL_TYPER, "--help"],
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


def timed(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run: on a shared machine the CPU time
    moves less with other people's work than the wall time does."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def loaded(argv: list[str], env: dict) -> str:
    if argv[1:3] != ["-m", "bringup"]:
        return ""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv[3:]], capture_output=True, text=True, env=env
    ).stdout
    line = next((x for x in out.splitlines() if x.startswith("MODULES ")), "MODULES []")
    return ", ".join(json.loads(line[8:])) or "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the source tree to time (e.g. an older commit's `git archive`), default this one",
    )
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(args.tree), os.environ.get("PYTHONPATH", "")])}
    table = Table(
        title=f"CLI start-up of {args.tree}, {args.repeat} runs each, {os.cpu_count()} CPUs",
        title_justify="left",
    )
    for c in ("command", "median s", "min s", "median CPU s", f"loaded of {', '.join(WATCH)}"):
        table.add_column(c, justify="left" if c == "command" or c.startswith("loaded") else "right")
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)  # doctor and report look at ./bringup-runs: keep the repository clean
        for name, argv in CASES.items():
            timed(argv, env)  # warm the file cache
            runs = [timed(argv, env) for _ in range(args.repeat)]
            wall, cpu = [w for w, _ in runs], [c for _, c in runs]
            table.add_row(
                name,
                f"{statistics.median(wall):.3f}",
                f"{min(wall):.3f}",
                f"{statistics.median(cpu):.3f}",
                loaded(argv, env),
            )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
