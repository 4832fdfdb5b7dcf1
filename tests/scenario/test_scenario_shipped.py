"""Each shipped scenario: its baseline falls into its trap, its working configuration serves right.

The table below is the one docs/scenarios.md gives: (scenario, baseline flags, the rule the baseline
hits, the failure class bringup's signatures give it, working flags, env for the working run).
"""

from __future__ import annotations

import re

import httpx
import pytest

from bringup.observe.signatures import classify
from bringup.oracle.testing import ScenarioProcess
from bringup.scenario import load_scenario, scenario_path
from bringup.scenario.config import compute_config, decide
from bringup.scenario.engine_args import help_for, parse_engine_argv

GLM_CARD = [
    "--model-path",
    "zai-org/GLM-5-NVFP4",
    "--tp",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--attention-backend",
    "flashinfer",
    "--moe-runner-backend",
    "flashinfer_cutlass",
    "--kv-cache-dtype",
    "fp8_e4m3",
    "--mem-fraction-static",
    "0.95",
]
GLM51_CARD = [
    "--model-path",
    "zai-org/GLM-5.1-NVFP4",
    "--tp",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--kv-cache-dtype",
    "fp8_e4m3",
    "--dsa-prefill-backend",
    "trtllm",
    "--dsa-decode-backend",
    "trtllm",
    "--mem-fraction-static",
    "0.88",
]
DSV2 = ["--model", "deepseek-ai/DeepSeek-V2-Lite-Chat", "--trust-remote-code", "--max-model-len", "32768"]
LLAMA = ["--model-path", "meta-llama/Meta-Llama-3-70B-Instruct", "--tp", "8"]
QWEN = ["--model", "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "--max-model-len", "32768"]

CASES = [
    (
        "glm5-nvfp4-sm120",
        GLM_CARD,
        "oom-graph-capture",
        "oom-graph-capture",
        [
            "--mem-fraction-static",
            "0.88",
            "--nsa-decode-backend",
            "trtllm",
            "--nsa-prefill-backend",
            "trtllm",
        ],
        {},
    ),
    (
        "glm51-nvfp4-sm120-sglang0523",
        GLM51_CARD,
        "trtllm-decode-unsupported-arch",
        "unsupported-hardware",
        ["--dsa-prefill-backend", "flashinfer_sparse_mla", "--dsa-decode-backend", "flashinfer_sparse_mla"],
        {},
    ),
    (
        "glm51-nvfp4-sm120-sglang0523",
        GLM51_CARD,
        "trtllm-decode-unsupported-arch",
        "unsupported-hardware",
        [
            "--dsa-prefill-backend",
            "tilelang",
            "--dsa-decode-backend",
            "tilelang",
            "--kv-cache-dtype",
            "bfloat16",
        ],
        {"SGLANG_OPT_DEEPGEMM_HC_PRENORM": "0"},
    ),
    (
        "deepseek-v2-lite-sm120-vllm",
        [*DSV2, "--attention-backend", "FLASHMLA", "--kv-cache-dtype", "fp8"],
        "mla-backend-needs-sm90-or-sm100",
        "unsupported-hardware",
        ["--attention-backend", "TRITON_MLA", "--kv-cache-dtype", "auto"],
        {},
    ),
    (
        "llama3-70b-h200-sglang",
        [
            *LLAMA,
            "--mem-fraction-static",
            "0.95",
            "--cuda-graph-max-bs-decode",
            "512",
            "--max-running-requests",
            "512",
        ],
        "decode-graph-oom",
        "oom-graph-capture",
        ["--cuda-graph-max-bs-decode", "256"],
        {},
    ),
    (
        "qwen3-30b-a3b-fp8-sm120-vllm",
        QWEN,
        "cutlass-fp8-moe-wrong-on-sm120",
        None,
        ["--moe-backend", "triton"],
        {},
    ),
    # faults only users' requests show (issue 24): no log line, the probes find them
    (
        "llama31-8b-sm120-sampler-wrong-sglang",
        ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--context-length", "16384"],
        "flashinfer-sampler-wrong-draws-sm120",
        None,
        ["--sampling-backend", "pytorch"],
        {},
    ),
    (
        "llama31-8b-h200-long-prompt-fp8kv-vllm",
        [
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--max-model-len",
            "32768",
            "--kv-cache-dtype",
            "fp8",
        ],
        "fp8-kv-chunked-prefill-wrong",
        None,
        ["--kv-cache-dtype", "auto"],
        {},
    ),
    (
        "qwen25-14b-h200-concurrency-graph-vllm",
        ["--model", "Qwen/Qwen2.5-14B-Instruct", "--max-model-len", "16384"],
        "large-batch-graph-wrong",
        None,
        ["--max-num-seqs", "16"],
        {},
    ),
]


def _with(base: list[str], changes: list[str]) -> list[str]:
    """base with each `--flag value` of changes set (replacing the flag's value if present)."""
    out = list(base)
    for i in range(0, len(changes), 2):
        flag, value = changes[i], changes[i + 1]
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def _decide(name: str, argv: list[str], env: dict[str, str]):
    sc = load_scenario(scenario_path(name))
    spec, text = help_for(sc.engine, sc.engine_version)
    req = parse_engine_argv(argv, spec, sc.engine, text)
    cfg = compute_config(sc, spec, req.flags, req.positionals, env)
    return sc, decide(sc, cfg)


@pytest.mark.parametrize("name, baseline, rule_id, klass, fix, env", CASES)
def test_baseline_falls_into_the_trap_and_the_fix_avoids_it(name, baseline, rule_id, klass, fix, env):
    _, rule = _decide(name, baseline, {})
    assert rule is not None and rule.id == rule_id
    _, fixed = _decide(name, _with(baseline, fix), env)
    assert fixed is None or (fixed.serve is not None and fixed.serve.mode == "ok")


@pytest.mark.parametrize(
    "name, baseline, rule_id, klass, fix, env",
    [c for c in CASES if c[3] is not None and c[0] != "glm5-nvfp4-sm120"],
)
@pytest.mark.slow
def test_baseline_log_classifies_as_intended(name, baseline, rule_id, klass, fix, env):
    sc = load_scenario(scenario_path(name))
    with ScenarioProcess(scenario_path(name), baseline, 0.002) as p:
        rc = p.wait_exit(60)
        lines = p.lines
    assert rc != 0
    c = classify(lines, sc.engine, "graph-capture")
    assert c.failure_class == klass, c.evidence


@pytest.mark.slow
@pytest.mark.parametrize("name, baseline, rule_id, klass, fix, env", CASES)
def test_working_configuration_answers_the_known_prompts(name, baseline, rule_id, klass, fix, env):
    sc = load_scenario(scenario_path(name))
    ready = "fired up" if sc.engine == "sglang" else "Application startup complete"
    with ScenarioProcess(scenario_path(name), _with(baseline, fix), 0.002, env=env) as p:
        p.wait_for(ready, 60)
        for qa in sc.answers:
            r = httpx.post(
                f"{p.url}/v1/chat/completions",
                timeout=20,
                json={
                    "model": sc.model.name,
                    "messages": [{"role": "user", "content": qa.prompt}],
                    "max_tokens": 64,
                    "temperature": 0,
                },
            )
            assert r.status_code == 200
            assert re.search(
                rf"(?<!\w){re.escape(qa.expected)}(?!\w)", r.json()["choices"][0]["message"]["content"]
            )
        assert p.proc.poll() is None


def test_vllm_rejects_flashmla_on_sm120_with_the_engines_words():
    with ScenarioProcess(
        scenario_path("deepseek-v2-lite-sm120-vllm"),
        [*DSV2, "--attention-backend", "FLASHMLA", "--kv-cache-dtype", "fp8"],
        0.005,
    ) as p:
        assert p.wait_exit(30) == 1
        text = p.text
    assert (
        "ValueError: Selected backend AttentionBackendEnum.FLASHMLA is not valid for this configuration. "
        "Reason: ['compute capability not supported']"
    ) in text
    assert "Engine core initialization failed. See root cause above." in text
    assert (
        "Starting to load model deepseek-ai/DeepSeek-V2-Lite-Chat" in text
        and "Loading weights took" not in text
    )


def test_vllm_without_a_backend_but_with_fp8_kv_finds_none():
    with ScenarioProcess(
        scenario_path("deepseek-v2-lite-sm120-vllm"), [*DSV2, "--kv-cache-dtype", "fp8"], 0.005
    ) as p:
        assert p.wait_exit(30) == 1
        lines = p.lines
    assert any(
        "No valid attention backend found for cuda with" in ln
        and "TRITON_MLA: [kv_cache_dtype not supported]" in ln
        for ln in lines
    )
    # the one backend that could run here objects to the KV dtype: that is the flag to change
    c = classify(lines, "vllm", "load-weights")
    assert c.failure_class == "incompatible-options" and c.implicates[0] == "--kv-cache-dtype"


@pytest.mark.slow
def test_sglang_0523_fa3_asserts_unsupported_hardware():
    with ScenarioProcess(
        scenario_path("glm51-nvfp4-sm120-sglang0523"),
        [*GLM51_CARD[:-6], "--dsa-decode-backend", "fa3"],
        0.002,
    ) as p:
        assert p.wait_exit(60) != 0
        lines = p.lines
    c = classify(lines, "sglang", "kv-alloc")
    assert c.failure_class == "unsupported-hardware"
    assert "FlashAttention v3 Backend requires SM>=80 and SM<=90" in c.evidence[0]
