"""The model fingerprint on real config.json contents and on safetensors headers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app
from bringup.facts import modelinfo as mi
from tests.paths import DATA

CONFIGS = DATA / "configs"
GPU_DATA = DATA / "gpu" / "h200-2026-11-29"


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def fp_of(name: str) -> mi.Fingerprint:
    return mi.from_config(cfg(name))


# ---------------------------------------------------------------------------------------------
# config.json (fixtures: transformers AutoConfig.for_model defaults, the flagship's dimensions)


@pytest.mark.parametrize(
    (
        "name",
        "arch",
        "attention",
        "layers",
        "heads",
        "kv_heads",
        "head_dim",
        "experts",
        "per_tok",
        "quant",
        "ctx",
    ),
    [
        ("glm-5", "GlmMoeDsaForCausalLM", "dsa", 78, 64, 1, 256, 256, 8, "none", 202752),
        ("deepseek-v3.2", "DeepseekV32ForCausalLM", "dsa", 61, 128, 1, 192, 256, 8, "fp8", 163840),
        ("deepseek-v3", "DeepseekV3ForCausalLM", "mla", 61, 128, 1, 192, 256, 8, "fp8", 163840),
        ("llama-3-8b", "LlamaForCausalLM", "gqa", 32, 32, 8, 128, None, None, "none", 8192),
        ("qwen2.5-7b", "Qwen2ForCausalLM", "gqa", 28, 28, 4, 128, None, None, "none", 32768),
        ("llama-2-7b", "LlamaForCausalLM", "mha", 32, 32, 32, 128, None, None, "none", 2048),
        ("gpt2", "GPT2LMHeadModel", "mha", 12, 12, 12, 64, None, None, "none", 1024),
        ("mixtral-8x7b", "MixtralForCausalLM", "gqa", 32, 32, 8, 128, 8, 2, "none", 32768),
        ("qwen3-30b-a3b", "Qwen3MoeForCausalLM", "gqa", 48, 32, 4, 128, 128, 8, "none", 40960),
        ("gpt-oss-120b", "GptOssForCausalLM", "gqa", 36, 64, 8, 64, 128, 4, "mxfp4", 131072),
    ],
)
def test_fingerprint_from_public_configs(
    name, arch, attention, layers, heads, kv_heads, head_dim, experts, per_tok, quant, ctx
):
    fp = fp_of(name)
    assert (fp.architecture, fp.attention, fp.layers, fp.heads, fp.kv_heads, fp.head_dim) == (
        arch,
        attention,
        layers,
        heads,
        kv_heads,
        head_dim,
    )
    assert (fp.experts, fp.experts_per_token, fp.moe) == (experts, per_tok, experts is not None)
    assert fp.quantization.method == quant
    assert fp.max_context == ctx


def test_dsa_and_mla_details():
    glm = fp_of("glm-5")
    assert (glm.kv_lora_rank, glm.qk_nope_head_dim, glm.qk_rope_head_dim, glm.v_head_dim) == (
        512,
        192,
        64,
        256,
    )
    assert (glm.index_head_dim, glm.index_topk, glm.index_n_heads) == (128, 2048, 32)
    assert glm.first_dense_layers == 3 and glm.shared_experts == 1 and glm.mtp_layers == 1
    v3 = fp_of("deepseek-v3")
    assert v3.index_head_dim is None and v3.attention == "mla"
    assert v3.quantization.weight_block_size == [128, 128]


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("glm-5", 744),
        ("deepseek-v3", 671),
        ("llama-3-8b", 8.03),
        ("llama-2-7b", 6.74),
        ("mixtral-8x7b", 46.7),
        ("qwen2.5-7b", 7.62),
        ("qwen3-30b-a3b", 30.5),
        ("gpt-oss-120b", 116.8),
        ("gpt2", 0.124),
    ],
)
def test_parameter_estimate_from_config_matches_published_sizes(name, billions):
    assert fp_of(name).params_b == pytest.approx(billions, rel=0.02)


def test_gpt_oss_sliding_layers_and_tied_embeddings():
    oss = fp_of("gpt-oss-120b")
    assert oss.sliding_window == 128 and oss.sliding_layers == 18
    assert fp_of("gpt2").tied_embeddings is True and fp_of("llama-3-8b").tied_embeddings is False


def test_multimodal_config_uses_the_text_model():
    outer = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24},
        "text_config": cfg("llama-3-8b") | {"architectures": None},
    }
    fp = mi.from_config(outer)
    assert fp.architecture == "Mistral3ForConditionalGeneration"
    assert (fp.layers, fp.kv_heads, fp.attention) == (32, 8, "gqa")


# ---------------------------------------------------------------------------------------------
# quantization


@pytest.mark.parametrize(
    ("qc", "method"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3"}, "fp8"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, "awq"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}, "gptq"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
        ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}},
            },
            "int4",
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes"),
    ],
)
def test_quantization_from_config(qc, method):
    assert mi.parse_quantization({"quantization_config": qc}).method == method


def test_nvfp4_from_hf_quant_config():
    hq = {
        "producer": {"name": "modelopt", "version": "0.37.0"},
        "quantization": {
            "quant_algo": "NVFP4",
            "kv_cache_quant_algo": "FP8",
            "group_size": 16,
            "exclude_modules": ["lm_head"],
        },
    }
    q = mi.parse_quantization({}, hq)
    assert (q.method, q.quant_method, q.group_size, q.kv_cache, q.source) == (
        "nvfp4",
        "modelopt",
        16,
        "fp8",
        "hf_quant_config.json",
    )
    assert mi.parse_quantization({}).method == "none"


# ---------------------------------------------------------------------------------------------
# KV bytes per token, against hand arithmetic


def test_kv_mha():
    # Llama-2-7B: 2 (K,V) x 32 layers x 32 heads x 128 dims x 2 bytes (bf16)
    assert mi.kv_cache_bytes(fp_of("llama-2-7b"), "bfloat16").alloc_bytes == 2 * 32 * 32 * 128 * 2 == 524288
    # GPT-2 in float32 by auto: 2 x 12 x 12 x 64 x 4
    c = mi.kv_cache_bytes(fp_of("gpt2"), "auto")
    assert c.kv_dtype == "float32" and c.alloc_bytes == 2 * 12 * 12 * 64 * 4 == 73728


def test_kv_gqa_and_tensor_parallel():
    fp = fp_of("llama-3-8b")
    assert mi.kv_cache_bytes(fp, "bfloat16").alloc_bytes == 2 * 32 * 8 * 128 * 2 == 131072
    assert mi.kv_cache_bytes(fp, "fp8_e4m3").alloc_bytes == 2 * 32 * 8 * 128 * 1 == 65536
    # TP 8: one KV head per GPU; TP 16: still one (replicated), never zero.
    assert mi.kv_cache_bytes(fp, "bfloat16", tp=8).alloc_bytes == 2 * 32 * 1 * 128 * 2 == 16384
    assert mi.kv_cache_bytes(fp, "bfloat16", tp=16).alloc_bytes == 16384
    # Qwen2.5-7B, fp8: 2 x 28 layers x 4 heads x 128 x 1 byte
    assert mi.kv_cache_bytes(fp_of("qwen2.5-7b"), "fp8").alloc_bytes == 28672
    # FP4: half a byte per element plus a one-byte scale per 16 elements: 2048 elems/layer -> 1024 + 128
    assert mi.kv_cache_bytes(fp, "fp4_e2m1").alloc_bytes == 32 * (2048 // 2 + 2048 // 16) == 36864


def test_kv_mla_is_one_latent_per_layer_on_every_rank():
    fp = fp_of("deepseek-v3")
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes
    assert mi.kv_cache_bytes(fp, "bfloat16").alloc_bytes == 61 * 576 * 2 == 70272
    assert mi.kv_cache_bytes(fp, "fp8_e4m3").alloc_bytes == 61 * 576 == 35136
    assert mi.kv_cache_bytes(fp, "bfloat16", tp=8).alloc_bytes == 70272  # not split by TP


def test_kv_dsa_glm5_layouts():
    fp = fp_of("glm-5")
    indexer = 128 + 128 // 128 * 4  # fp8 keys + one fp32 scale per 128
    bf16 = mi.kv_cache_bytes(fp, "bfloat16")
    assert bf16.alloc_bytes == bf16.budget_bytes == 78 * (576 * 2 + indexer) == 100152
    # SGLang, fp8, flashmla layout: allocates 512 fp8 + 4 fp32 scales + 64 bf16 rope = 656 B/layer,
    # but sizes the pool with the generic MLA cell of 576 B/layer.
    fp8 = mi.kv_cache_bytes(fp, "fp8_e4m3", engine="sglang")
    assert fp8.alloc_bytes == 78 * (512 + 16 + 128 + indexer) == 61464
    assert fp8.budget_bytes == 78 * (576 + indexer) == 55224
    # The seeds: SGLang allocated 425,664 tokens and reported 24.37 GB (GiB) per GPU.
    assert round(425664 * fp8.alloc_bytes / 2**30, 2) == 24.37
    # trtllm NSA backends store a plain 576-byte fp8 row; vLLM's fp8_ds_mla budgets the real 656.
    assert mi.kv_cache_bytes(fp, "fp8_e4m3", dsa_fp8_layout="trtllm").alloc_bytes == 55224
    exact = mi.kv_cache_bytes(fp, "fp8_e4m3", dsa_exact_cell=True)  # later SGLang sizes with the real row
    assert exact.budget_bytes == exact.alloc_bytes == 61464
    v = mi.kv_cache_bytes(fp, "fp8_e4m3", engine="vllm")
    assert v.alloc_bytes == v.budget_bytes == 61464


def test_kv_auto_follows_sglang_dsa_rule():
    glm = fp_of("glm-5")
    assert mi.resolve_kv_dtype(glm, "auto", "sglang", 12.0) == "fp8_e4m3"
    assert mi.resolve_kv_dtype(glm, "auto", "sglang", 9.0) == "bfloat16"
    assert mi.resolve_kv_dtype(fp_of("llama-3-8b"), "auto") == "bfloat16"
    with pytest.raises(ValueError):
        mi.kv_cache_bytes(glm, "int3")


# ---------------------------------------------------------------------------------------------
# safetensors headers


def write_by_hand(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A safetensors file written without bringup's helper: header JSON, then real data bytes."""
    header, off = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * off)


