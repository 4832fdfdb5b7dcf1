"""Scenario performance models: the step cost, the scheduler, the offline evaluator, and the server
serving at the model's speed as the load generator measures it.

The server tests launch `python -m bringup.scenario serve --scenario FILE --time-scale 0.5 -- FLAGS`
(argv list, own process group, killed at teardown) and measure it with `bringup.loadgen.bench`.
Real seconds / 0.5 = simulated seconds. At 0.5 a ~22 ms decode step is ~11 ms real and 16 clients
get ~700 tokens a real second: HTTP and event-loop overhead (~1 ms a request, well under that a
token) stays a few percent of what is measured even when other CPU-heavy work shares the two
cores (at 0.25 a concurrent run of the bring-up search tests slowed the server by 30%), and a
benchmark of 32 requests takes 3-5 s.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bringup.loadgen import BenchConfig, BenchResult, bench
from bringup.oracle.perfsim import CHAT_TOKENS, bench_config, engine_config, expected, flags_argv, simulate
from bringup.oracle.testing import ScenarioProcess
from bringup.scenario import load_scenario, scenario_path
from bringup.scenario.config import decide
from bringup.scenario.loader import ScenarioError
from bringup.scenario.perf import GIB, ConstantPerf, Load, StepModel, perf_model_for
from bringup.scenario.scheduler import PERF_RE, Busy, Replica, ScheduledRequest

TUNE = scenario_path("tune-llama31-70b-fp8-h200-sglang")
SC = load_scenario(TUNE)
SCALE = 0.5

# The documented grid (docs/scenarios.md, "The tuning scenario's grid") and its optimum.
DOC_WORKLOAD = {
    "concurrency": 96,
    "input_len": 1536,
    "output_len": 512,
    "num_prompts": 400,
    "slo": {"ttft_p99": 10.0, "itl_p99": 0.2},
}
DOC_AXES = {
    "mem-fraction-static": [0.80, 0.85, 0.88, 0.92],
    "max-running-requests": [32, 64, 96, 128, 256],
    "chunked-prefill-size": [256, 512, 1024, 2048],
    "cuda-graph-max-bs": [64, 128, 256],
}
DOC_BEST = {
    "mem-fraction-static": 0.92,
    "max-running-requests": 96,
    "chunked-prefill-size": 1024,
    "cuda-graph-max-bs": 128,
}


def model(flags: dict[str, Any] | None = None) -> StepModel:
    m = perf_model_for(SC, engine_config(SC, flags or {}))
    assert isinstance(m, StepModel)
    return m


# -- the step cost ------------------------------------------------------------------------------
def test_step_cost_follows_the_documented_formula():
    p = SC.performance
    assert p is not None
    m = model()
    weights_s = 67.7 * GIB / (p.hbm_gbps * 1e9)  # TP 1: the whole checkpoint on one GPU
    kv_s = 80 * 2 * 8 * 128 * 2 / (p.hbm_gbps * 1e9)  # bf16 K and V, 8 KV heads, 80 layers
    assert m.weights_read_s == pytest.approx(weights_s)
    assert m.kv_read_per_token_s == pytest.approx(kv_s)
    # a small decode batch is memory-bound: the weights read is the floor, with a CUDA graph
    assert m.step_seconds(8, 0, 8000) == pytest.approx(p.step_overhead_s + weights_s + 8000 * kv_s)
    # a step that prefills is compute-bound and eager
    assert m.step_seconds(8, 1024, 8000) == pytest.approx(
        p.step_overhead_s + p.per_token_s * 1032 + 8000 * kv_s + p.eager_overhead_s
    )
    # decode batches above the CUDA-graph max batch size run eagerly
    small = model({"cuda-graph-max-bs": 16})
    assert small.step_seconds(32, 0, 0) == pytest.approx(m.step_seconds(32, 0, 0) + p.eager_overhead_s)
    eager = model({"disable-cuda-graph": True})
    assert eager.graph_max_bs == 0
    assert eager.step_seconds(1, 0, 0) == pytest.approx(m.step_seconds(1, 0, 0) + p.eager_overhead_s)


def test_tp_halves_weights_and_kv_per_gpu_and_pays_allreduce():
    p = SC.performance
    assert p is not None
    one, two = model(), model({"tp-size": 2})
    assert two.weights_read_s == pytest.approx(one.weights_read_s * ((67.7 - 1.0) / 2 + 1.0) / 67.7)
    assert two.kv_read_per_token_s == pytest.approx(one.kv_read_per_token_s / 2)
    assert two.compute_per_token_s == pytest.approx(one.compute_per_token_s / (1 + p.tp_efficiency))
    assert two.kv_capacity > 2 * one.kv_capacity  # half the weights per GPU leaves far more for KV
    n = 40
    assert two.step_seconds(n, 0, 0) == pytest.approx(
        p.step_overhead_s + two.weights_read_s + p.allreduce_s + p.allreduce_per_token_s * n
    )


def test_kv_capacity_follows_the_memory_fraction():
    caps = [model({"mem-fraction-static": f}).kv_capacity for f in (0.6, 0.7, 0.8, 0.9)]
    assert caps == sorted(caps) and len(set(caps)) == 4
    # (fraction x 139.8 GiB - 67.7 GiB weights - 1 GiB) / 320 KiB a token, in pages of 16
    assert caps[2] == pytest.approx((0.8 * 139.8 - 67.7 - 1.0) * GIB / (320 * 1024), rel=1e-3)


def test_noise_is_mean_one_and_reproducible():
    m = model()
    base = m.step_seconds(32, 0, 32000)
    rng_a, rng_b = m.noise(0), m.noise(0)
    draws = [m.step_seconds(32, 0, 32000, rng_a.gauss(0, 1)) for _ in range(20000)]
    assert draws[:50] == [m.step_seconds(32, 0, 32000, rng_b.gauss(0, 1)) for _ in range(50)]
    assert sum(draws) / len(draws) == pytest.approx(base, rel=0.005)
    sd = math.sqrt(sum((d / base - 1) ** 2 for d in draws) / len(draws))
    assert sd == pytest.approx(SC.performance.noise_sigma, rel=0.1)
    assert m.noise(1).random() != m.noise(0).random()  # replicas draw their own streams


def test_scenarios_without_performance_keep_the_constant_model():
    glm = load_scenario(scenario_path("glm5-nvfp4-sm120"))
    perf = perf_model_for(glm, engine_config(glm, ["--tp", "8"]))
    assert isinstance(perf, ConstantPerf)
    assert perf.decode_step_seconds(Load(64)) == glm.timing.per_output_token
    with pytest.raises(ValueError, match="no performance section"):
        expected(glm, {}, {"concurrency": 1})


def test_performance_section_is_validated(tmp_path: Path):
    text = TUNE.read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  noise_sigma: 0.05", "  noise_sigma: 0.05\n  hbm_gbs: 1"))
    with pytest.raises(ScenarioError, match=r"performance\.hbm_gbs: unknown key"):
        load_scenario(bad)
    bad.write_text(text.replace("per_token_s: 0.00012", "per_token_s: -1"))
    with pytest.raises(ScenarioError, match=r"performance\.per_token_s"):
        load_scenario(bad)


# -- the scheduler ------------------------------------------------------------------------------
def run_replica(m: StepModel, jobs: list[ScheduledRequest]) -> list[tuple[int, int]]:
    """Run jobs to completion; (decoders, prompt tokens) of every step."""
    rep = Replica(m)
    for j in jobs:
        rep.add(j)
    shape = []
    while not rep.idle:
        step = rep.plan()
        shape.append((step.decode, step.prefill))
        rep.commit(step)
    assert rep.kv_free == m.kv_capacity and rep.ctx == 0
    return shape


def test_chunked_prefill_splits_long_prompts_and_first_token_ends_the_last_chunk():
    m = model({"chunked-prefill-size": 1024})
    a, b = ScheduledRequest(2500, 3), ScheduledRequest(100, 2)
    shape = run_replica(m, [a, b])
    # 2500 + 100 prompt tokens in chunks of at most 1024, oldest first
    assert shape[:3] == [(0, 1024), (0, 1024), (0, 552)]
    assert a.first_step == 2 and b.first_step == 2  # both prompts end in the third step
    assert shape[3:] == [(2, 0), (1, 0)]  # a decodes 2 more tokens, b 1 more


def test_admission_respects_max_running_and_kv_capacity():
    m = model({"max-running-requests": 3})
    rep = Replica(m)
    for _ in range(5):
        rep.add(ScheduledRequest(10, 5))
    rep.plan()
    assert rep.running == 3 and len(rep.waiting) == 2
    tight = model({"mem-fraction-static": 0.55})
    rep = Replica(tight)
    per = 2000 + 300
    for _ in range(40):
        rep.add(ScheduledRequest(2000, 300))
    rep.plan()
    assert rep.running == tight.kv_capacity // per
    assert rep.kv_free < per


def test_an_abandoned_request_frees_its_slot_and_kv_at_the_next_step():
    m = model({"max-running-requests": 2, "chunked-prefill-size": 1024})
    rep = Replica(m)
    a, b, c, d = (
        ScheduledRequest(300, 50),
        ScheduledRequest(5000, 50),
        ScheduledRequest(10, 5),
        ScheduledRequest(10, 5),
    )
    for j in (a, b, c, d):
        rep.add(j)
    rep.commit(rep.plan())  # a's prompt done, b partly prefilled; c and d wait
    assert a in rep.decoding and b in rep.prefilling and list(rep.waiting) == [c, d]
    for j in (a, b, d):
        rep.abort(j)
    step = rep.plan()  # aborts apply at the step boundary: this step still carries a and b
    assert step.decode == 1 and step.pieces[0][0] is b
    rep.commit(step)
    assert a.done and b.done and d.done and not rep.decoding and not rep.prefilling
    assert list(rep.waiting) == [c] and rep.ctx == 0 and rep.kv_free == m.kv_capacity
    while not rep.idle:
        rep.commit(rep.plan())
    assert c.done and rep.kv_free == m.kv_capacity and rep.ctx == 0 and not rep.finish_at


def test_the_step_loop_reports_how_late_it_ran():
    busy = Busy(1, 0.0)
    for late in (-0.004, 0.002, 0.030):  # early wake-ups do not count
        busy.late(late)
    busy.real_s, busy.restarts = 2.5, 1
    m = PERF_RE.search(busy.line())
    assert m is not None
    assert m.groups() == ("1", "3", "2.500", "30.0", "10.67", "1")


# -- the offline evaluator ----------------------------------------------------------------------
def test_expected_reports_the_tuner_metrics_and_is_reproducible():
    wl = {
        "concurrency": 8,
        "input_len": 512,
        "output_len": 64,
        "num_prompts": 48,
        "slo": {"ttft_p99": 1.0, "itl_p99": 0.05},
    }
    a = expected(SC, {"max-running-requests": 8}, wl)
    for key in (
        "goodput_rps",
        "output_tps",
        "rps",
        "ttft_p50_s",
        "ttft_p99_s",
        "itl_p99_s",
        "e2e_p99_s",
        "feasible",
        "failure_phase",
    ):
        assert key in a
    assert a["feasible"] and a["failure_phase"] is None
    assert a == expected(SC, {"max-running-requests": 8}, wl)
    b = expected(SC, {"max-running-requests": 8}, wl, seed=7)
    assert b["seed"] == 7 and b["itl_p50_s"] != a["itl_p50_s"]
    assert b["rps"] == pytest.approx(a["rps"], rel=0.02)  # noise moves steps, not the average
    # the engine's own seed flag seeds the noise, as on the server
    assert expected(SC, {"max-running-requests": 8, "random-seed": 7}, wl)["itl_p50_s"] == b["itl_p50_s"]
    assert a["output_tps"] == pytest.approx(a["rps"] * 64)
    assert a["goodput_rps"] <= a["rps"]
    # runs=2 averages the noise seeds 0 and 1
    one = expected(SC, {"max-running-requests": 8}, wl, seed=1)
    avg = expected(SC, {"max-running-requests": 8}, wl, runs=2)
    assert avg["itl_p50_s"] == pytest.approx((a["itl_p50_s"] + one["itl_p50_s"]) / 2)


def test_workloads_are_read_like_the_load_generator():
    bc = bench_config({"concurrency": 4, "slo": {"ttft_p99": 2.0, "itl_p50": 0.05}})
    assert [(s.metric, s.stat, s.target_s) for s in bc.slos] == [("ttft", "p99", 2.0), ("itl", "p50", 0.05)]
    assert bench_config({"slo": "ttft_p99=2s"}).request_rate == math.inf
    res = simulate(
        SC,
        {},
        {
            "concurrency": 4,
            "input_len": 100,
            "output_len": 20,
            "range_ratio": 0.5,
            "num_prompts": 30,
            "seed": 3,
        },
    )
    ins = [r.input_tokens for r in res.records]
    assert len(set(ins)) > 5 and min(ins) >= 50 and max(ins) <= 150
    # the same seed gives the same lengths, as bench() draws them
    res2 = simulate(
        SC,
        {},
        {
            "concurrency": 4,
            "input_len": 100,
            "output_len": 20,
            "range_ratio": 0.5,
            "num_prompts": 30,
            "seed": 3,
        },
    )
    assert [r.output_tokens for r in res.records] == [r.output_tokens for r in res2.records]


@pytest.mark.parametrize(
    "flags,phase,rule",
    [
        ({"mem-fraction-static": 0.92, "cuda-graph-max-bs": 256}, "graph-capture", "graph-capture-oom"),
        ({"mem-fraction-static": 0.95, "cuda-graph-max-bs": 64}, "graph-capture", "graph-capture-oom"),
        ({"mem-fraction-static": 0.95, "disable-cuda-graph": True}, "warmup", "graph-capture-oom"),
        ({"mem-fraction-static": 0.45}, "kv-alloc", "not-enough-memory"),
        ({"tp-size": 2, "dp-size": 2}, "load-weights", "too-many-gpus"),
    ],
)
def test_the_scenario_rules_make_configurations_infeasible(flags, phase, rule):
    cfg = engine_config(SC, flags)
    assert decide(SC, cfg) is not None and decide(SC, cfg).label == rule  # what the server would do
    got = expected(SC, flags, {"concurrency": 4, "num_prompts": 8})
    assert (got["feasible"], got["failure_phase"], got["failure_rule"]) == (False, phase, rule)
    assert got["goodput_rps"] == 0.0


def test_feasible_next_to_the_memory_boundary():
    ok = {"mem-fraction-static": 0.92, "cuda-graph-max-bs": 128}
    assert expected(SC, ok, {"concurrency": 4, "num_prompts": 8})["feasible"]
    assert expected(SC, {"mem-fraction-static": 0.5}, {"concurrency": 4, "num_prompts": 8})["feasible"]


def test_bad_flags_are_rejected_as_the_engine_would():
    with pytest.raises(ValueError, match="invalid int value"):
        engine_config(SC, {"max-running-requests": "many"})
    with pytest.raises(ValueError, match="unrecognized arguments"):
        engine_config(SC, ["--max-running-request-count", "3"])
    assert flags_argv(SC, {"tp": 2, "disable-cuda-graph": True})[:2] == ["--model-path", SC.model.name]


# -- the knobs move the metrics in the documented directions ------------------------------------
def test_effective_batch_is_the_least_of_load_max_running_and_kv():
    wl = {"concurrency": 64, "input_len": 2000, "output_len": 300, "num_prompts": 200}
    assert expected(SC, {"max-running-requests": 16}, wl)["peak_running"] == 16
    tight = {"mem-fraction-static": 0.55}
    cap = model(tight).kv_capacity // 2300
    assert cap < 16
    got = expected(SC, tight, wl)
    assert got["peak_running"] == cap
    assert got["mean_batch"] > 0.8 * cap
    assert expected(SC, {}, {**wl, "concurrency": 12})["peak_running"] == 12


def test_memory_fraction_raises_throughput_and_cuts_ttft_when_kv_binds():
    wl = {"concurrency": 32, "input_len": 2048, "output_len": 256, "num_prompts": 128}
    runs = [expected(SC, {"mem-fraction-static": f}, wl) for f in (0.55, 0.6, 0.7)]
    assert [r["kv_capacity_tokens"] for r in runs] == sorted(r["kv_capacity_tokens"] for r in runs)
    assert runs[0]["rps"] < runs[1]["rps"] < runs[2]["rps"]
    assert runs[0]["ttft_p50_s"] > runs[1]["ttft_p50_s"] > runs[2]["ttft_p50_s"]


def test_max_running_trades_throughput_for_inter_token_latency():
    wl = {"concurrency": 128, "input_len": 256, "output_len": 256, "num_prompts": 384}
    runs = [expected(SC, {"max-running-requests": n}, wl) for n in (8, 32, 128)]
    assert runs[0]["output_tps"] < runs[1]["output_tps"] < runs[2]["output_tps"]
    assert runs[0]["itl_p50_s"] < runs[1]["itl_p50_s"] < runs[2]["itl_p50_s"]


def test_chunk_size_trades_ttft_of_long_prompts_for_itl_spikes():
    alone = {"concurrency": 1, "input_len": 8192, "output_len": 8, "num_prompts": 4}
    ttft = [expected(SC, {"chunked-prefill-size": c}, alone)["ttft_p50_s"] for c in (512, 2048, 8192)]
    assert ttft[0] > ttft[1] > ttft[2]  # fewer steps: less per-step overhead for the same prompt
    busy = {"concurrency": 16, "input_len": 2048, "output_len": 128, "num_prompts": 96}
    itl = [expected(SC, {"chunked-prefill-size": c}, busy)["itl_p99_s"] for c in (512, 2048, 8192)]
    assert itl[0] < itl[1] < itl[2]  # the decode step that carries a chunk waits for all of it


def test_decode_batches_above_the_graph_size_are_slower():
    wl = {"concurrency": 48, "input_len": 128, "output_len": 256, "num_prompts": 144}
    itl = [
        expected(SC, flags, wl)["itl_p50_s"]
        for flags in ({"cuda-graph-max-bs": 64}, {"cuda-graph-max-bs": 16}, {"disable-cuda-graph": True})
    ]
    assert itl[0] < itl[1]
    assert itl[1] == pytest.approx(itl[2], rel=0.02)  # batch 48 > 16: eager either way


def test_tp_cuts_latency_and_dp_adds_throughput():
    alone = {"concurrency": 1, "input_len": 512, "output_len": 64, "num_prompts": 4}
    assert expected(SC, {"tp-size": 2}, alone)["itl_p50_s"] < 0.75 * expected(SC, {}, alone)["itl_p50_s"]
    busy = {"concurrency": 64, "input_len": 512, "output_len": 256, "num_prompts": 256}
    one = expected(SC, {}, busy)
    dp2 = expected(SC, {"dp-size": 2, "load-balance-method": "total_requests"}, busy)
    assert dp2["dp"] == 2 and dp2["output_tps"] > 1.2 * one["output_tps"]


@pytest.mark.slow
def test_the_documented_grid_optimum_beats_its_neighbours():
    """docs/scenarios.md states the optimum of DOC_AXES under DOC_WORKLOAD; every one-knob move
    from it is worse or infeasible (the full 240-point grid takes ~25 s; this checks the claim)."""
    best = expected(SC, DOC_BEST, DOC_WORKLOAD)["goodput_rps"]
    for knob, levels in DOC_AXES.items():
        for v in levels:
            if v == DOC_BEST[knob]:
                continue
            got = expected(SC, {**DOC_BEST, knob: v}, DOC_WORKLOAD)
            assert got["goodput_rps"] <= best + 1e-9, (knob, v, got["goodput_rps"], best)
    # "max everything" runs out of memory in graph capture; the engine defaults are far worse
    assert not expected(SC, {**DOC_BEST, "cuda-graph-max-bs": 256}, DOC_WORKLOAD)["feasible"]
    assert expected(SC, {}, DOC_WORKLOAD)["goodput_rps"] < 0.5 * best


# -- the server serves at the model's speed -------------------------------------------------------
CASES: dict[str, dict[str, Any]] = {
    "base": {"max-running-requests": 16, "chunked-prefill-size": 1024},
    "queued": {"max-running-requests": 6, "chunked-prefill-size": 1024},
    "big-chunk": {"max-running-requests": 16, "chunked-prefill-size": 4096},
}
SERVER_WL = {"concurrency": 16, "input_len": 1024, "output_len": 32, "num_prompts": 32}


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory) -> Path:
    """The tuning scenario with a near-zero start-up: its 25 simulated seconds of start-up would
    cost 12 real seconds at this scale, and only serving is under test (same performance model)."""
    raw = yaml.safe_load(TUNE.read_text())
    raw["timing"] = {
        "start": 0.01,
        "load_weights": 0.01,
        "kv_alloc": 0.01,
        "graph_capture": 0.01,
        "warmup": 0.01,
    }
    path = tmp_path_factory.mktemp("perf") / TUNE.name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def measured(quick_start: Path) -> dict[str, Any]:
    """Each case served once (the servers start in parallel), benchmarked one after the other
    (the benchmarks need the CPU), next to the evaluator's expectation for the same file."""
    sc = load_scenario(quick_start)
    assert sc.performance == SC.performance
    procs = {
        name: ScenarioProcess(quick_start, flags_argv(sc, flags), time_scale=SCALE)
        for name, flags in CASES.items()
    }
    try:
        for p in procs.values():
            p.start()
        with ThreadPoolExecutor(len(procs)) as pool:
            list(pool.map(lambda p: p.wait_for("The server is fired up and ready", 60), procs.values()))
        out: dict[str, Any] = {}
        for name, p in procs.items():
            out[name] = (
                clean_bench(p, BenchConfig(url=p.url, **SERVER_WL)),
                expected(sc, CASES[name], SERVER_WL),
            )
        out["chat"] = bench(
            BenchConfig(
                url=procs["base"].url,
                endpoint="chat",
                concurrency=4,
                input_len=64,
                output_len=8,
                num_prompts=8,
            )
        )
        slots = CASES["queued"]["max-running-requests"]
        out["after-abandon"] = abandon_then_serve(procs["queued"].url, slots)
        return out
    finally:
        for p in procs.values():
            p.stop()


