"""Tuning where the optimum is known: the scenario with a performance model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.core.candidate import parse_flags
from bringup.oracle.tuning import ScenarioOracle
from bringup.scenario import load_scenario, scenario_path
from bringup.tuning.knobs import Knob, start_point, with_base_levels
from bringup.tuning.tuner import Tuner, grid
from tests.conftest import bringup, tune_args

TUNE = "tune-llama31-70b-fp8-h200-sglang"
WORKLOAD = {
    "concurrency": 96,
    "input_len": 1536,
    "output_len": 512,
    "num_prompts": 400,
    "slo": {"ttft_p99": 10.0, "itl_p99": 0.2},
}


def knobs() -> list[Knob]:
    return [
        Knob("--mem-fraction-static", ["0.8", "0.85", "0.88", "0.92"], monotone_memory=True),
        Knob("--max-running-requests", ["32", "64", "96", "128", "256"]),
        Knob("--chunked-prefill-size", ["256", "512", "1024", "2048"]),
        Knob("--cuda-graph-max-bs", ["64", "128", "256"], monotone_memory=True),
    ]


@pytest.mark.slow
def test_tuner_reaches_the_grid_optimum_in_a_fraction_of_the_launches():
    sc = load_scenario(scenario_path(TUNE))
    base = parse_flags(sc.baseline or "", sc.help_spec())
    truth = ScenarioOracle(sc, base, WORKLOAD, noise_seed=0)
    values = {}
    for k in grid(knobs()):
        m = truth.metrics(k, seed=0)
        values[tuple(sorted(k.items()))] = m["goodput_rps"] if m["feasible"] else 0.0
    optimum = max(values.values())
    assert sum(1 for v in values.values() if v == 0.0) >= 10  # infeasible points exist (graph capture OOM)
    ks = with_base_levels(knobs(), base)
    t = Tuner(
        ks,
        ScenarioOracle(sc, base, WORKLOAD, noise_seed=1000),
        budget=72,
        seed=0,
        start=start_point(ks, base),
    )
    t.run()
    best = t.best()
    got = values.get(tuple(sorted(best.knobs.items())))
    if got is None:
        got = truth.metrics(best.knobs, seed=0)["goodput_rps"]
    assert got >= 0.95 * optimum
    assert t.launches <= 0.3 * len(values)
    # the baseline (a throughput recipe) runs out of memory: an infeasible point, classified
    first = t.points[0]
    assert first.knobs == start_point(ks, base) and first.evaluation.status == "infeasible"
    assert first.evaluation.failure_class == "oom-graph-capture"
    # and the memory it needed is learned as infeasible (with the other knobs as they were)
    bounds, same, direction, why = t.infeasible_regions[0]
    assert bounds == {"--mem-fraction-static": 0.92, "--cuda-graph-max-bs": 256.0} and direction == "lower"
    assert t._ruled_out({**first.knobs, "--mem-fraction-static": "0.92"}) is not None


@pytest.mark.slow
def test_bringup_tune_on_the_scenario_end_to_end(tmp_path):
    args = tune_args(tmp_path, "--trials", "3", "--sweep", "4,16", "--time-scale", "0.05")
    rc, d, _, err = bringup(*args)
    assert rc == 0, err[-2000:]
    pts = d["points"]
    assert pts[0]["knobs"] == {"--mem-fraction-static": "0.92", "--cuda-graph-max-bs": "256"}
    assert pts[0]["status"] == "infeasible" and pts[0]["failure_class"] == "oom-graph-capture"
    assert d["best"]["status"] == "ok" and d["best"]["metrics"]["output_tps"] > 0
    assert [s["concurrency"] for s in d["sweep"]] == [4, 16]
    assert d["sweep"][1]["output_tps"] > d["sweep"][0]["output_tps"]  # more load, more throughput
    assert Path(d["report_html"]).is_file()
    # the repeat phase: the baseline fails, so the finalists' best median after 3 rounds wins
    rep = d["repeats"]
    assert rep["spreads"][0]["role"] == "baseline" and rep["spreads"][0]["failed"].startswith(
        "oom-graph-capture"
    )
    assert rep["rounds"] == 3 and rep["winner"] == d["best"]["number"] and rep["beats_baseline"]
    finals = [s for s in rep["spreads"] if s["role"] == "finalist"]
    assert finals and all(
        s["n"] == 3 and s["median"] > 0 and s["ci_lo"] <= s["median"] <= s["ci_hi"] for s in finals
    )
    assert rep["launches"] == 3 * len(finals) and not rep["shared_host"]
    assert "the baseline fails" in rep["verdict"]
    tune_dir = Path(d["run_dir"]) / "tune" / d["tune_id"]
    findings = (tune_dir / "FINDINGS.md").read_text()
    assert "**Verdict: the baseline fails" in findings and "| finalist |" in findings
    html = Path(d["report_html"]).read_text()
    assert "Beyond noise? The repeats" in html and 'class="plot spread"' in html
