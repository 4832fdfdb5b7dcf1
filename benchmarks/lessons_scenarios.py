"""Issue 37's scenario measure: lessons exported from one run, used by the next on the same facts and off them.

For every shipped scenario, with knowledge and without, every launch answered in-process (the
scenario oracle, bringup/oracle/inprocess.py; --screen never, 12 launches):

1. a blind run (an empty journal, no lessons), minimizing the fix as `bringup run` does;
2. `lessons export` of that run (bringup/report/learned.py);
3. a blind run on the same facts with those lessons (a fresh journal): launches to validated;
4. the same with the lessons' scope moved out of reach: another GPU architecture (compute
   capability 9.0 <-> 12.0) and another engine major version (1.x for 0.x): the launches and
   the candidates of every launch, compared with step 1's, case for case.

A lesson's reach is symmetric in the two scopes (bringup/knowledge/learned.py `reach`), so moving
the lessons' scope is the same test as moving the run's facts; the scenario's facts stay as its
engine replays them.

Run:  .venv/bin/python benchmarks/lessons_scenarios.py [NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bringup.knowledge.learned import Lesson, lesson_id
from bringup.knowledge.learned_files import write_lessons
from bringup.oracle.inprocess import InProcessTrial
from bringup.report.learned import learned
from bringup.scenario import bundled_scenarios, load_scenario, scenario_path
from bringup.session.run import Run, RunSettings


def _quiet_reports() -> None:
    """No HTML page per run (most of an in-process run's time); findings.json is still written."""
    import bringup.report.html as html

    html.write_html = lambda *a, **k: None  # type: ignore[assignment]


def run(name: str, knowledge: bool, root: Path, lessons: list[str] | None = None) -> Any:
    path = scenario_path(name)
    s = RunSettings(
        scenario=str(path),
        baseline=load_scenario(path).baseline,
        knowledge=knowledge,
        screen="never",
        minimize=True,
        max_launches=12,
        lessons=lessons or [],
    )
    return Run(s, root, trial_factory=InProcessTrial).execute()


def moved(lessons: list[Lesson], how: str) -> list[Lesson]:
    """The lessons with their scope out of reach: another GPU architecture or engine major version."""
    out = []
    for ls in lessons:
        scope = ls.scope.model_copy()
        if how == "gpu":
            scope.compute_capability = 9.0 if scope.compute_capability != 9.0 else 12.0
        else:
            major = (scope.engine_version or "0").split(".")
            scope.engine_version = ".".join([str(int(major[0]) + 1), *major[1:]])
        out.append(ls.model_copy(update={"scope": scope, "id": lesson_id(ls.failure, ls.fix, scope)}))
    return out


def path_of(res: Any) -> list[str]:
    return [f"{a.changes} -> {a.failure_class or a.status}" for a in res.attempts if a.purpose == "search"]


def one(name: str, knowledge: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bringup-lessons-") as tmp:
        t = Path(tmp)
        blind = run(name, knowledge, t / "blind")
        lessons = learned(Path(blind.run_dir)).lessons
        files = {}
        for how, ls in (
            ("same", lessons),
            ("gpu", moved(lessons, "gpu")),
            ("engine", moved(lessons, "engine")),
        ):
            files[how] = t / f"{how}.yaml"
            write_lessons(files[how], ls)
        res = {how: run(name, knowledge, t / how, [str(f)]) for how, f in files.items()}
    return {
        "scenario": name,
        "knowledge": knowledge,
        "blind": (blind.status, blind.launches),
        "lessons": len(lessons),
        "with": (res["same"].status, res["same"].launches),
        "first_from_lessons": bool(res["same"].lessons and any(u.first for u in res["same"].lessons)),
        "other_gpu": (res["gpu"].status, res["gpu"].launches),
        "other_engine": (res["engine"].status, res["engine"].launches),
        "identical_off_scope": path_of(res["gpu"]) == path_of(blind) == path_of(res["engine"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="scenario names (default: every shipped one)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    _quiet_reports()
    names = a.names or [p.stem for p in bundled_scenarios()]
    rows = []
    t0 = time.time()
    print(
        "| scenario | knowledge | blind | lessons | with lessons | another GPU arch | another engine major | off-scope identical |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for knowledge in (True, False):
            r = one(name, knowledge)
            rows.append(r)
            cell = lambda v: f"{v[0]} in {v[1]}"  # noqa: E731
            print(
                f"| {name} | {'on' if knowledge else 'off'} | {cell(r['blind'])} | {r['lessons']} | "
                f"{cell(r['with'])} | {cell(r['other_gpu'])} | {cell(r['other_engine'])} | "
                f"{'yes' if r['identical_off_scope'] else 'NO'} |",
                flush=True,
            )
    ok = [r for r in rows if r["blind"][0] == "validated"]
    one_launch = sum(r["with"] == ("validated", 1) for r in ok)
    same = sum(r["identical_off_scope"] for r in rows)
    print(
        f"\nvalidated blind: {len(ok)} of {len(rows)}; with their lessons in 1 launch: {one_launch} of {len(ok)}; "
        f"off scope, the same launches case for case: {same} of {len(rows)} ({time.time() - t0:.0f} s)"
    )
    if a.json is not None:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
