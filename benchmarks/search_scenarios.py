"""Launches and verdict of the real search loop on every shipped scenario, with and without knowledge.

A lighter companion of search_launches.py (which also runs one-factor-at-a-time and random order):
each scenario is brought up by `Run(...).execute()` against scenario servers, `--screen never`, no
delta debugging, a 12-launch budget, and the table gives the verdict, the launches and the failure
class of each launch. The time scale is 0.01 real seconds per simulated second by default: on a
loaded 2-core machine a smaller one makes the double's start-up outlast its own scaled hang
deadline, and launches read as hangs that are not.

Run:  .venv/bin/python benchmarks/search_scenarios.py [NAME ...] [--time-scale 0.01] [--budget 12] [--in-process]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bringup.scenario import bundled_scenarios, load_scenario, scenario_path
from bringup.session.run import Run, RunSettings


def one(
    name: str, knowledge: bool, scale: float, budget: int, in_process: bool = False
) -> tuple[str, int, str]:
    path = scenario_path(name)
    sc = load_scenario(path)
    with tempfile.TemporaryDirectory(prefix="bringup-bench-") as root:
        s = RunSettings(
            scenario=str(path),
            baseline=sc.baseline,
            knowledge=knowledge,
            screen="never",
            minimize=False,
            time_scale=scale,
            max_launches=budget,
        )
        if in_process:  # every launch answered by the scenario oracle (bringup/oracle/inprocess.py)
            from bringup.oracle.inprocess import InProcessTrial

            res = Run(s, Path(root), trial_factory=InProcessTrial).execute()
        else:
            res = Run(s, Path(root)).execute()
    path_txt = " > ".join(a.failure_class or a.status for a in res.attempts)
    return res.status, res.launches, path_txt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scenario names (default: every shipped one)")
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="answer each launch with the scenario oracle instead of a scenario server (minutes, not hours)",
    )
    a = ap.parse_args()
    names = a.names or [p.stem for p in bundled_scenarios()]
    table = Table(title="The search on the shipped scenarios (screen never, 12 launches)")
    for col in ("scenario", "knowledge", "verdict", "launches", "what each launch showed"):
        table.add_column(col)
    for name in names:
        for knowledge in (True, False):
            status, n, shown = one(name, knowledge, a.time_scale, a.budget, a.in_process)
            table.add_row(name, "on" if knowledge else "off", status, str(n), shown)
            print(f"| {name} | {'on' if knowledge else 'off'} | {status} | {n} | {shown} |", flush=True)
    Console().print(table)


if __name__ == "__main__":
    main()
