"""Issue 6 measure: tuning efficiency where the true optimum is known.

On the scenario `tune-llama31-70b-fp8-h200-sglang` (a performance model: the scenario server
serves at those speeds, and bringup/oracle/perfsim.py evaluates a point offline with the same
step model and scheduler), over the 240-point grid of docs/scenarios.md (memory fraction x max
running requests x chunked-prefill size x CUDA-graph max batch), for goodput under
TTFT p99 <= 10 s and ITL p99 <= 200 ms at concurrency 96 (1536 in, 512 out, 400 requests):

- the full grid: every point, 240 launches (the optimum: its best point);
- bringup's tuner (Optuna TPE, starting from the scenario's baseline, learning memory failures);
- random search with the same launch budget.

Each method's launches see step noise (a different seed per launch, as repeated real
measurements would); each method's pick is scored by its noise-free value, as a fraction of the
grid optimum. Median over 10 seeds. Also: launches until the tuner first holds a point within
95% of the optimum.

With ``--repeats N`` (the default: bringup tune's own 6), the pick is the repeat phase's verdict
(bringup/tuning/repeats.py): the winner beyond noise, or the baseline kept; the repeat launches
are counted in their own column. ``--repeats 0``: the search's best single measurement, as before.

Run:  .venv/bin/python benchmarks/tuning_efficiency.py [--seeds 10] [--budgets 24,48,72] [--repeats 6]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bringup.core.candidate import parse_flags
from bringup.oracle.tuning import ScenarioOracle
from bringup.scenario import load_scenario, scenario_path
from bringup.tuning.knobs import Knob, start_point, with_base_levels
from bringup.tuning.session import TuneSession
from bringup.tuning.tuner import Tuner, grid
from bringup.tuning.verdict import RepeatRule

SCENARIO = "tune-llama31-70b-fp8-h200-sglang"
WORKLOAD = {
    "concurrency": 96,
    "input_len": 1536,
    "output_len": 512,
    "num_prompts": 400,
    "slo": {"ttft_p99": 10.0, "itl_p99": 0.2},
}
KNOBS = [
    Knob("--mem-fraction-static", ["0.8", "0.85", "0.88", "0.92"], monotone_memory=True),
    Knob("--max-running-requests", ["32", "64", "96", "128", "256"]),
    Knob("--chunked-prefill-size", ["256", "512", "1024", "2048"]),
    Knob("--cuda-graph-max-bs", ["64", "128", "256"], monotone_memory=True),
]


def chosen(t: Tuner, oracle: ScenarioOracle, repeats: int) -> tuple[dict | None, int]:
    """The tuning session as `bringup tune` runs it (bringup/tuning/session.py), its points answered
    by the oracle: what it ends with, and the repeat launches it took. With repeats, the verdict's
    (the winner, or the baseline kept when it works); without, the best single measurement. For
    random search (no baseline), the finalists are ranked by their repeats' medians."""
    session = TuneSession(t, RepeatRule(max_rounds=repeats) if repeats else None)
    out = session.run(lambda k: oracle(k, None))
    return session.chosen(), out.launches if out is not None else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budgets", default="24,48,72")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--repeats",
        type=int,
        default=6,
        help="the repeat phase's budget in rounds after the search (bringup tune's default; 0: none, "
        "the search's best single measurement is the pick)",
    )
    a = ap.parse_args()
    budgets = [int(x) for x in a.budgets.split(",")]
    sc = load_scenario(scenario_path(SCENARIO))
    spec = sc.help_spec()
    base = parse_flags(sc.baseline or "", spec)
    knobs = with_base_levels([Knob(k.flag, list(k.levels), k.monotone_memory) for k in KNOBS], base)
    start = start_point(knobs, base)

    t0 = time.time()
    truth = ScenarioOracle(sc, base, WORKLOAD, noise_seed=0)
    values: dict[tuple, float] = {}
    for k in grid(KNOBS):
        m = truth.metrics(k, seed=0)
        values[tuple(sorted(k.items()))] = m["goodput_rps"] if m.get("feasible") else 0.0
    optimum = max(values.values())
    best_point = max(values, key=values.get)
    grid_s = time.time() - t0

    def true_value(knobs_: dict) -> float:
        key = tuple(sorted(knobs_.items()))
        if key not in values:  # the baseline's own levels, outside the grid
            m = truth.metrics(knobs_, seed=0)
            values[key] = m["goodput_rps"] if m.get("feasible") else 0.0
        return values[key]

    rows = []
    for budget in budgets:
        for method in ("tpe", "random"):
            fracs, reach, repeat_launches = [], [], []
            for seed in range(a.seeds):
                oracle = ScenarioOracle(sc, base, WORKLOAD, noise_seed=1000 * (seed + 1))
                t = Tuner(
                    knobs,
                    oracle,
                    budget=budget,
                    seed=seed,
                    sampler=method,
                    start=start if method == "tpe" else None,
                )
                pick, extra = chosen(t, oracle, a.repeats)
                fracs.append(true_value(pick) / optimum if pick else 0.0)
                repeat_launches.append(extra)
                launched = [p for p in t.points if p.evaluation.launched]
                first = next(
                    (
                        i + 1
                        for i, p in enumerate(launched)
                        if p.evaluation.status == "ok" and true_value(p.knobs) >= 0.95 * optimum
                    ),
                    None,
                )
                reach.append(first if first is not None else budget + 1)
            rows.append(
                {
                    "method": "bringup tune (TPE)" if method == "tpe" else "random search",
                    "budget": budget,
                    "share_of_grid": budget / len(grid(KNOBS)),
                    "median_fraction": statistics.median(fracs),
                    "min_fraction": min(fracs),
                    "median_launches_to_95": statistics.median(reach),
                    "hit_95": sum(1 for f in fracs if f >= 0.95),
                    "median_repeat_launches": statistics.median(repeat_launches),
                }
            )
    rows.append(
        {
            "method": "full grid",
            "budget": len(grid(KNOBS)),
            "share_of_grid": 1.0,
            "median_fraction": 1.0,
            "min_fraction": 1.0,
            "median_launches_to_95": None,
            "hit_95": a.seeds,
            "median_repeat_launches": 0,
        }
    )

    c = Console()
    tab = Table(
        title=f"Tuning efficiency on {SCENARIO} (grid {len(grid(KNOBS))} points, optimum "
        f"{optimum:.3f} req/s goodput at {dict(best_point)}; median over {a.seeds} seeds)"
    )
    for col in (
        "method",
        "launches",
        "share of grid",
        "fraction of optimum (median)",
        "worst seed",
        "seeds >= 95%",
        "launches to 95% (median)",
        "repeat launches (median)",
    ):
        tab.add_column(col)
    for r in rows:
        tab.add_row(
            r["method"],
            str(r["budget"]),
            f"{r['share_of_grid']:.0%}",
            f"{r['median_fraction']:.3f}",
            f"{r['min_fraction']:.3f}",
            f"{r['hit_95']}/{a.seeds}",
            ""
            if r["median_launches_to_95"] is None
            else (
                f"{r['median_launches_to_95']:.0f}"
                if r["median_launches_to_95"] <= r["budget"]
                else "not reached"
            ),
            f"{r['median_repeat_launches']:.0f}",
        )
    c.print(tab)
    c.print(f"grid evaluated offline in {grid_s:.1f} s; total {time.time() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps({"optimum": optimum, "best": dict(best_point), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
