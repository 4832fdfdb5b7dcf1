"""The memory plan against the seeds' GLM-5 launches and real engine log lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app
from bringup.facts import memplan as mp
from bringup.facts import modelinfo as mi
from tests.paths import DATA

CONFIGS = DATA / "configs"


def fp_of(name: str) -> mi.Fingerprint:
    return mi.from_config(json.loads((CONFIGS / f"{name}.json").read_text()))


GLM5 = fp_of("glm-5")
# The seeds: 8 x RTX PRO 6000 Blackwell (SM120, 96 GB), TP 8, about 62 GB of weights per GPU.
SEEDS = dict(gpu_mem_gib=96, tp=8, gpus=8, fp=GLM5, weights_gib=62, compute_capability=12.0)
SEEDS_KV_GIB, SEEDS_TOKENS = 24.37, 425664


# ---------------------------------------------------------------------------------------------
# the seeds


def test_seeds_088_matches_what_sglang_allocated():
    p = mp.plan(mem_fraction=0.88, max_running_requests=64, **SEEDS)
    assert p.kv_dtype == "fp8_e4m3"  # auto on SM120 for a DSA model
    assert abs(p.kv_gib - SEEDS_KV_GIB) / SEEDS_KV_GIB < 0.15
    assert abs(p.kv_tokens - SEEDS_TOKENS) / SEEDS_TOKENS < 0.15
    assert p.kv_tokens % 64 == 0  # NSA page size
    assert p.verdict in ("fits", "tight")  # it did start and capture graphs up to bs 64
    assert p.free_after_pools_gib > p.reserve_min_gib


def test_seeds_095_is_flagged_before_launch():
    p = mp.plan(mem_fraction=0.95, **SEEDS)
    assert p.verdict == "graph-capture-risk"
    assert p.free_after_pools_gib < p.reserve_min_gib
    assert any("graph capture" in r for r in p.reasons)
    # with the request pool capped as the seeds did next, 0.95 is still too much
    assert mp.plan(mem_fraction=0.95, max_running_requests=64, **SEEDS).verdict == "graph-capture-risk"


def test_sglang_arithmetic_by_hand():
    p = mp.plan(mem_fraction=0.88, max_running_requests=64, **SEEDS)
    total = 96 - mp.CUDA_CONTEXT_GIB - mp.COMM_INIT_GIB
    budget = total * 0.88 - 62
    assert p.kv_budget_gib == pytest.approx(budget, abs=1e-3)
    tokens = int(budget * 2**30 // (78 * 708)) // 64 * 64  # SGLang's cell: (512+64) x 1 B + indexer 132 B
    assert p.kv_tokens == tokens
    assert p.kv_gib == pytest.approx(tokens * 78 * 788 / 2**30, abs=1e-3)  # allocated at 656 + 132 B
    req_to_token = 65 * (202752 + 4) * 4 / 2**30
    assert p.free_after_pools_gib == pytest.approx(
        total * 0.12 - (p.kv_gib - budget) - req_to_token, abs=2e-3
    )
    # graph capture: 512 MB metadata + 64 x 2 MB graphs + 1 GiB for 8 ranks
    assert p.reserve_min_gib == pytest.approx(0.5 + 64 * 2 / 1024 + 1.0, abs=1e-3)


def test_more_fraction_more_kv_less_headroom():
    plans = [mp.plan(mem_fraction=f, **SEEDS) for f in (0.80, 0.85, 0.88, 0.92, 0.95)]
    kv = [p.kv_gib for p in plans]
    free = [p.free_after_pools_gib for p in plans]
    assert kv == sorted(kv) and free == sorted(free, reverse=True)


def test_weights_too_big_does_not_fit():
    p = mp.plan(mem_fraction=0.88, **(SEEDS | {"weights_gib": 90}))
    assert p.verdict == "does-not-fit" and p.kv_tokens is None
    assert "Not enough memory" in p.reasons[0]


@pytest.mark.parametrize(
    ("gib", "tp", "expected"),
    [
        (96, 8, (8192, 512)),
        (96, 2, (8192, 256)),
        (80, 1, (8192, 256)),
        (24, 1, (2048, 24)),
        (24, 4, (2048, 80)),
        (40, 8, (4096, 160)),
        (192, 8, (16384, 512)),
        (16, 1, (2048, 8)),
    ],
)
def test_sglang_default_buckets(gib, tp, expected):
    assert mp.sglang_defaults(gib, tp) == expected


def test_disabling_graphs_lowers_the_reserve():
    on = mp.plan(mem_fraction=0.95, **SEEDS)
    off = mp.plan(mem_fraction=0.95, disable_cuda_graph=True, **SEEDS)
    assert off.reserve_min_gib == pytest.approx(on.reserve_min_gib - 1.0)  # 512 x 2 MB


def test_weights_from_headers(tmp_path):
    cfg = json.loads((CONFIGS / "glm-5.json").read_text()) | {"num_hidden_layers": 5}
    d = mi.write_header_only_model(tmp_path / "glm5", cfg, shards=2, quant="nvfp4")
    fp = mi.fingerprint(d)
    p = mp.plan(gpu_mem_gib=96, tp=8, mem_fraction=0.88, fp=fp, compute_capability=12.0)
    assert p.weights_source == "headers"
    assert p.weights_per_gpu_gib == pytest.approx(mi.weights_per_gpu_bytes(fp, 8) / 2**30)
    with pytest.raises(ValueError, match="weights"):
        mp.plan(gpu_mem_gib=96, tp=8, mem_fraction=0.88)
    with pytest.raises(ValueError, match="GPUs"):
        mp.plan(gpu_mem_gib=96, tp=8, gpus=4, mem_fraction=0.88, weights_gib=10)


def test_config_only_estimate_uses_bytes_per_parameter():
    p = mp.plan(gpu_mem_gib=141, tp=8, mem_fraction=0.9, fp=fp_of("deepseek-v3"))
    assert p.weights_source == "config-estimate"
    assert p.weights_per_gpu_gib == pytest.approx(671.03e9 / 8 / 2**30, rel=0.01)  # fp8: one byte a parameter


# ---------------------------------------------------------------------------------------------
# vLLM


def test_vllm_gpu_budget_by_hand():
    fp = fp_of("llama-3-8b")
    p = mp.plan(gpu_mem_gib=80, tp=1, mem_fraction=0.9, engine="vllm", fp=fp, weights_gib=14.96)
    a = p.assumptions
    # the CUDA context is outside the budget (vLLM's baseline snapshot); graphs are inside (profiled)
    expected = 80 * 0.9 - 14.96 - a["activation_peak_gib"] - a["cudagraph_gib"]
    assert p.kv_budget_gib == pytest.approx(expected, abs=1e-3)
    assert abs(p.kv_tokens - expected * 2**30 / 131072) < 10
    assert p.outside_fraction_gib == pytest.approx(80 * 0.1 - mp.CUDA_CONTEXT_GIB)
    tp2 = mp.plan(gpu_mem_gib=80, tp=2, mem_fraction=0.9, engine="vllm", fp=fp, weights_gib=7.48)
    assert tp2.assumptions["comm_gib"] == mp.COMM_INIT_GIB
    assert 0.5 < a["activation_peak_gib"] < 3  # a forward pass of 8192 tokens of an 8B model
    assert p.verdict == "fits"


def test_vllm_gpu_failures():
    fp = fp_of("llama-3-8b")
    low = mp.plan(gpu_mem_gib=80, mem_fraction=0.2, engine="vllm", fp=fp, weights_gib=14.96)
    assert low.verdict == "does-not-fit" and "No available memory for the cache blocks" in low.reasons[0]
    greedy = mp.plan(gpu_mem_gib=80, mem_fraction=0.999, engine="vllm", fp=fp, weights_gib=14.96)
    assert (
        greedy.verdict == "does-not-fit" and "less than desired GPU memory utilization" in greedy.reasons[0]
    )
    long_ctx = mp.plan(
        gpu_mem_gib=24, mem_fraction=0.9, engine="vllm", fp=fp, weights_gib=14.96, context_len=131072
    )
    assert long_ctx.verdict == "does-not-fit" and "max seq len" in long_ctx.reasons[-1]


def test_vllm_without_graph_profiling_needs_room_outside():
    fp = fp_of("llama-3-8b")
    p = mp.plan(
        gpu_mem_gib=80, mem_fraction=0.98, engine="vllm", fp=fp, weights_gib=14.96, cudagraph_profiled=False
    )
    assert p.verdict == "graph-capture-risk" and p.reserve_min_gib == pytest.approx(1.0)
    assert (
        mp.plan(gpu_mem_gib=80, mem_fraction=0.98, engine="vllm", fp=fp, weights_gib=14.96).verdict == "fits"
    )
    assert (
        mp.plan(
            gpu_mem_gib=80,
            mem_fraction=0.9,
            engine="vllm",
            fp=fp,
            weights_gib=14.96,
            cudagraph_profiled=False,
        ).verdict
        == "fits"
    )


# The vLLM CPU build on this project's machines, tiny random Llama (docs/facts.md; 2 layers, 2 KV heads,
# head_dim 64, bf16 -> 2 x 2 x 2 x 64 x 2 = 1024 bytes a token).
CPU_LINES = [
    "INFO 11-29 10:01:02 [cpu_worker.py:262] Auto set (1.8/8.46) GiB for KV cache on node 0, with 2.54 GiB requested "
    "memory for the worker. 0.74 GiB memory was consumed by non-kv usages.",
    "INFO 11-29 10:01:02 [kv_cache_utils.py:2327] CPU KV cache size: 1,889,408 tokens, Maximum concurrency for "
    "2,048 tokens per request: 922.56x",
]
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 256,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}


def test_vllm_cpu_report_and_plan_agree():
    r = mp.parse_kv_report(CPU_LINES, "vllm")
    assert r["kv_budget_gib"] == 1.8 and r["host_total_gib"] == 8.46 and r["requested_gib"] == 2.54
    assert r["non_kv_gib"] == 0.74 and r["kv_tokens"] == 1889408 and r["device"] == "cpu"
    assert r["max_concurrency"] == 922.56 and r["concurrency_len"] == 2048
    p = mp.plan(
        gpu_mem_gib=8.46,
        mem_fraction=0.3,
        engine="vllm",
        device="cpu",
        fp=mi.from_config(TINY),
        weights_gib=0.0,
    )
    assert p.device == "cpu" and p.kv_bytes_per_token == 1024
    c = mp.compare(p, r)
    assert abs(c["kv_gib_rel_error"]) < 0.02 and abs(c["kv_tokens_rel_error"]) < 0.02
    over = mp.plan(
        gpu_mem_gib=8.46,
        mem_fraction=0.92,
        engine="vllm",
        device="cpu",
        fp=mi.from_config(TINY),
        weights_gib=0.0,
        host_available_gib=5.0,
    )
    assert over.verdict == "does-not-fit" and "Available memory on node" in over.reasons[0]


# ---------------------------------------------------------------------------------------------
# parsing what the engines reported (formats from the engines' sources, cited in memplan.py)

SGLANG_SEEDS = [
    "[2026-02-18 10:12:01 TP0] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=32.95 GB, mem usage=62.41 GB.",
    "[2026-02-18 10:12:01 TP1] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=33.10 GB, mem usage=62.30 GB.",
    "[2026-02-18 10:12:02 TP0] Using KV cache dtype: torch.float8_e4m3fn",
    "[2026-02-18 10:12:03 TP0] KV Cache is allocated. #tokens: 425664, KV size: 24.37 GB",
    "[2026-02-18 10:12:03 TP1] KV Cache is allocated. #tokens: 425664, KV size: 24.37 GB",
    "[2026-02-18 10:12:03 TP0] Memory pool end. avail mem=8.12 GB",
    "[2026-02-18 10:13:40 TP0] Capture cuda graph end. Time elapsed: 96.21 s. mem usage=1.21 GB. avail mem=6.91 GB.",
    "[2026-02-18 10:13:45 TP0] max_total_num_tokens=425664, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=64, context_len=202752, available_gpu_mem=6.85 GB",
]


def test_parse_sglang_mla_report():
    r = mp.parse_kv_report(SGLANG_SEEDS, "sglang")
    assert r["kv_tokens"] == 425664 and r["kv_gib"] == 24.37 and r["kv_dtype"] == "torch.float8_e4m3fn"
    assert r["weights_gib"] == 62.41 and r["avail_after_weights_gib"] == 32.95  # TP0's line, not TP1's
    assert (
        r["avail_after_pools_gib"] == 8.12 and r["graph_gib"] == 1.21 and r["avail_after_graphs_gib"] == 6.91
    )
    assert r["avail_ready_gib"] == 6.85
    assert SGLANG_SEEDS[3] in r["evidence"] and SGLANG_SEEDS[4] not in r["evidence"]


def test_parse_sglang_mha_and_newer_formats():
    mha = ["KV Cache is allocated. #tokens: 131072, K size: 16.00 GB, V size: 16.00 GB"]
    r = mp.parse_kv_report(mha, "sglang")
    assert (r["kv_tokens"], r["k_gib"], r["v_gib"], r["kv_gib"]) == (131072, 16.0, 16.0, 32.0)
    newer = [
        "[TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 159552, K size: 1.83 GB, V size: 1.83 GB",
        "Load weight end. elapsed=787.55 s, type=X, quant=modelopt_fp4, quant_algo=NVFP4, avail mem=29.01 GB, mem usage=82.97 GB.",
    ]
    r = mp.parse_kv_report(newer, "sglang")
    assert r["kv_dtype"] == "torch.bfloat16" and r["kv_gib"] == 3.66 and r["weights_gib"] == 82.97
    assert mp.parse_kv_report(["INFO: Uvicorn running", "Capture cuda graph begin."], "sglang") is None


def test_parse_vllm_gpu_report():
    lines = [
        "(EngineCore_DP0 pid=1) INFO 11-29 [gpu_model_runner.py:5150] Model loading took 14.96 GiB memory and 3.812345 seconds",
        "(EngineCore_DP0 pid=1) INFO 11-29 [gpu_worker.py:760] Available KV cache memory: 52.31 GiB",
        "(EngineCore_DP0 pid=1) INFO 11-29 [kv_cache_utils.py:2327] GPU KV cache size: 428,544 tokens, Maximum concurrency for 8,192 tokens per request: 52.31x",
    ]
    r = mp.parse_kv_report(lines, "vllm")
    assert r["weights_gib"] == 14.96 and r["kv_budget_gib"] == 52.31 and r["kv_gib"] == 52.31
    assert r["kv_tokens"] == 428544 and r["device"] == "gpu" and r["concurrency_len"] == 8192
    older = ["INFO Model loading took 0.93 GiB and 3.1 seconds"]
    assert mp.parse_kv_report(older, "vllm")["weights_gib"] == 0.93
    assert mp.parse_kv_report(["nothing here"], "vllm") is None


# ---------------------------------------------------------------------------------------------
# compare and correct


def test_compare_with_the_seeds_report():
    p = mp.plan(mem_fraction=0.88, max_running_requests=64, **SEEDS)
    c = mp.compare(p, mp.parse_kv_report(SGLANG_SEEDS, "sglang"))
    assert c["kv_gib_rel_error"] == pytest.approx((p.kv_gib - 24.37) / 24.37, abs=1e-4)
    assert abs(c["kv_gib_rel_error"]) < 0.15 and abs(c["kv_tokens_rel_error"]) < 0.15
    assert c["weights_gib_rel_error"] == pytest.approx((62 - 62.41) / 62.41, abs=1e-4)


def test_corrected_applies_the_median_error():
    p = mp.plan(mem_fraction=0.88, max_running_requests=64, **SEEDS)
    q = mp.corrected(p, [0.1, 0.2, -0.05, 0.3, float("nan"), -0.99])
    assert q.correction["median_rel_error"] == pytest.approx(0.15) and q.correction["samples"] == 4
    assert q.kv_gib == pytest.approx(p.kv_gib / 1.15, abs=1e-3)
    assert q.kv_tokens == int(p.kv_tokens / 1.15)
    assert p.correction is None and p.kv_gib != q.kv_gib  # the original is untouched
    assert mp.corrected(p, []) is p
    # a plan that keeps overestimating by its own error comes back exact
    seen = mp.parse_kv_report(SGLANG_SEEDS, "sglang")
    err = mp.compare(p, seen)["kv_gib_rel_error"]
    assert mp.corrected(p, [err, err, err]).kv_gib == pytest.approx(24.37, abs=0.01)


# ---------------------------------------------------------------------------------------------
# CLI


def _glm_dir(tmp_path: Path) -> Path:
    d = tmp_path / "glm5"
    d.mkdir()
    (d / "config.json").write_text((CONFIGS / "glm-5.json").read_text())
    return d


def test_cli_plan_flags_the_seeds(tmp_path):
    d = _glm_dir(tmp_path)
    args = [
        "plan",
        str(d),
        "--weights-gib",
        "62",
        "--tp",
        "8",
        "--gpus",
        "8",
        "--gpu-mem-gib",
        "96",
        "--cc",
        "12.0",
    ]
    res = CliRunner().invoke(app, [*args, "--mem-fraction", "0.95", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["verdict"] == "graph-capture-risk"
    res = CliRunner().invoke(app, [*args, "--mem-fraction", "0.88", "--max-running-requests", "64"])
    assert res.exit_code == 0 and "verdict:" in res.output and "graph-capture-risk" not in res.output


def test_cli_plan_on_this_gpu_less_machine(tmp_path):
    d = _glm_dir(tmp_path)
    res = CliRunner().invoke(
        app, ["plan", str(d), "--weights-gib", "62", "--tp", "8", "--mem-fraction", "0.88"]
    )
    assert res.exit_code != 0 and "--gpu-mem-gib" in res.output
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    (tiny / "config.json").write_text(json.dumps(TINY))
    res = CliRunner().invoke(
        app,
        ["plan", str(tiny), "--weights-gib", "0.01", "--mem-fraction", "0.3", "--engine", "vllm", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["device"] == "cpu" and out["kv_tokens"] > 0 and math.isclose(out["kv_bytes_per_token"], 1024)
