"""What a memory failure's own log says about where the fix is (issue 10): the KV pool a launch
reported bounds the memory fraction from below, vLLM's "KV cache is needed" figures bound it too,
PyTorch's boilerplate allocator advice counts only when its condition holds, a change that left a
failure as it was is not carried on, and kernels of another platform are not searched."""

from __future__ import annotations

import pytest

from bringup.core.candidate import Candidate, parse_flags
from bringup.env.registry import advice_holds, load_registry, mentions, other_platform
from bringup.help.text import bundled_help
from bringup.knowledge.rules import Knowledge
from bringup.observe.outcome import Outcome
from bringup.search.envfactors import EnvFactors
from bringup.search.space import build_space, drop_levels
from bringup.search.strategy import CERTAIN, P_BEYOND_BOUND, Strategy

VL = bundled_help("vllm", "0.32.0")
SG = bundled_help("sglang", "0.5.10.post1")
GPU = {"device": "cuda", "gpu.compute_capability": 12.0, "gpu.count": 1, "gpu.memory_gib": 95.6}
BASE = "--max-model-len 110000 --gpu-memory-utilization 0.95"
TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.03 GiB. GPU 0 has a total capacity of "
    "94.97 GiB of which 406.50 MiB is free. Including non-PyTorch memory, this process has 94.55 GiB memory "
    "in use. Of the allocated memory 91.02 GiB is allocated by PyTorch, with 2.41 GiB allocated in private "
    "pools (e.g., CUDA Graphs), and {unalloc} is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management"
)
CAPTURE_FRAMES = '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3467, in capture_model'


def strategy(baseline: str = BASE, env: bool = True) -> Strategy:
    base = Candidate.make("vllm", "m", parse_flags(baseline, VL))
    space = build_space("vllm", VL, base)
    kn = Knowledge(GPU, "vllm", "0.32.0", enabled=False)
    envf = (
        EnvFactors(load_registry("vllm", version="0.32.0", installed=False), device="cuda") if env else None
    )
    return Strategy(space, base, kn, VL, env=envf)


def capture_oom(kv_report: dict | None, unalloc: str = "1.12 GiB") -> Outcome:
    return Outcome(
        status="fails",
        failure_class="oom-graph-capture",
        phase="graph-capture",
        signature="rootcause-oom-graph-capture",
        implicates=[
            "--max-num-seqs",
            "--max-cudagraph-capture-size",
            "--enforce-eager",
            "--gpu-memory-utilization",
        ],
        evidence=[TORCH_OOM.format(unalloc=unalloc)],
        kv_report=kv_report,
    )


REPORT = {"engine": "vllm", "kv_budget_gib": 27.32, "kv_tokens": 111904, "max_concurrency": 1.02}


@pytest.mark.slow
def test_a_reported_pool_that_barely_holds_one_request_stops_the_fraction_going_down() -> None:
    s = strategy()
    s.observe(s.baseline, capture_oom(REPORT))
    f = s.space.get("--gpu-memory-utilization")
    lo = s.bounds[f.name][0]
    # 0.95 - 27.32 GiB x (1 - 1/1.02) / 95.6 GiB: a pool 0.54 GiB larger than one request
    assert abs(lo - (0.95 - 27.32 * (1 - 1 / 1.02) / 95.6)) < 1e-9
    # below the floor: as good as certain to fail (0.92 is also the --help default), yet not removed
    assert s.risk(f, "0.92") >= P_BEYOND_BOUND and s.risk(f, None) >= P_BEYOND_BOUND
    p = s.propose()
    assert p is not None
    changed = {c.flag for c in p.candidate.diff(s.baseline)}
    assert "--gpu-memory-utilization" not in changed  # the batch limit or the capture sizes move instead
    assert changed & {
        "--max-num-seqs",
        "--max-cudagraph-capture-size",
        "--cudagraph-capture-sizes",
        "--enforce-eager",
    }
    assert any("cannot go lower" in n for n in s.notes)


def test_without_a_pool_report_the_fraction_steps_down_as_before() -> None:
    s = strategy()
    s.observe(s.baseline, capture_oom(None))
    assert "--gpu-memory-utilization" not in s.bounds or s.bounds["--gpu-memory-utilization"][0] is None
    f = s.space.get("--gpu-memory-utilization")
    assert s.risk(f, "0.9") < CERTAIN


def test_a_report_of_under_one_request_from_a_launch_that_went_on_is_not_believed() -> None:
    s = strategy()
    s.observe(s.baseline, capture_oom({**REPORT, "max_concurrency": 0.85}))
    assert s.bounds.get("--gpu-memory-utilization", [None, None])[0] is None


