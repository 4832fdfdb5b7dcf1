"""Issue 12's measure: simulated wall hours to the first validated configuration, trials at once
(`--parallel auto`: one slot per GPU of the scenario's machine) against one at a time.

Each cell is a real `bringup run` against a scenario server (the test double replays the machine),
in a fresh journal; the simulated clock of a parallel run is the makespan of its trials (each starts
when it was submitted and lasts its launch's simulated seconds), so overlapping trials count once.
Also reported: launches spent, the most trials that ran at once, and GPU utilisation (GPU-seconds
busy over GPUs x makespan) of the parallel run.

    python benchmarks/parallel_search.py [--scenario NAME] [--no-knowledge-only] [--budget 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bringup.record.results import RunResult  # noqa: E402
from bringup.session.run import Run, RunSettings  # noqa: E402

SCENARIOS = ROOT / "bringup" / "data" / "scenarios"


@dataclass
class Cell:
    validated: bool
    launches: int
    hours: float
    most_at_once: int = 1
    utilisation: float | None = None

    def text(self) -> str:
        return f"{'' if self.validated else 'not validated, '}{self.launches} launches · {self.hours:.2f} h"


def measure(path: Path, knowledge: bool, parallel: str, budget: int, scale: float) -> Cell:
    with tempfile.TemporaryDirectory(prefix="bringup-par-") as root:
        s = RunSettings(
            scenario=str(path),
            knowledge=knowledge,
            parallel=parallel,
            max_launches=budget,
            minimize=False,
            time_scale=scale,
        )
        r = Run(s, Path(root)).execute()
    return Cell(r.validated, r.launches, r.simulated_hours or 0.0, *spans(r))


def spans(r: RunResult) -> tuple[int, float | None]:
    """(most trials at once, GPU utilisation) from the attempts' spans on the run's clock."""
    spans = [
        (a.clock_start_s, a.clock_end_s, len(a.gpus))
        for a in r.attempts
        if a.clock_start_s is not None and a.clock_end_s is not None and a.purpose != "minimize"
    ]
    if not spans:
        return 1, None
    most = max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans)
    end = (r.simulated_hours or 0.0) * 3600
    gpus = int(r.facts.get("gpu.count") or 0)
    busy = sum((min(e, end) - s) * n for s, e, n in spans if s < end)
    return most, (busy / (gpus * end) if gpus and end else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", action="append", help="a shipped scenario name (repeatable; default: all)")
    ap.add_argument("--knowledge", choices=["both", "on", "off"], default="both")
    ap.add_argument("--budget", type=int, default=30, help="launch budget of each run (screens count)")
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--md", type=Path, help="also write the table as Markdown here")
    a = ap.parse_args()
    names = a.scenario or sorted(p.stem for p in SCENARIOS.glob("*.yaml") if not p.stem.startswith("tune-"))
    modes = {"both": [True, False], "on": [True], "off": [False]}[a.knowledge]
    rows = [
        "| scenario | knowledge | one at a time | --parallel auto | ratio | most at once | GPU use |",
        "|---|---|---|---|---|---|---|",
    ]
    print(rows[0])
    print(rows[1])
    for name in names:
        path = SCENARIOS / f"{name}.yaml"
        for k in modes:
            one = measure(path, k, "1", a.budget, a.time_scale)
            par = measure(path, k, "auto", a.budget, a.time_scale)
            ratio = f"{par.hours / one.hours:.2f}x" if one.hours else "-"
            use = f"{par.utilisation:.0%}" if par.utilisation is not None else "-"
            row = f"| {name} | {'on' if k else 'off'} | {one.text()} | {par.text()} | {ratio} | {par.most_at_once} | {use} |"
            rows.append(row)
            print(row, flush=True)
    if a.md:
        a.md.write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
