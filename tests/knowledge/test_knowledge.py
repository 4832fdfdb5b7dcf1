"""Knowledge rules: validation, verdicts with the facts they used, the memory plan."""

from __future__ import annotations

import pytest

from bringup.core.datafiles import KnowledgeFileError
from bringup.knowledge.rules import Knowledge, load_rules, memory_model_for

SM120 = {
    "device": "cuda",
    "gpu.compute_capability": 12.0,
    "gpu.memory_gib": 95.6,
    "gpu.count": 8,
    "gpu.smem_per_block_kib": 99,
    "model.attention": "dsa",
    "model.moe": True,
    "model.weights_gib": 400,
    "model.replicated_gib": 14,
}
H200 = {**SM120, "gpu.compute_capability": 9.0, "gpu.memory_gib": 140, "gpu.smem_per_block_kib": 227}


def test_fa3_depends_on_compute_capability():
    k12 = Knowledge(SM120, "sglang", "0.5.10.post1")
    v = k12.verdicts("--nsa-decode-backend", "fa3")
    assert {x.kind for x in v} == {"incompatible"} and v[0].facts_used["gpu.compute_capability"] == 12.0
    k9 = Knowledge({**H200, "model.attention": "gqa"}, "sglang", "0.5.10.post1")
    assert k9.verdicts("--attention-backend", "fa3") == []


def test_version_ranges_select_rules():
    old = Knowledge(SM120, "sglang", "0.5.10.post1")
    new = Knowledge(SM120, "sglang", "0.5.23")
    assert [v.kind for v in old.verdicts("--nsa-decode-backend", "trtllm")] == ["preferred"]
    assert "incompatible" in {v.kind for v in new.verdicts("--dsa-decode-backend", "trtllm")}
    assert old.prediction("--attention-backend", "forced").value == "nsa"
    assert new.prediction("--attention-backend", "forced") is None


def test_with_conditions_read_the_candidate():
    k = Knowledge(SM120, "sglang", "0.5.23")
    assert (
        k.verdicts("--dsa-decode-backend", "tilelang", {"--kv-cache-dtype": "bfloat16"})[0].kind
        == "preferred"
    )
    assert k.verdicts("--dsa-decode-backend", "tilelang", {"--kv-cache-dtype": "fp8_e4m3"}) == []


def test_a_rule_about_a_switch_speaks_of_the_level_it_names():
    """vllm-cpu-no-graphs is about asking for eager mode on the CPU build, not about leaving the
    switch unset (the engine's default); an FP8 MoE rule on SM120 speaks of vLLM's MoE backend only."""
    cpu = Knowledge({"device": "cpu", "model.attention": "gqa"}, "vllm", "0.32.0")
    assert [v.kind for v in cpu.verdicts("--enforce-eager", True)] == ["risky"]
    assert cpu.verdicts("--enforce-eager", None) == []
    fp8 = {**SM120, "gpu.count": 1, "model.attention": "gqa", "model.quantization": "fp8"}
    assert [v.kind for v in Knowledge(fp8, "vllm", "0.32.0").verdicts("--moe-backend", "triton")] == [
        "preferred"
    ]
    assert (
        Knowledge({**fp8, "model.quantization": "nvfp4"}, "vllm", "0.32.0").verdicts(
            "--moe-backend", "triton"
        )
        == []
    )
    assert (
        Knowledge({**fp8, "gpu.compute_capability": 9.0}, "vllm", "0.32.0").verdicts(
            "--moe-backend", "triton"
        )
        == []
    )


def test_disabled_knowledge_says_nothing():
    k = Knowledge(SM120, "sglang", "0.5.10.post1", enabled=False)
    assert (
        k.verdicts("--nsa-decode-backend", "fa3") == []
        and k.prediction("--attention-backend", "forced") is None
    )


def test_memory_plan_flags_the_seeds_095_before_launch():
    mem = memory_model_for(SM120, "sglang")
    k = Knowledge(SM120, "sglang", "0.5.10.post1", memory_model=mem)
    v95 = k.verdicts("--mem-fraction-static", "0.95", {"--tensor-parallel-size": "8"})
    assert v95 and v95[0].kind == "risky" and "memory plan" in v95[0].reason
    assert k.verdicts("--mem-fraction-static", "0.88", {"--tensor-parallel-size": "8"}) == []
    v1 = k.verdicts("--mem-fraction-static", "0.88", {})  # tp 1: 400 GiB on one 96 GiB card
    assert v1[0].kind == "incompatible"


@pytest.mark.parametrize(
    "body, message",
    [
        ("- {id: a, flags: [--x], verdict: maybe, reason: r, source: s}", "verdict"),
        ("- {id: a, flags: [x], verdict: risky, reason: r, source: s}", "must be spelled --name"),
        (
            "- {id: a, flags: [--x], verdict: risky, reason: r, source: s, versions: 'abc'}",
            "not a version range",
        ),
        (
            "- {id: a, flags: [--x], verdict: risky, reason: r, source: s, when: {colour: red}}",
            "unknown fact 'colour'",
        ),
        ("- {id: a, flags: [--x], verdict: forced, reason: r, source: s}", "needs a value"),
        (
            "- {id: a, flags: [--x], verdict: risky, reason: r, source: s, when: {gpu.count: {above: 2}}}",
            "unknown operator",
        ),
    ],
)
def test_invalid_rules_name_file_entry_and_field(tmp_path, body, message):
    f = tmp_path / "rules.yaml"
    f.write_text("rules:\n  " + body + "\n")
    with pytest.raises(KnowledgeFileError) as e:
        load_rules([f])
    assert str(f) in str(e.value) and "rules[0]" in str(e.value) and message in str(e.value)


def test_shipped_rules_load_and_cite_sources():
    rules = load_rules()
    assert len(rules) >= 20 and all(r.rule.source for r in rules)


def test_vllm_flash_attn_refuses_an_fp8_kv_cache_off_hopper():
    """FA2 (SM80/89, SM120) has no fp8 KV in vLLM; FA3 on SM90 has. A 16-bit KV cache is fine."""
    gqa = {**SM120, "gpu.count": 1, "model.attention": "gqa", "model.moe": False}
    k12 = Knowledge(gqa, "vllm", "0.32.0")
    assert [
        v.kind for v in k12.verdicts("--attention-backend", "FLASH_ATTN", {"--kv-cache-dtype": "fp8"})
    ] == ["incompatible"]
    assert k12.verdicts("--attention-backend", "FLASH_ATTN", {"--kv-cache-dtype": "auto"}) == []
    assert k12.verdicts("--attention-backend", "TRITON_ATTN", {"--kv-cache-dtype": "fp8"}) == []
    k9 = Knowledge({**gqa, "gpu.compute_capability": 9.0}, "vllm", "0.32.0")
    assert k9.verdicts("--attention-backend", "FLASH_ATTN", {"--kv-cache-dtype": "fp8"}) == []