def test_header_bytes_by_dtype_exact(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg("gpt2")))
    write_by_hand(
        d / "model.safetensors",
        {
            "h.0.attn.c_attn.weight": ("F32", [768, 2304], 768 * 2304 * 4),
            "h.0.mlp.w.weight": ("U8", [768, 1536], 768 * 1536),
            "h.0.mlp.w.weight_scale": ("F8_E4M3", [768, 192], 768 * 192),
            "wte.weight": ("BF16", [50257, 768], 50257 * 768 * 2),
        },
    )
    fp = mi.fingerprint(d)
    w = fp.weights
    assert w.bytes_by_dtype == {
        "BF16": 50257 * 768 * 2,
        "F32": 768 * 2304 * 4,
        "U8": 768 * 1536,
        "F8_E4M3": 768 * 192,
    }
    assert w.total_bytes == sum(w.bytes_by_dtype.values()) and w.tensors == 4 and w.problems == []
    # parameters: scales are not parameters
    assert w.params == 768 * 2304 + 768 * 1536 + 50257 * 768
    h = mi.read_safetensors_header(d / "model.safetensors")
    assert h["wte.weight"]["shape"] == [50257, 768] and h["__metadata__"] == {"format": "pt"}


def llama3_bytes() -> int:
    h, kv, inter, vocab, layers = 4096, 1024, 14336, 128256, 32
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h
    return 2 * (2 * vocab * h + layers * per_layer + h)  # bf16


