"""Issue 37's composed-fault measure: lessons exported from the dev split's runs, used on another split.

1. Every dev case (bringup/oracle/faults/compose.py) is brought up in-process as
   benchmarks/composed_faults.py does (--screen never, 12 launches), but minimizing its fix as `bringup
   run` does by default, and its run's lessons are exported (bringup/report/learned.py), one file
   of lessons per column (knowledge, no-knowledge).
2. Every case of the target split is brought up twice per column, without lessons and with that
   column's file (--minimize off, as composed_faults.py).
3. The target's cases fall in three groups: those that share an atom (the same engine, trigger and
   injected flags as an atom of a dev case whose run gave lessons) and that dev case's base; those
   a lesson reached otherwise (a base in reach, no shared atom); and those no lesson reached
   (nothing shared): these must run exactly as without lessons, launch for launch.

A sealed split (any but dev*) prints aggregates only: counts, shares, medians. No atom, case or
baseline of it is printed or written.

Run:  .venv/bin/python benchmarks/lessons_composed.py [--dev-cases 100] [--split heldout] [--cases 40] [--jobs 1]
                                                       [--dev-cache dev-lessons.json]
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

from bringup.oracle.faults.atoms import Atom, is_sealed
from bringup.oracle.faults.compose import Case, compose_case
from bringup.oracle.faults.measure import stop_kind
from bringup.oracle.inprocess import InProcessTrial
from bringup.session.run import Run, RunSettings
from bringup.trial.process import die_with_parent

BUDGET = 12
COLUMNS = (("knowledge", True), ("no-knowledge", False))


def _quiet_html() -> None:
    import bringup.report.html as html

    html.write_html = lambda *a, **k: None  # type: ignore[assignment]


def atom_key(a: Atom) -> str:
    """An atom by what it does (engine, trigger, what the baseline carries), not by its name."""
    return json.dumps([a.engine, a.when, a.inject], sort_keys=True, default=str)


def settings(case: Case, knowledge: bool, minimize: bool, lessons: list[str]) -> RunSettings:
    return RunSettings(
        scenario=str(case.path),
        baseline=case.baseline,
        knowledge=knowledge,
        screen="never",
        minimize=minimize,
        max_launches=BUDGET,
        lessons=lessons,
    )


def _dev(args: tuple[int, int, str]) -> dict[str, Any]:
    """One dev case, both columns: its lessons (as data) and what it shares."""
    from bringup.knowledge.learned_files import as_data
    from bringup.report.learned import learned

    seed, index, folder = args
    _quiet_html()
    case = compose_case("dev", seed, index, Path(folder), dict(os.environ))
    out: dict[str, Any] = {"base": case.base, "atoms": [atom_key(a) for a in case.atoms]}
    for name, knowledge in COLUMNS:
        with tempfile.TemporaryDirectory(prefix="bringup-lessons-dev-") as root:
            res = Run(settings(case, knowledge, True, []), Path(root), trial_factory=InProcessTrial).execute()
            out[name] = as_data(learned(Path(res.run_dir)).lessons)["lessons"]
    return out


def _target(args: tuple[str, int, int, str, dict[str, str]]) -> dict[str, Any]:
    """One target case, both columns, without and with lessons."""
    split, seed, index, folder, files = args
    _quiet_html()
    case = compose_case(split, seed, index, Path(folder), dict(os.environ))
    out: dict[str, Any] = {"base": case.base, "atoms": [atom_key(a) for a in case.atoms]}
    for name, knowledge in COLUMNS:
        for label, lessons in (("without", []), ("with", [files[name]])):
            with tempfile.TemporaryDirectory(prefix="bringup-lessons-run-") as root:
                s = settings(case, knowledge, False, lessons)
                res = Run(s, Path(root), trial_factory=InProcessTrial).execute()
            out[f"{name}/{label}"] = {
                "kind": stop_kind(res),
                "launches": res.launches,
                "path": [f"{a.changes}>{a.failure_class or a.status}" for a in res.attempts],
                "used": len(res.lessons),
                "first": any(u.first for u in res.lessons),
            }
    return out


def _pool(fn: Any, args: list[Any], jobs: int) -> list[Any]:
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=die_with_parent) as pool:
        # a worker killed with its parent: a SIGTERM to the benchmark left it running its cases, orphaned
        return list(pool.map(fn, args, chunksize=1))


def group_of(row: dict[str, Any], dev: list[dict[str, Any]], column: str) -> str:
    """shared (an atom and its base with a dev case that gave lessons), reached (a lesson used
    otherwise), or nothing (no lesson reached it)."""
    taught = [d for d in dev if d[column]]
    if any(d["base"] == row["base"] and set(d["atoms"]) & set(row["atoms"]) for d in taught):
        return "shared"
    return "reached" if row[f"{column}/with"]["used"] else "nothing"


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def launches(r: dict[str, Any]) -> int:
        return r["launches"] if r["kind"] == "validated" else BUDGET + 1

    out: dict[str, Any] = {"cases": len(rows)}
    for label in ("without", "with"):
        rs = [r[label] for r in rows]
        out[label] = {
            "validated": sum(r["kind"] == "validated" for r in rs) / len(rs) if rs else 0.0,
            "median": statistics.median(launches(r) for r in rs) if rs else float("nan"),
            "launches": sum(launches(r) for r in rs),
            "false_verdicts": sum(r["kind"] == "false-verdict" for r in rs),
        }
    out["identical"] = sum(r["with"]["path"] == r["without"]["path"] for r in rows)
    out["better"] = sum(launches(r["with"]) < launches(r["without"]) for r in rows)
    out["worse"] = sum(launches(r["with"]) > launches(r["without"]) for r in rows)
    return out


def table(split: str, column: str, groups: dict[str, dict[str, Any]]) -> str:
    head = (
        f"**{split}, {column}** | cases | validated without / with | median launches without / with | "
        "launches in all | better / worse / identical | false verdicts with"
    )
    out = [head, "|---|---|---|---|---|---|---|"]
    for g, s in groups.items():
        if not s["cases"]:
            out.append(f"| {g} | 0 | | | | | |")
            continue
        w, l_ = s["without"], s["with"]
        out.append(
            f"| {g} | {s['cases']} | {100 * w['validated']:.0f}% / {100 * l_['validated']:.0f}% | "
            f"{w['median']:g} / {l_['median']:g} | {w['launches']} / {l_['launches']} | "
            f"{s['better']} / {s['worse']} / {s['identical']} | {l_['false_verdicts']} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import yaml

    from bringup.knowledge.learned_files import HEADER, SCHEMA

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dev-cases", type=int, default=100)
    p.add_argument("--split", default="heldout")
    p.add_argument("--cases", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--target-seed",
        type=int,
        default=None,
        help="the target split's seed (default --seed): other cases of dev",
    )
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--dev-cache",
        type=Path,
        default=None,
        help="keep the dev runs' lessons here, and reuse them when there",
    )
    a = p.parse_args(argv)
    if a.split.startswith("sealed"):
        p.error("the sealed splits are not for this measure (docs/lessons.md)")
    t0 = time.time()
    folder = tempfile.mkdtemp(prefix="bringup-lessons-cases-")
    if a.dev_cache is not None and a.dev_cache.is_file():  # the dev runs' lessons, from an earlier call
        dev = json.loads(a.dev_cache.read_text())[: a.dev_cases]
    else:
        dev = _pool(_dev, [(a.seed, i, folder) for i in range(a.dev_cases)], a.jobs)
        if a.dev_cache is not None:
            a.dev_cache.write_text(json.dumps(dev))
    files: dict[str, str] = {}
    for name, _ in COLUMNS:
        lessons = [ls for d in dev for ls in d[name]]
        uniq = list({ls["id"]: ls for ls in lessons}.values())
        files[name] = str(Path(folder) / f"dev-{name}.yaml")
        Path(files[name]).write_text(
            HEADER + yaml.safe_dump({"schema": SCHEMA, "lessons": uniq}, sort_keys=False)
        )
        print(
            f"dev, {name}: {len(uniq)} lessons from {sum(1 for d in dev if d[name])} of {len(dev)} cases",
            flush=True,
        )
    seed = a.seed if a.target_seed is None else a.target_seed
    rows = _pool(_target, [(a.split, seed, i, folder, files) for i in range(a.cases)], a.jobs)
    report: dict[str, Any] = {
        "dev_cases": a.dev_cases,
        "split": a.split,
        "cases": a.cases,
        "target_seed": seed,
    }
    for name, _ in COLUMNS:
        groups: dict[str, list[dict[str, Any]]] = {"shared": [], "reached": [], "nothing": []}
        for r in rows:
            groups[group_of(r, dev, name)].append(
                {"without": r[f"{name}/without"], "with": r[f"{name}/with"]}
            )
        sums = {g: summary(rs) for g, rs in groups.items()}
        sums["all"] = summary([x for rs in groups.values() for x in rs])
        print("\n" + table(a.split, name, sums), flush=True)
        report[name] = sums
    print(f"\n({a.dev_cases} dev cases and {a.cases} {a.split} cases in {time.time() - t0:.0f} s)")
    if a.json is not None:
        if not is_sealed(a.split):
            report["rows"] = rows
        a.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
