"""Issue 26 measure: how often a noisy host makes the tuner claim a false "better than baseline".

On the scenario `tune-llama31-70b-fp8-h200-sglang` (its performance model, evaluated offline by
bringup/oracle/perfsim.py, as benchmarks/tuning_efficiency.py uses it), every launch's
throughputs are multiplied by a mean-one lognormal factor of known sigma (``--noise``, default 5%
per run: bringup/oracle/tuning.py's ``run_noise``), the whole-run noise of a shared host.
The step noise is off, so a configuration's true value is known exactly.

Two settings, each over ``--seeds`` seeds (a seed: the sampler's and the noise's):

- null: the baseline IS the grid's optimum, so no configuration truly beats it; any "X beats the
  baseline" verdict is false. The old behaviour (one measurement per point, the best one named)
  is scored on the same runs: it is false whenever the search's pick is not the baseline.
- near: the baseline is 97.3% of the optimum (a true gain of 2.8%, under the 5% noise), and
- lower: the baseline is 86.4% of the optimum (a true gain of 16%): a verdict is false when its
  winner's true value is not above the baseline's. Also: how often a true gain is found (power),
  and the share of the grid optimum the tuning ends with (the winner, or the baseline kept).

Each tuning: TPE over the 240-point grid with ``--budget`` search launches, then the repeat phase
with its default rule (bringup/tuning/verdict.py). The false-verdict rate's 95% interval is the
exact (Clopper-Pearson) one.

Run:  .venv/bin/python benchmarks/tuning_noise.py [--seeds 100] [--noise 0.05] [--budget 24]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bringup.core.candidate import parse_flags
from bringup.oracle.tuning import ScenarioOracle
from bringup.scenario import load_scenario, scenario_path
from bringup.tuning.knobs import Knob, with_base_levels
from bringup.tuning.session import TuneSession
from bringup.tuning.tuner import Tuner
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
OPTIMUM = {  # the grid's optimum (docs/tuning.md)
    "--mem-fraction-static": "0.92",
    "--max-running-requests": "96",
    "--chunked-prefill-size": "1024",
    "--cuda-graph-max-bs": "128",
}
NEAR = {**OPTIMUM, "--chunked-prefill-size": "512"}  # 97.3% of the optimum: a gain under the noise
LOWER = {**OPTIMUM, "--mem-fraction-static": "0.85"}  # 86.4%: the optimum is 16% better


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval, by bisection on the binomial tails (no SciPy here)."""
    from math import comb

    def tail_ge(p: float) -> float:  # P(X >= k)
        return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))

    def tail_le(p: float) -> float:  # P(X <= k)
        return sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(0, k + 1))

    a = (1 - level) / 2

    def solve(f: Any, target: float, increasing: bool) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            if (f(mid) < target) == increasing:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(tail_ge, a, True)
    upper = 1.0 if k == n else solve(tail_le, a, False)
    return lower, upper


def one(
    sc: Any, base: dict, start: dict, seed: int, noise: float, budget: int, cache: dict, truth: Any
) -> dict:
    knobs = with_base_levels([Knob(k.flag, list(k.levels), k.monotone_memory) for k in KNOBS], start)
    oracle = ScenarioOracle(sc, base, WORKLOAD, noise_seed=None, run_noise=noise, run_seed=seed, cache=cache)
    t = Tuner(knobs, oracle, budget=budget, seed=seed, start=start)
    out = TuneSession(t, RepeatRule()).run(lambda k: oracle(k, None))  # as `bringup tune` runs it
    assert out is not None
    best = t.best()
    winner = out.winner.knobs if out.winner else None
    base_true = truth(start)
    return {
        "seed": seed,
        "winner_true": truth(winner) if winner else None,
        "base_true": base_true,
        "search_pick_true": truth(best.knobs) if best else None,
        "search_pick_is_baseline": best is not None and best.knobs == start,
        "ends_true": truth(winner) if winner else base_true,
        "rounds": out.rounds,
        "repeat_launches": out.launches,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--settings", default="null,near,lower")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    sc = load_scenario(scenario_path(SCENARIO))
    base = parse_flags(sc.baseline or "", sc.help_spec())
    cache: dict = {}
    plain = ScenarioOracle(sc, base, WORKLOAD, noise_seed=None, cache=cache)

    def truth(k: dict) -> float:
        m = plain.metrics(k)
        return float(m["goodput_rps"]) if m.get("feasible") else 0.0

    optimum = truth(OPTIMUM)
    t0 = time.time()
    report: dict[str, Any] = {
        "noise": a.noise,
        "seeds": a.seeds,
        "budget": a.budget,
        "optimum": optimum,
        "rule": RepeatRule().describe(),
    }
    for setting in a.settings.split(","):
        start = {"null": OPTIMUM, "near": NEAR, "lower": LOWER}[setting]
        rows = []
        for s in range(a.seeds):
            rows.append(one(sc, base, start, s, a.noise, a.budget, cache, truth))
            if (s + 1) % 10 == 0:
                claims = sum(1 for r in rows if r["winner_true"] is not None)
                print(f"  {setting}: {s + 1} seeds, {claims} claims, {time.time() - t0:.0f} s", flush=True)
        claims = [r for r in rows if r["winner_true"] is not None]
        false = [r for r in claims if r["winner_true"] <= r["base_true"]]
        old_false = [
            r
            for r in rows
            if not r["search_pick_is_baseline"] and (r["search_pick_true"] or 0) <= r["base_true"]
        ]
        lo, hi = clopper_pearson(len(false), len(rows))
        summary = {
            "baseline": start,
            "baseline_true": truth(start),
            "claims": len(claims),
            "false_verdicts": len(false),
            "false_rate": len(false) / len(rows),
            "false_rate_95": [lo, hi],
            "old_false_rate": len(old_false) / len(rows),
            "true_gains_found": len(claims) - len(false),
            "median_end_fraction_of_optimum": statistics.median(r["ends_true"] / optimum for r in rows),
            "worst_end_fraction_of_optimum": min(r["ends_true"] / optimum for r in rows),
            "median_rounds": statistics.median(r["rounds"] for r in rows),
            "median_repeat_launches": statistics.median(r["repeat_launches"] for r in rows),
            "max_repeat_launches": max(r["repeat_launches"] for r in rows),
        }
        report[setting] = summary
        print(f"{setting}: {json.dumps(summary)}", flush=True)
    report["seconds"] = time.time() - t0
    print(f"{a.seeds} seeds per setting, noise sigma {a.noise:g}, {report['seconds']:.0f} s")
    if a.json:
        a.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