def test_sharded_llama3_header_only_folder(tmp_path):
    d = mi.write_header_only_model(tmp_path / "llama3", cfg("llama-3-8b"), shards=4)
    assert (d / "model.safetensors.index.json").exists()
    fp = mi.fingerprint(d)
    assert len(fp.weights.files) == 4 and fp.weights.problems == []
    assert fp.weights.total_bytes == fp.weights.bytes_by_dtype["BF16"] == llama3_bytes() == 16060522496
    assert fp.weights.params == llama3_bytes() // 2
    assert mi.facts(fp)["model.weights_gib"] == round(16060522496 / 2**30, 3)
    # the files are sparse: they claim 16 GB and hold headers
    sizes = sum((d / f).stat().st_size for f in fp.weights.files)
    assert sizes > 16e9 and sum((d / f).stat().st_blocks * 512 for f in fp.weights.files) < 50e6


def glm5_small(tmp_path: Path) -> Path:
    """GLM-5's shapes, 5 layers (3 dense + 2 MoE) + 1 MTP layer, NVFP4 like GLM-5-NVFP4."""
    d = mi.write_header_only_model(
        tmp_path / "glm5", cfg("glm-5") | {"num_hidden_layers": 5}, shards=2, quant="nvfp4"
    )
    (d / "hf_quant_config.json").write_text(
        json.dumps(
            {
                "producer": {"name": "modelopt"},
                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16},
            }
        )
    )
    return d


