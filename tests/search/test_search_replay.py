"""The search against real logs: every launch answered by bringup's own classifier reading a real
log of the failure that launch would show (tests/search/search_world.py LogWorld), on the onions real
engines showed on the H200 and on this machine. Each bound is the person's: the number of
mistakes + 1 launches."""

from __future__ import annotations

from bringup.core.candidate import Candidate, parse_flags
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.search.space import add_baseline_flags, build_space, drop_inapplicable
from bringup.search.strategy import Strategy
from tests.search.search_world import LogWorld, log_fault, solve

H200 = {
    "device": "cuda",
    "gpu.name": "NVIDIA H200",
    "gpu.compute_capability": 9.0,
    "gpu.count": 1,
    "gpu.memory_gib": 139.8,
    "model.moe": False,
    "model.attention": "gqa",
    "model.model_type": "llama",
    "model.architecture": "LlamaForCausalLM",
}


def strategy(engine: str, version: str, baseline: str, parallel: list[str], knowledge: bool) -> Strategy:
    spec = bundled_help(engine, version)
    base = Candidate.make(engine, "m", parse_flags(baseline, spec), {})
    space = build_space(engine, spec, base)
    drop_inapplicable(space, H200)
    add_baseline_flags(space, base, spec)
    s = Strategy(space, base, Knowledge(H200, engine, version, enabled=knowledge), spec)
    s.limit_gpus(parallel, 1)
    return s


def _mem(flags: dict) -> float:
    return float(flags.get("--mem-fraction-static") or 0.903)


# SGLang 0.5.16 on the H200 from its own defaults (docs/facts.md): its default memory fraction runs
# out of memory capturing the decode graphs; lower, the prefill graph's breakable backend hits an
# illegal memory access and SGLang prints its remedy beneath; with that remedy it serves.
SGLANG_DEFAULTS = [
    log_fault(
        "graph-oom",
        lambda f, e: (
            _mem(f) > 0.86
            and f.get("--cuda-graph-backend-decode") != "disabled"
            and not f.get("--disable-cuda-graph")
        ),
        "sglang-h200-graph-capture-oom-default-mem.log",
        mem_fraction_static=("--mem-fraction-static", "0.903"),
    ),
    log_fault(
        "prefill-graph",
        lambda f, e: (
            f.get("--cuda-graph-backend-prefill") not in ("disabled", "tc_piecewise")
            and f.get("--attention-backend") != "triton"
        ),
        "sglang-h200-prefill-graph-illegal-memory-access.log",
        mem_fraction_static=("--mem-fraction-static", "0.903"),
    ),
]


def test_sglang_from_its_own_defaults_keeps_the_lower_fraction_and_takes_the_printed_remedy() -> None:
    for knowledge in (True, False):
        s = strategy("sglang", "0.5.23", "", ["--tp-size"], knowledge)
        path = solve(s, LogWorld(SGLANG_DEFAULTS))
        shown = [o.failure_class or o.status for _, o in path]
        assert shown == ["oom-graph-capture", "device-assert", "works"], (knowledge, shown)
        # progress is kept: the launch after the illegal access keeps the fraction that got past the
        # out-of-memory, and never goes back above the fraction that ran out of memory
        assert all(_mem(c.flag_dict) < 0.903 for c, _ in path[1:])
        assert path[-1][0].flag_dict.get("--cuda-graph-backend-prefill") in ("disabled", "tc_piecewise")


def test_an_out_of_memory_is_not_escaped_by_asking_for_more_memory() -> None:
    """The failure says the memory fraction must go down: the culprit is the fraction at its value
    *and above* (a threshold), so a larger fraction is no way around it."""
    s = strategy("sglang", "0.5.23", "", ["--tp-size"], False)
    path = solve(s, LogWorld(SGLANG_DEFAULTS[:1]), budget=1)
    assert path[0][1].failure_class == "oom-graph-capture"
    oom = s.blockers[0]
    more = s.levels_of(s.baseline.with_changes({"--mem-fraction-static": "0.95"}))
    less = s.levels_of(s.baseline.with_changes({"--mem-fraction-static": "0.8"}))
    assert oom.p_avoid(more) < 0.5 * oom.p_avoid(less)


# vLLM on the H200 from a baseline brought from a bigger box (the real logs of 2026-12-02): eight
# GPUs' worth of tensor parallelism, a quantization the checkpoint does not have, a memory fraction
# that cannot fit. The parallel size is ruled out by the hardware facts before any launch.
VLLM_MISTAKES = [
    log_fault(
        "world-size",
        lambda f, e: f.get("--tensor-parallel-size") == "8",
        "vllm-h200-real-world-size-8-of-1-gpu.log",
    ),
    log_fault(
        "awq", lambda f, e: f.get("--quantization") == "awq", "vllm-h200-real-awq-on-an-unquantized-model.log"
    ),
    log_fault(
        "memory",
        lambda f, e: float(f.get("--gpu-memory-utilization") or 0.9) > 0.995,
        "vllm-h200-gpu-memory-utilization-0.999.log",
    ),
]


def test_vllm_three_mistakes_from_a_bigger_box_in_at_most_four_launches() -> None:
    for knowledge in (True, False):
        s = strategy(
            "vllm",
            "0.32.0",
            "--tensor-parallel-size 8 --quantization awq --gpu-memory-utilization 0.999",
            ["--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"],
            knowledge,
        )
        path = solve(s, LogWorld(VLLM_MISTAKES))
        assert path[-1][1].status == "works" and len(path) <= 4, [o.failure_class for _, o in path]
        final = path[-1][0].flag_dict
        assert final.get("--tensor-parallel-size") in (None, "1") and final.get("--quantization") != "awq"


# transformers serve on the H200 from a baseline with three mistakes (issue 22): a device the
# machine does not have, a dtype torch has no name for, a quantization whose package is missing.
TRANSFORMERS_MISTAKES = [
    log_fault("device", lambda f, e: f.get("--device") == "cuda:3", "transformers-h200-device-cuda-3.log"),
    log_fault("dtype", lambda f, e: f.get("--dtype") == "float8", "transformers-unknown-dtype.log"),
    log_fault("bnb", lambda f, e: f.get("--quantization") == "bnb-4bit", "transformers-h200-bnb-4bit.log"),
]


def test_transformers_three_mistakes_in_at_most_four_launches() -> None:
    for knowledge in (True, False):
        s = strategy(
            "transformers", "5.19.0", "--device cuda:3 --dtype float8 --quantization bnb-4bit", [], knowledge
        )
        path = solve(s, LogWorld(TRANSFORMERS_MISTAKES))
        shown = [o.failure_class or o.status for _, o in path]
        assert path[-1][1].status == "works" and len(path) <= 4, shown
