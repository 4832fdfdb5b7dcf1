"""bringup testmodel presets: a trained model with known answers, an fp16-overflow model, llama-8b shapes."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
import torch
from conftest import bringup
from safetensors import safe_open
from transformers import AutoTokenizer, LlamaForCausalLM

from bringup.engines.targets import model_answers
from bringup.testmodel.shards import PRESETS, tensor_shapes
from bringup.testmodel.tiny import TestModelSpec as Spec
from bringup.testmodel.tiny import write_preset
from bringup.testmodel.train import KNOWN, greedy_chat, scale_for_fp16_overflow
from bringup.verify.reference import ServerOutput, compare, compute_reference, tolerance


@pytest.fixture(scope="session")
def known_model(tmp_path_factory) -> Path:
    return write_preset(tmp_path_factory.mktemp("models") / "known", "known")


@pytest.fixture(scope="session")
def overflow_model(known_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("models") / "fp16-overflow"
    shutil.copytree(known_model, out)
    assert scale_for_fp16_overflow(out) >= 8
    return out


def test_known_model_answers_what_its_file_says(known_model):
    answers = json.loads((known_model / "bringup_answers.json").read_text())
    assert answers == dict(KNOWN)
    assert {(a.prompt, a.expected) for a in model_answers(known_model)} == set(KNOWN)
    tok = AutoTokenizer.from_pretrained(str(known_model))
    m = LlamaForCausalLM.from_pretrained(str(known_model), dtype=torch.float32).eval()
    for prompt, expected in answers.items():
        assert greedy_chat(m, tok, prompt) == expected
    # Through the chat template as a server applies it, not only our own rendering of it.
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "rev g a d"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    out = m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=tok.eos_token_id)
    assert tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip() == "d a g"


def _logits(model: Path, dtype: torch.dtype) -> torch.Tensor:
    tok = AutoTokenizer.from_pretrained(str(model))
    m = LlamaForCausalLM.from_pretrained(str(model), dtype=dtype).eval()
    ids = tok(
        ["<|user|>\nrev a b c</s>\n<|assistant|>\n"], add_special_tokens=False, return_tensors="pt"
    ).input_ids
    with torch.no_grad():
        return m(ids).logits[0].float()


def test_fp16_overflows_while_bf16_agrees_with_fp32(known_model, overflow_model):
    f32, bf16, f16 = (_logits(overflow_model, d) for d in (torch.float32, torch.bfloat16, torch.float16))
    assert torch.allclose(f32, _logits(known_model, torch.float32), atol=1e-3)  # the same function in fp32
    assert torch.isfinite(f32).all() and torch.isfinite(bf16).all()
    assert (bf16.argmax(-1) == f32.argmax(-1)).float().mean() > 0.9 and (bf16 - f32).abs().max() < 0.5
    assert not torch.isfinite(f16).all()  # inf/NaN, and nothing raised
    # The known model itself is fine in fp16: the overflow is the preset's doing.
    assert torch.isfinite(_logits(known_model, torch.float16)).all()
    # The float32 reference accepts the model's bf16 greedy output and rejects the fp16 one.
    ref = compute_reference(str(overflow_model), tokens=8)

    def served(dtype: str) -> list[ServerOutput]:
        r = compute_reference(str(overflow_model), tokens=8, dtype=dtype)
        return [
            ServerOutput(p.text, [s.token for s in p.steps], [s.logprob for s in p.steps], "length")
            for p in r.prompts
        ]

    assert compare(ref, served("bfloat16"), tolerance("bfloat16")).passed
    v = compare(ref, served("float16"), tolerance("float16"))
    assert not v.passed and v.kind == "nan", v.detail


def test_llama_8b_preset_shapes_and_shards(tmp_path):
    cfg = PRESETS["llama-8b"]
    assert (
        cfg["hidden_size"],
        cfg["num_hidden_layers"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["intermediate_size"],
        cfg["vocab_size"],
    ) == (4096, 32, 32, 8, 14336, 128256)
    params = sum(int(torch.tensor(s).prod()) for _, s in tensor_shapes(cfg))
    assert 8.0e9 < params < 8.1e9  # Llama-3-8B: 8.03 B
    small = {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "intermediate_size": 256,
        "vocab_size": 1024,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    out = write_preset(tmp_path / "m", "llama-8b", Spec(), overrides=small, shard_gib=0.0005)
    config = json.loads((out / "config.json").read_text())
    assert (
        config["num_key_value_heads"] == 2
        and config["torch_dtype"] == "bfloat16"
        and config["head_dim"] == 32
    )
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted({f for f in index["weight_map"].values()})
    assert len(shards) > 1 and all((out / f).is_file() for f in shards)
    assert set(index["weight_map"]) == {n for n, _ in tensor_shapes(config)}
    total = 0
    for f in shards:
        with open(out / f, "rb") as fh:
            (hlen,) = struct.unpack("<Q", fh.read(8))
        total += (out / f).stat().st_size - 8 - hlen
        with safe_open(str(out / f), "pt") as st:
            for name in st.keys():
                assert index["weight_map"][name] == f
                t = st.get_tensor(name)
                assert t.dtype == torch.bfloat16 and tuple(t.shape) == dict(tensor_shapes(config))[name]
                if "norm" not in name:
                    assert 0.01 < float(t.float().std()) < 0.03
    assert total == index["metadata"]["total_size"]
    m = LlamaForCausalLM.from_pretrained(str(out))  # transformers loads the shards by the index
    assert sum(p.numel() for p in m.parameters()) == sum(
        int(torch.tensor(s).prod()) for _, s in tensor_shapes(config)
    )


def test_preset_listing_and_bad_preset(tmp_path):
    rc, _, out, _ = bringup("testmodel", "--help", env={"COLUMNS": "200"})
    assert rc == 0 and all(p in out for p in ("random", "known", "fp16-overflow", "llama-8b"))
    rc, _, _, err = bringup("testmodel", str(tmp_path / "x"), "--preset", "nope")
    assert rc == 2 and "nope" in err
    rc, _, out, _ = bringup("testmodel", str(tmp_path / "d"))  # the default still writes a random model
    assert rc == 0 and (tmp_path / "d" / "model.safetensors").is_file()
