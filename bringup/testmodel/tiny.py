"""Tiny random-weight Llama-style models with a real BPE tokenizer and a chat template.

Written with numpy and safetensors only (no torch import), so making one takes well under a
second. Loadable by transformers (LlamaForCausalLM) and by vLLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bringup.guard import files
from bringup.guard.hostproc import guest

# Text the tokenizer is trained on: enough variety for a 512-token byte-level BPE.
_CORPUS = """
The quick brown fox jumps over the lazy dog. What is two plus two? Two plus two is four.
A server answers requests. The engine loads weights, allocates the cache and captures graphs.
Hello, how are you today? I am fine, thank you. Please answer briefly and clearly.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000. Colors: red green blue yellow black white.
Once upon a time there was a small model that wanted to speak. It learned words, then sentences.
GPUs have memory, compute capability and shared memory per block. Attention, decode, prefill.
The capital of France is Paris. The sun rises in the east. Water boils at one hundred degrees.
user assistant system: you are a helpful assistant. Say hello in one sentence.
""".strip()

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]


@dataclass(frozen=True)
class TestModelSpec:
    head_dim: int = 64
    layers: int = 2
    vocab: int = 512
    heads: int = 2
    kv_heads: int = 2
    intermediate: int = 256
    max_positions: int = 2048
    seed: int = 0
    corpus: str = ""  # more tokenizer training text (a synthetic language's words)

    @property
    def hidden(self) -> int:
        return self.head_dim * self.heads


def _train_tokenizer(vocab: int, extra: str = ""):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4 + ([extra] if extra else []), trainer=trainer)
    return tok


def _weights(spec: TestModelSpec, vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)

    def w(*shape: int) -> np.ndarray:
        # Scaled so activations stay finite through a few layers in fp32/bf16.
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    h, kvh, hd = spec.hidden, spec.kv_heads, spec.head_dim
    t: dict[str, np.ndarray] = {"model.embed_tokens.weight": w(vocab, h)}
    for i in range(spec.layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = w(spec.heads * hd, h)
        t[p + "self_attn.k_proj.weight"] = w(kvh * hd, h)
        t[p + "self_attn.v_proj.weight"] = w(kvh * hd, h)
        t[p + "self_attn.o_proj.weight"] = w(h, spec.heads * hd)
        t[p + "mlp.gate_proj.weight"] = w(spec.intermediate, h)
        t[p + "mlp.up_proj.weight"] = w(spec.intermediate, h)
        t[p + "mlp.down_proj.weight"] = w(h, spec.intermediate)
        t[p + "input_layernorm.weight"] = np.ones(h, dtype=np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, dtype=np.float32)
    t["model.norm.weight"] = np.ones(h, dtype=np.float32)
    t["lm_head.weight"] = w(vocab, h)
    return t


@guest
def write_test_model(out_dir: Path, spec: TestModelSpec = TestModelSpec()) -> Path:
    """Write config, weights, tokenizer and chat template into out_dir; return it."""
    from safetensors.numpy import save

    if spec.head_dim <= 0 or spec.layers <= 0 or spec.heads <= 0:
        raise ValueError("head_dim, layers and heads must be positive")
    if spec.vocab < 300:
        raise ValueError(f"vocab {spec.vocab} is too small: a byte-level BPE needs at least 300 tokens")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer(spec.vocab, spec.corpus)
    vocab = tok.get_vocab_size()
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": vocab,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "attention_bias": False,
        "mlp_bias": False,
    }
    files.write_text(out_dir / "config.json", json.dumps(config, indent=2))
    files.write_text(
        out_dir / "generation_config.json",
        json.dumps({"bos_token_id": bos, "eos_token_id": eos, "do_sample": False}, indent=2),
    )
    # (bytes written by bringup's own writer: never through a link left in a --force'd folder)
    files.write_bytes(out_dir / "model.safetensors", save(_weights(spec, vocab), metadata={"format": "pt"}))
    files.write_text(out_dir / "tokenizer.json", tok.to_str())
    files.write_text(
        out_dir / "tokenizer_config.json",
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "pad_token": "</s>",
                "model_max_length": spec.max_positions,
                "add_bos_token": False,
                "clean_up_tokenization_spaces": False,
                "chat_template": CHAT_TEMPLATE,
            },
            indent=2,
        ),
    )
    files.write_text(
        out_dir / "special_tokens_map.json",
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}),
    )
    return out_dir


PRESET_HELP = {
    "random": "random weights (the default; --head-dim, --layers, --heads, --vocab shape it and the known models)",
    "known": "trained in about a minute on CPU to reverse letters ('rev a b c' -> 'c b a'); "
    "writes bringup_answers.json, which bringup run/trial check",
    "fp16-overflow": "the 'known' model with MLPs rescaled by powers of two: the same answers in "
    "float32/bfloat16, inf/NaN activations in float16 (no error line)",
    "llama-8b": "Llama-3-8B shapes with random bf16 weights in safetensors shards (16 GB; a GPU machine)",
}


@guest
def write_preset(
    out_dir: Path,
    preset: str,
    spec: TestModelSpec = TestModelSpec(),
    overrides: dict | None = None,
    shard_gib: float = 4.0,
) -> Path:
    """Write a preset model (PRESET_HELP). `overrides` changes the llama-8b config (tests)."""
    if preset == "random":
        return write_test_model(out_dir, spec)
    if preset in ("known", "fp16-overflow"):
        from bringup.testmodel.train import scale_for_fp16_overflow, synthetic_corpus, train_known

        out = write_test_model(out_dir, replace(spec, corpus=synthetic_corpus()))
        train_known(out, seed=spec.seed)
        if preset == "fp16-overflow":
            scale_for_fp16_overflow(out)
        return out
    from bringup.testmodel.shards import PRESETS, write_sharded_weights

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use one of {', '.join(PRESET_HELP)}")
    cfg_over = {**PRESETS[preset], **(overrides or {})}
    heads = cfg_over["num_attention_heads"]
    small = TestModelSpec(
        head_dim=cfg_over["hidden_size"] // heads,
        layers=1,
        heads=1,
        kv_heads=1,
        intermediate=8,
        max_positions=cfg_over["max_position_embeddings"],
        vocab=spec.vocab,
    )
    out = write_test_model(out_dir, small)  # tokenizer, chat template, config skeleton
    (out / "model.safetensors").unlink()
    config = json.loads((out / "config.json").read_text())
    config.update(cfg_over)
    config["head_dim"] = cfg_over["hidden_size"] // heads
    config["torch_dtype"] = "bfloat16"
    files.write_text(out / "config.json", json.dumps(config, indent=2))
    write_sharded_weights(out, config, shard_gib=shard_gib, seed=spec.seed)
    return out