def test_glm5_nvfp4_inventory(tmp_path):
    d = glm5_small(tmp_path)
    fp = mi.fingerprint(d)
    w = fp.weights
    assert fp.quantization.method == "nvfp4" and fp.attention == "dsa"
    header = {}
    for f in w.files:
        h = mi.read_safetensors_header(d / f)
        h.pop("__header_bytes__"), h.pop("__metadata__", None)
        header.update(h)

    def nbytes(pred):
        return sum(t["data_offsets"][1] - t["data_offsets"][0] for n, t in header.items() if pred(n))

    assert w.total_bytes == nbytes(lambda n: True)
    assert set(w.bytes_by_dtype) == {"U8", "F8_E4M3", "BF16", "F32"}
    # MTP: the layer past num_hidden_layers is counted apart.
    assert w.mtp_bytes == nbytes(lambda n: n.startswith("model.layers.5.")) > 0
    # Replicated on every TP rank: MLA down-projections, the indexer, norms, the router.
    assert w.replicated_bytes == nbytes(
        lambda n: (
            not n.startswith("model.layers.5.")
            and any(
                k in n for k in ("q_a_proj", "kv_a_proj_with_mqa", "indexer", "norm", "mlp.gate.", "e_score")
            )
        )
    )
    assert w.expert_bytes == nbytes(lambda n: ".experts." in n and not n.startswith("model.layers.5."))
    per_gpu = mi.weights_per_gpu_bytes(fp, tp=8)
    assert per_gpu == int(w.sharded_bytes / 8 + w.replicated_bytes)
    # U8 holds two FP4 values: parameters count both.
    u8_elems = sum(
        t["shape"][0] * t["shape"][1]
        for n, t in header.items()
        if t["dtype"] == "U8" and not n.startswith("model.layers.5.")
    )
    assert w.params > 2 * u8_elems * 0.99


def test_h200_run_of_the_same_fingerprint_agrees(tmp_path):
    """The fingerprint made on the H200 (python3.12, its packages) equals the one made here."""
    there = json.loads((GPU_DATA / "model-glm5-5layers-nvfp4-header-only.json").read_text())
    here = mi.fingerprint(glm5_small(tmp_path))
    facts = mi.facts(here)
    # the H200 record predates the model's MLP width and vocabulary among the facts
    assert there["facts"] == {k: v for k, v in facts.items() if k in there["facts"]}
    assert (
        facts["model.intermediate_size"] == here.intermediate_size
        and facts["model.vocab_size"] == here.vocab_size
    )
    assert there["fingerprint"]["weights"]["bytes_by_dtype"] == here.weights.bytes_by_dtype
    llama = json.loads((GPU_DATA / "model-llama3-8b-header-only.json").read_text())
    assert llama["fingerprint"]["weights"]["total_bytes"] == llama3_bytes()


def test_broken_checkpoints_are_reported(tmp_path):
    d = mi.write_header_only_model(tmp_path / "m", cfg("llama-3-8b"), shards=2)
    first = d / "model-00001-of-00002.safetensors"
    with first.open("r+b") as f:
        f.truncate(first.stat().st_size - 1000)  # an interrupted download
    (d / "model-00002-of-00002.safetensors").unlink()
    w = mi.fingerprint(d).weights
    assert any("truncated" in p for p in w.problems)
    assert any("missing shard model-00002-of-00002.safetensors" in p for p in w.problems)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10) + b"not json!!")
    with pytest.raises(mi.SafetensorsError):
        mi.read_safetensors_header(bad)
    with pytest.raises(FileNotFoundError):
        mi.fingerprint(tmp_path)


def test_facts_keys():
    f = mi.facts(fp_of("glm-5"))
    assert f["model.architecture"] == "GlmMoeDsaForCausalLM" and f["model.model_type"] == "glm_moe_dsa"
    assert f["model.attention"] == "dsa" and f["model.moe"] is True and f["model.experts"] == 256
    assert f["model.quantization"] == "none" and f["model.head_dim"] == 256 and f["model.layers"] == 78
    assert f["model.weights_gib"] is None and f["model.params_b"] == pytest.approx(743.2, abs=0.5)


@pytest.mark.slow
def test_cli_model_json(tmp_path):
    d = glm5_small(tmp_path)
    res = CliRunner().invoke(app, ["model", str(d), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["facts"]["model.quantization"] == "nvfp4"
    assert out["kv_bytes_per_token"]["fp8_e4m3"] == 5 * 788
    res = CliRunner().invoke(app, ["model", str(d)])
    assert res.exit_code == 0 and "DSA" in res.output and "MTP" in res.output
