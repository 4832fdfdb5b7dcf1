"""Issue 22's benchmark: random compositions of fault atoms, searched by bringup's real loop, in-process.

For each case (bringup/oracle/faults/compose.py: 1-4 atoms on a base scenario, proven solvable by the
oracle) it runs `bringup.session.run.Run` twice, with knowledge and with --no-knowledge, both with
--screen never, no minimizing and 12 launches at most, every launch answered in-process
(bringup/oracle/inprocess.py: the scenario server's own lines, read by the trial's own
classifier). Per split and column it prints: the share validated within 12 launches, median and
p90 launches by number of atoms (validated runs; a run that did not validate counts as 13), the
share of give-ups and of false "no working configuration" verdicts, and the shares of launches
that changed nothing the previous failure's evidence named (unimplicated) or nothing of the atom
that decided it (off-target). Definitions: docs/composed-faults.md and bringup/oracle/faults/measure.py.

A split is any atom file of bringup/data/faults/ but bases.yaml (dev, dev2, heldout, sealed, ...);
`both` means dev + heldout. The splits named dev* (dev, dev2) are readable: their cases are written in
full to --json. Every other split is sealed: only aggregate numbers are printed or written for it
(no atom ids, baselines or log lines).

Run:  .venv/bin/python benchmarks/composed_faults.py [--cases 200] [--seed 0]
                                                      [--split dev|dev2|heldout|sealed|both] [--jobs 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bringup.oracle.faults.atoms import is_sealed, splits
from bringup.oracle.faults.compose import Case, compose_case
from bringup.oracle.faults.measure import CaseResult, measure
from bringup.oracle.inprocess import InProcessTrial
from bringup.oracle.trials import Oracle
from bringup.session.run import Run, RunSettings
from bringup.trial.process import die_with_parent

BUDGET = 12
COLUMNS = (("knowledge", True), ("no-knowledge", False))


def _quiet_reports() -> None:
    """The run's report and HTML page are not part of the search; writing them is most of a
    composed case's time (a Jinja template compiled per run). The benchmark skips them."""
    import bringup.report.findings as report
    import bringup.report.html as html

    html.write_html = lambda *a, **k: None  # type: ignore[assignment]
    report.write_report = lambda *a, **k: None  # type: ignore[assignment]


DRY_RUN = "never"  # --dry-run always: each case asks the installed engine's own checks (issue 25)
_SHARED: list[Any] = []  # one dry-run child per worker process, the facts sent per run


def _share_dry_run() -> None:
    """Every Run of this process asks one child (its cold start paid once), as
    benchmarks/dryrun_predict.py does: ``for_target`` hands out a copy with the run's facts."""
    import bringup.dryrun as pkg

    real = pkg.for_target

    def shared(target: Any, facts: dict[str, Any]) -> Any:
        mine = real(target, facts)  # no child until started
        if not mine.available:
            return mine  # another engine or version: its own "cannot check"
        if not _SHARED:
            _SHARED.append(mine)
        first = _SHARED[0]
        if (mine.dialect, mine.installed_version) != (first.dialect, first.installed_version):
            return mine
        return first.sharing(facts)

    pkg.for_target = shared  # type: ignore[assignment]


def run_case(case: Case, knowledge: bool, keep_detail: bool) -> CaseResult:
    settings = RunSettings(
        scenario=str(case.path),
        baseline=case.baseline,
        knowledge=knowledge,
        screen="never",
        minimize=False,
        max_launches=BUDGET,
        dry_run=DRY_RUN,  # type: ignore[arg-type]
    )
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="bringup-faults-run-") as root:
        res = Run(settings, Path(root), trial_factory=InProcessTrial).execute()
        oracle = Oracle(case.scenario, env=dict(os.environ))
        return measure(case, res, oracle, time.time() - t0, keep_detail)


def _work(args: tuple[str, int, int, str, str]) -> dict[str, Any]:
    split, seed, index, folder, dry = args
    global DRY_RUN
    if dry != "never" and DRY_RUN == "never":
        _share_dry_run()
    DRY_RUN = dry
    _quiet_reports()
    case = compose_case(split, seed, index, Path(folder), dict(os.environ))
    keep = not is_sealed(split)
    out: dict[str, Any] = {"index": index, "atoms": len(case.atoms)}
    for name, knowledge in COLUMNS:
        out[name] = run_case(case, knowledge, keep).__dict__
    return out


