"""How many failing launches the dry run predicts before launch, on the shipped vLLM scenarios.

For every shipped scenario of vLLM 0.32.0 (the installed CPU build's version) this takes the
baseline and each single change of the search space (every level of every factor, and unset),
asks the scenario oracle what a launch would do (bringup/oracle/trials.py: the scenario's own
rules) and asks the dry run (bringup/dryrun/: vLLM 0.32.0's own checks, the device from the
scenario's facts). It counts failing launches, those the dry run refuses, the refusals of
launches that work (false refusals), and for every knowledge rule with an "incompatible"
verdict on a level whether the engine's own check agrees (refused), disagrees (passes) or
cannot say. One child answers every scenario (the facts travel with each request).

    PYTHONPATH=. python benchmarks/dryrun_predict.py [--json out.json] [--searches]

With --searches it also runs the search itself (Run(...).execute() against the scenario servers,
screens off, no minimizing) on each scenario with and without the dry run, with knowledge and on
signatures alone, and prints launches, failing launches and simulated hours to the first
validated configuration.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from bringup.dryrun import DryRun, for_target
from bringup.oracle.trials import Oracle
from bringup.session.run import Run, RunSettings

SCENARIOS = Path(__file__).resolve().parent.parent / "bringup" / "data" / "scenarios"


def neighbours(r: Run):
    yield "(baseline)", r.baseline
    for f in r.space.factors:
        for lv in [None, *f.levels]:
            c = r.baseline.with_changes({f.name: lv})
            if c.key() != r.baseline.key():
                yield f"{f.name}={f.describe_level(lv)}", c


def scenario_rows(path: Path, shared: DryRun | None) -> tuple[list[dict], DryRun]:
    r = Run(RunSettings(scenario=str(path)), Path("/nonexistent-bringup-runs"))
    r.prepare_offline()
    dr = (
        dataclasses.replace(shared, facts=dict(r.facts), _cache={})
        if shared
        else for_target(r.target, r.facts)
    )
    oracle = Oracle.load(path)
    rows = []
    for change, cand in neighbours(r):
        o = oracle.candidate(cand)
        v = dr.check(cand)
        rules = []
        for f in r.space.factors:
            lv = f.level_in(cand.flag_dict, cand.env_dict)
            rules += [x.rule_id for x in r.strategy.verdicts(f, lv) if x.kind == "incompatible" and x.rule_id]
        rows.append(
            {
                "scenario": path.stem,
                "change": change,
                "launch": o.status if o.launched else "rejected-before-launch",
                "phase": o.phase,
                "rule": o.rule,
                "dry": v.status,
                "check": v.check,
                "message": v.message[:300],
                "incompatible_rules": rules,
            }
        )
    return rows, dr


def vllm_scenarios() -> list[Path]:
    paths = []
    for p in sorted(SCENARIOS.glob("*.yaml")):
        text = p.read_text()
        if "\nengine: vllm" in text and "engine_version: 0.32.0" in text:
            paths.append(p)
    return paths


def search(path: Path, knowledge: bool, dry: str, shared: DryRun | None, scale: float) -> dict:
    """One bring-up in a fresh journal; the dry run's child shared across runs (facts per run)."""
    import bringup.dryrun as pkg

    def share(target, facts):
        return shared.sharing(facts) if shared else for_target(target, facts)

    saved = pkg.for_target
    pkg.for_target = share
    try:
        with tempfile.TemporaryDirectory(prefix="bringup-dry-") as root:
            s = RunSettings(
                scenario=str(path),
                knowledge=knowledge,
                dry_run=dry,
                screen="never",
                minimize=False,
                time_scale=scale,
                max_launches=12,
            )
            res = Run(s, Path(root)).execute()
    finally:
        pkg.for_target = saved
    launched = [a for a in res.attempts if a.purpose == "search"]
    return {
        "scenario": path.stem,
        "knowledge": knowledge,
        "dry_run": dry,
        "validated": res.validated,
        "launches": res.launches,
        "failing": sum(1 for a in launched if a.status != "works"),
        "refused_dry": sum(1 for a in res.attempts if a.purpose == "dry-run"),
        "hours": round(res.simulated_hours or 0.0, 3),
    }


def searches(paths: list[Path], shared: DryRun | None, scale: float) -> list[dict]:
    out = []
    for p in paths:
        for knowledge in (True, False):
            for dry in ("never", "always"):  # scenarios: asked only when told
                r = search(p, knowledge, dry, shared, scale)
                out.append(r)
                print(
                    f"  {r['scenario']:<45} {'knowledge' if knowledge else 'signatures':<10} dry {dry:<5} "
                    f"validated={r['validated']!s:<5} launches {r['launches']:>2} failing {r['failing']:>2} "
                    f"dry refusals {r['refused_dry']:>2} {r['hours']:.2f} h",
                    flush=True,
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--searches", action="store_true")
    ap.add_argument("--scenario", action="append", default=[], help="only these (name substrings)")
    ap.add_argument("--time-scale", type=float, default=0.02, help="real seconds per simulated second")
    a = ap.parse_args()
    paths = [p for p in vllm_scenarios() if not a.scenario or any(s in p.stem for s in a.scenario)]
    rows: list[dict] = []
    shared: DryRun | None = None
    t0 = time.time()
    for p in paths:
        got, dr = scenario_rows(p, shared)
        shared = shared or dr
        rows += got
    runs = searches(paths, shared, a.time_scale) if a.searches else []
    if shared is not None:
        shared.close()
    summarize(rows, shared, t0, len(paths))
    if a.json:
        a.json.write_text(json.dumps({"candidates": rows, "searches": runs}, indent=1))


def summarize(rows: list[dict], shared: DryRun | None, t0: float, n: int) -> None:
    fails = [x for x in rows if x["launch"] in ("fails", "timeout", "wrong-output")]
    refused = [x for x in fails if x["dry"] == "refused"]
    false_ref = [x for x in rows if x["launch"] == "works" and x["dry"] == "refused"]
    by_rule: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for x in rows:
        for rid in set(x["incompatible_rules"]):
            by_rule[rid][x["dry"]] += 1
    print(f"{n} scenarios, {len(rows)} candidates (baseline and single changes)")
    print(f"failing launches: {len(fails)}; refused by the dry run before launch: {len(refused)}")
    print(f"launches that work but the dry run refuses (false refusals): {len(false_ref)}")
    for x in false_ref:
        print(f"  FALSE {x['scenario']}: {x['change']}: {x['message'][:200]}")
    print("dry verdicts on failing launches:", dict(collections.Counter(x["dry"] for x in fails)))
    print(
        "refused, by scenario rule:",
        dict(collections.Counter(f"{x['scenario']}:{x['rule']}" for x in refused)),
    )
    print("knowledge rules (incompatible) vs the engine's own check:")
    for rid, c in sorted(by_rule.items()):
        print(f"  {rid}: {dict(c)}")
    if shared is not None:
        print(
            f"dry run cost: cold start {shared.start_s or 0:.1f} s; warm per candidate: "
            f"median {sorted(shared.costs)[len(shared.costs) // 2] if shared.costs else 0:.3f} s, "
            f"max {max(shared.costs) if shared.costs else 0:.3f} s over {len(shared.costs)}"
        )
    print(f"wall {time.time() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