LATE_MAX_MS, LATE_MEAN_MS = 50.0, 5.0  # on an idle machine: at most ~6 and ~1.2


def clean_bench(p: ScenarioProcess, cfg: BenchConfig, attempts: int = 3) -> BenchResult:
    """bench(), repeated while the server reports that its step loop did not get the CPU in time
    (`[scenario-perf] ... late_max_ms`: another process took the cores; what the client measured
    then is the machine, not the model). A wrong model is never late, so this hides no bug."""
    seen = []
    for _ in range(attempts):
        start = len(p.lines)
        res = bench(cfg)
        deadline = time.monotonic() + 5
        while not (found := [m for ln in p.lines[start:] if (m := PERF_RE.search(ln))]):
            assert time.monotonic() < deadline, "no [scenario-perf] line after the benchmark"
            time.sleep(0.02)
        late_max, late_mean = float(found[-1].group(4)), float(found[-1].group(5))
        if late_max <= LATE_MAX_MS and late_mean <= LATE_MEAN_MS:
            return res
        seen.append((late_max, late_mean))
    raise AssertionError(f"the machine is too busy to measure: step loop late (max, mean ms) {seen}")


def abandon_then_serve(url: str, slots: int) -> float:
    """Fill every running slot with a 2000-token stream, drop each after its first token, then
    time a short request: real seconds (about 20 s if the dropped requests kept their slots)."""
    opened = []
    try:
        for i in range(slots):
            cm = httpx.stream(
                "POST",
                f"{url}/v1/completions",
                timeout=30,
                json={"prompt": f"a long story {i}", "max_tokens": 2000, "ignore_eos": True, "stream": True},
            )
            lines = cm.__enter__().iter_lines()
            opened.append(cm)
            while not next(lines).startswith("data:"):
                pass
    finally:
        for cm in opened:
            cm.__exit__(None, None, None)
    t = time.monotonic()
    r = httpx.post(f"{url}/v1/completions", json={"prompt": "short", "max_tokens": 4}, timeout=30)
    assert r.status_code == 200
    return time.monotonic() - t


