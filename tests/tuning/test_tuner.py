"""The tuner on a synthetic evaluator: infeasible points, memory regions, no repeats, early stops."""

from __future__ import annotations

from bringup.core.candidate import Candidate
from bringup.tuning.knobs import DEFAULT, Knob, as_changes, parallel_check, start_point, with_base_levels
from bringup.tuning.tuner import Evaluation, Tuner, grid


def knobs() -> list[Knob]:
    return [
        Knob("--mem", ["0.7", "0.8", "0.85", "0.9"], monotone_memory=True),
        Knob("--batch", ["16", "32", "64", "128", "256"]),
        Knob("--chunk", ["1024", "2048", "4096"]),
    ]


def value(k: dict) -> float:
    # best at batch 64, chunk 2048, the highest memory fraction that fits
    return 10 - abs(int(k["--batch"]) - 64) / 32 - abs(int(k["--chunk"]) - 2048) / 1024 + float(k["--mem"])


class Eval:
    def __init__(self):
        self.calls: list[dict] = []

    def __call__(self, k: dict, best):
        self.calls.append(k)
        if float(k["--mem"]) >= 0.9:
            return Evaluation(
                "infeasible",
                failure_class="oom-graph-capture",
                phase="graph-capture",
                signature="sglang-graph-capture-failed",
                evidence="Capture cuda graph failed: CUDA out of memory",
            )
        return Evaluation(
            "ok",
            metrics={
                "goodput_rps": value(k),
                "output_tps": 100 * value(k),
                "e2e_p99_s": int(k["--batch"]) / 64,
            },
        )


def test_finds_the_optimum_without_repeating_or_crashing():
    ev = Eval()
    t = Tuner(knobs(), ev, budget=25, seed=1)
    t.run()
    keys = [tuple(sorted(c.items())) for c in ev.calls]
    assert len(keys) == len(set(keys)) == t.launches <= 25
    best = t.best()
    true = max(value(k) for k in grid(knobs()) if float(k["--mem"]) < 0.9)
    assert best.objective >= 0.95 * true
    assert any(p.evaluation.status == "infeasible" for p in t.points)  # failures are points, not crashes


def test_oom_rules_out_larger_memory_with_the_same_other_knobs():
    ev = Eval()
    ks = knobs()
    ks[0].levels = ["0.9", "0.95", "0.7"]  # grid order: an OOM at 0.9 comes before 0.95
    t = Tuner(ks, ev, budget=100, seed=0, sampler="grid")
    t.run()
    ruled = [p for p in t.points if not p.evaluation.launched]
    assert len(ruled) == 15 and all(p.knobs["--mem"] == "0.95" for p in ruled)
    assert all("oom-graph-capture at --mem 0.9" in p.evaluation.reason for p in ruled)
    # each (batch, chunk) pair launched at 0.9 at most once: the OOM taught the rest
    launched_09 = [c for c in ev.calls if c["--mem"] == "0.9"]
    assert len(launched_09) == len({(c["--batch"], c["--chunk"]) for c in launched_09})


def test_start_point_is_measured_first():
    ks = with_base_levels(knobs(), {"--batch": "48"})
    assert ks[1].levels[:4] == ["16", "32", "48", "64"] and ks[0].levels[0] == DEFAULT
    start = start_point(ks, {"--batch": "48"})
    assert start == {"--mem": DEFAULT, "--batch": "48", "--chunk": DEFAULT}
    ev2 = Eval()
    calls = []

    def wrapped(k, best):
        calls.append(k)
        k = {
            f: ("0.8" if v == DEFAULT and f == "--mem" else "2048" if v == DEFAULT else v)
            for f, v in k.items()
        }
        return ev2(k, best)

    Tuner(ks, wrapped, budget=3, seed=0, start=start).run()
    assert calls[0] == start


def test_a_switch_is_a_knob_of_on_and_off():
    """vLLM's --async-scheduling / --enable-chunked-prefill take no value: the levels "on" and
    "off" launch --flag and --no-flag (a value "off" after the flag would be refused by argparse),
    and a base that sets a switch starts the search at its own level."""
    base = Candidate.make("vllm", "/m", {"--enable-chunked-prefill": False})
    ks = with_base_levels(
        [Knob("--async-scheduling", [DEFAULT, "on", "off"]), Knob("--enable-chunked-prefill", ["on"])],
        base.flag_dict,
    )
    assert ks[1].levels == ["on", "off"]
    start = start_point(ks, base.flag_dict)
    assert start == {"--async-scheduling": DEFAULT, "--enable-chunked-prefill": "off"}
    assert base.with_changes(as_changes(start)).argv_flags() == ["--no-enable-chunked-prefill"]
    point = {"--async-scheduling": "off", "--enable-chunked-prefill": "on"}
    assert base.with_changes(as_changes(point)).argv_flags() == [
        "--enable-chunked-prefill",
        "--no-async-scheduling",
    ]


def test_pareto_front_is_non_dominated():
    ev = Eval()
    t = Tuner(knobs(), ev, objective="pareto", budget=20, seed=0)
    t.run()
    front = t.pareto()
    assert front
    for p in front:
        for q in t.points:
            if q.evaluation.status != "ok":
                continue
            better = (
                q.evaluation.metrics["output_tps"] > p.evaluation.metrics["output_tps"]
                and q.evaluation.metrics["e2e_p99_s"] < p.evaluation.metrics["e2e_p99_s"]
            )
            assert not better


def test_parallel_layouts_need_enough_gpus():
    check = parallel_check({"gpu.count": 8}, {"--tensor-parallel-size": "8"})
    assert check({"--data-parallel-size": "2"}) == "needs 16 GPUs (tp x dp x pp); the machine has 8"
    assert check({"--tensor-parallel-size": "4", "--data-parallel-size": "2"}) is None
    assert "exceeds" in check({"--tensor-parallel-size": "2", "--expert-parallel-size": "8"})