def test_the_kv_shortfall_in_vllms_message_bounds_the_fraction_from_below() -> None:
    s = strategy("--max-model-len 110000 --gpu-memory-utilization 0.92", env=False)
    line = (
        "ValueError: To serve at least one request with the models's max seq len (110000), (26.86 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (24.45 GiB). Based on the available "
        "memory, the estimated maximum model length is 100144."
    )
    s.observe(
        s.baseline,
        Outcome(
            status="fails",
            failure_class="oom-kv-cache",
            phase="kv-alloc",
            signature="vllm-kv-too-small-for-max-len",
            implicates=["--max-model-len", "--gpu-memory-utilization"],
            evidence=[line],
        ),
    )
    lo = s.bounds["--gpu-memory-utilization"][0]
    assert abs(lo - (0.92 + (26.86 - 24.45) / 95.6)) < 1e-9  # 0.945: 0.95 is the only level left above
    f = s.space.get("--gpu-memory-utilization")
    # below the floor: as good as certain to fail again, yet a candidate (one reading, not a refusal)
    assert P_BEYOND_BOUND <= s.risk(f, "0.9") < 1.0 and s.risk(f, "0.95") < 0.5


def test_pytorchs_allocator_advice_counts_only_when_its_condition_holds() -> None:
    small = TORCH_OOM.format(unalloc="1.12 GiB")  # 1.2% of the GPU: not "large"
    large = TORCH_OOM.format(unalloc="12.40 GiB")
    tiny = TORCH_OOM.format(unalloc="406.50 MiB")  # under the 1.03 GiB asked for: cannot have served it
    assert not advice_holds("PYTORCH_CUDA_ALLOC_CONF", small) and mentions(small) == []
    assert not advice_holds("PYTORCH_CUDA_ALLOC_CONF", tiny)
    assert advice_holds("PYTORCH_CUDA_ALLOC_CONF", large)
    assert [(m.name, m.value, m.action) for m in mentions(large)] == [
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "set")
    ]
    # advice without a condition to check is taken as it stands
    plain = "Try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before launching."
    assert advice_holds("PYTORCH_CUDA_ALLOC_CONF", plain) and mentions(plain)


@pytest.mark.slow
def test_the_boilerplate_advice_does_not_make_the_allocator_a_first_suspect() -> None:
    s = strategy()
    s.observe(s.baseline, capture_oom(REPORT))
    p = s.propose()
    assert "PYTORCH_CUDA_ALLOC_CONF" not in p.candidate.env_dict
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in n and "named by the log" in n for n in s.notes)


def test_variables_that_share_an_oom_words_come_after_the_numbers_it_says_to_move() -> None:
    """An out-of-memory names its fix (the batch limit, the capture sizes); a variable whose name
    merely shares its words (cuda_graph, kv_cache) is not tried first."""
    s = strategy()
    s.observe(s.baseline, capture_oom(REPORT))
    p = s.propose()
    assert not p.candidate.env_dict, p.candidate.env_dict


def test_a_change_that_left_the_failure_as_it_was_is_not_carried_on() -> None:
    s = strategy()
    s.observe(s.baseline, capture_oom(None))
    var = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
    assert s.space.get("env:" + var) is not None  # joined by rank after the OOM
    tried = Candidate.make("vllm", "m", s.baseline.flag_dict, {**s.baseline.env_dict, var: "0"})
    s.observe(tried, capture_oom(None))
    # failed alike: lowered (its share of the failure's belief drops), not ruled out
    b = s.blockers[0]
    assert b.mass_of("env:" + var) < 0.05 and b.mass_of("env:" + var) > 0
    p = s.propose()
    assert var not in p.candidate.env_dict


def test_two_failing_levels_of_a_many_level_factor_do_not_clear_it() -> None:
    """Two MoE backends that both answer wrongly leave the third one suspect."""
    s = strategy("--max-model-len 4096", env=False)
    wrong = Outcome(
        status="fails", failure_class="wrong-output", phase="decode", implicates=["--moe-backend"]
    )
    s.observe(s.baseline, wrong)
    other = Candidate.make("vllm", "m", {**s.baseline.flag_dict, "--moe-backend": "cutlass"}, {})
    s.observe(other, wrong)
    # failed alike twice: lowered, not ruled out; the third backend can still be launched
    f = s.space.get("--moe-backend")
    assert s.risk(f, "triton") < 1.0 and s.blockers[0].seen == 2
    third = s.baseline.with_changes({"--moe-backend": "triton"})
    assert 0 < s.success_probability(third)


def test_kernels_of_another_platform_are_not_searched_on_a_cuda_gpu() -> None:
    base = Candidate.make("sglang", "m", parse_flags("--tp 8", SG))
    space = build_space("sglang", SG, base)
    f = space.get("--nsa-decode-backend")
    assert f is not None and "aiter" in f.levels
    gone = drop_levels(space, base, lambda lv: other_platform(lv, "cuda"))
    assert "aiter" not in f.levels and "trtllm" in f.levels and "--nsa-decode-backend aiter" in gone
    # the user's own level stays, even one of another platform
    mine = Candidate.make("sglang", "m", parse_flags("--tp 8 --nsa-decode-backend aiter", SG))
    space = build_space("sglang", SG, mine)
    drop_levels(space, mine, lambda lv: other_platform(lv, "cuda"))
    assert "aiter" in space.get("--nsa-decode-backend").levels
    # on the CPU build the CPU backend is the platform's own
    assert other_platform("CPU_ATTN", "cuda") and not other_platform("CPU_ATTN", "cpu")