def sim(res: BenchResult) -> dict[str, float]:
    """The benchmark's numbers in simulated seconds (real seconds / time scale, rates x scale)."""
    s = res.summary
    return {
        "rps": s.request_throughput * SCALE,
        "output_tps": s.output_throughput * SCALE,
        **{
            f"{m}_{q}_s": getattr(getattr(s, f"{m}_ms"), q) / 1e3 / SCALE
            for m in ("ttft", "itl", "e2e")
            for q in ("mean", "p50", "p99")
        },
    }


AGREE = ("rps", "output_tps", "ttft_p50_s", "ttft_p99_s", "itl_mean_s", "itl_p99_s", "e2e_p50_s", "e2e_p99_s")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_server_agrees_with_the_evaluator(measured, case):
    """Within 15%. Measured: within 4% on an idle machine, and within 6% with four CPU-bound
    processes beside it on the two cores. The rest is room for a busier machine, and for the
    start burst, whose 16 requests reach the server over a few ms instead of at one instant as in
    the evaluator. ITL is compared by its mean, not its median: a late wake-up compresses the
    next gaps to catch up (the schedule is absolute), which keeps the mean and moves the median
    (+15% with four CPU hogs; within 3% on an idle machine)."""
    res, exp = measured[case]
    got = sim(res)
    for key in AGREE:
        assert got[key] == pytest.approx(exp[key], rel=0.15), (case, key, got[key], exp[key])