def _p90(xs: list[int]) -> float:
    xs = sorted(xs)
    return float(xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]) if xs else float("nan")


def summarize(rows: list[dict[str, Any]], column: str) -> dict[str, Any]:
    rs = [r[column] for r in rows]
    n = len(rs)
    by: dict[int, list[int]] = {}
    for r in rs:
        by.setdefault(r["atoms"], []).append(r["launches"] if r["kind"] == "validated" else BUDGET + 1)
    judged = sum(r["judged"] for r in rs)
    failed = sum(r["failed"] for r in rs)
    return {
        "cases": n,
        "validated": sum(r["kind"] == "validated" for r in rs) / n if n else 0.0,
        "gave_up": sum(r["kind"] in ("gave-up", "false-verdict") for r in rs) / n if n else 0.0,
        "false_verdict": sum(r["kind"] == "false-verdict" for r in rs) / n if n else 0.0,
        "unimplicated": sum(r["unimplicated"] for r in rs) / judged if judged else 0.0,
        "off_target": sum(r["off_target"] for r in rs) / judged if judged else 0.0,
        "classified": sum(r["classified"] for r in rs) / failed if failed else 0.0,
        "launches": {
            str(k): {"cases": len(v), "median": statistics.median(v), "p90": _p90(v)}
            for k, v in sorted(by.items())
        },
        "wall_s": sum(r["wall_s"] for r in rs),
        "refused": sum(r.get("refused", 0) for r in rs),
        "law": sum(r.get("law", 0) for r in rs) / max(1, sum(r["launches"] for r in rs)),
    }


def table(split: str, summary: dict[str, dict[str, Any]]) -> str:
    head = "| column | cases | validated <= 12 | median / p90 launches by atoms (1, 2, 3, 4) | gave up | false verdicts | unimplicated launches | off-target launches | failures classified right |"
    out = [f"**{split}**", "", head, "|" + "---|" * 9]
    for col, s in summary.items():
        by = ", ".join(
            f"{k}: {v['median']:g} / {v['p90']:g} (n={v['cases']})" for k, v in s["launches"].items()
        )
        out.append(
            f"| {col} | {s['cases']} | {100 * s['validated']:.1f}% | {by} | {100 * s['gave_up']:.1f}% | "
            f"{100 * s['false_verdict']:.1f}% | {100 * s['unimplicated']:.1f}% | {100 * s['off_target']:.1f}% | {100 * s['classified']:.1f}% |"
        )
    laws = ", ".join(f"{col} {100 * s.get('law', 0.0):.1f}%" for col, s in summary.items())
    out += ["", f"Launches a law of the machine refused (weights, KV cache, attention selector): {laws}."]
    return "\n".join(out)


def run_split(
    split: str, cases: int, seed: int, jobs: int, dry: str = "never"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    folder = tempfile.mkdtemp(prefix=f"bringup-faults-{split}-")
    args = [(split, seed, i, folder, dry) for i in range(cases)]
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=die_with_parent) as pool:
        # a worker killed with its parent: a SIGTERM to the benchmark left it running its cases, orphaned
        for row in pool.map(_work, args, chunksize=2):
            rows.append(row)
            if len(rows) % 20 == 0:
                print(f"  {split}: {len(rows)}/{cases} cases", file=sys.stderr, flush=True)
    return rows, {col: summarize(rows, col) for col, _ in COLUMNS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split", choices=(*splits(), "both"), default="both")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--dry-run",
        choices=("never", "always"),
        default="never",
        help="always: each case asks the installed engine's own checks before every launch "
        "(vLLM 0.32.0 cases; others say cannot check)",
    )
    a = p.parse_args(argv)
    chosen = ("dev", "heldout") if a.split == "both" else (a.split,)
    report: dict[str, Any] = {"cases": a.cases, "seed": a.seed, "budget": BUDGET}
    for split in chosen:
        t0 = time.time()
        rows, summary = run_split(split, a.cases, a.seed, a.jobs, a.dry_run)
        took = time.time() - t0
        print(table(split, summary))
        print(f"\n({split}: {a.cases} cases in {took:.0f} s)\n", flush=True)
        report[split] = {"summary": summary, "seconds": took}
        if not is_sealed(split):
            report[split]["cases_detail"] = rows  # a sealed split: aggregates only
    if a.json is not None:
        a.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