@pytest.mark.slow
def test_server_counts_tokens_as_the_load_generator_expects(measured):
    res, _ = measured["base"]
    s = res.summary
    assert s.completed == 32 and s.failed == 0
    assert s.output_tokens_from_usage and s.mean_tokens_per_chunk == 1.0
    for r in res.requests:  # ignore_eos: exactly max_tokens, one SSE chunk a token, usage counts
        assert (r.output_tokens, r.chunks, r.input_tokens, r.output_tokens_source) == (32, 32, 1024, "usage")


@pytest.mark.slow
def test_server_chat_prompts_count_as_the_evaluator_counts_them(measured):
    res = measured["chat"]
    assert res.summary.completed == 8 and res.summary.mean_tokens_per_chunk == 1.0
    assert {r.input_tokens for r in res.requests} == {64 + CHAT_TOKENS}
    assert {r.output_tokens for r in res.requests} == {8}


@pytest.mark.slow
def test_server_frees_the_slots_of_abandoned_requests(measured):
    assert measured["after-abandon"] < 2.0


@pytest.mark.slow
def test_server_knobs_move_metrics_in_the_documented_directions(measured):
    base, queued, big = (sim(measured[k][0]) for k in ("base", "queued", "big-chunk"))
    # fewer running requests than clients: they queue (TTFT), and throughput drops
    assert queued["ttft_p50_s"] > 3 * base["ttft_p50_s"]
    assert queued["rps"] < 0.8 * base["rps"]
    # a 4096-token chunk stalls every decode step that carries it (fewer, taller spikes)
    assert big["itl_p99_s"] > 2 * base["itl_p99_s"]
