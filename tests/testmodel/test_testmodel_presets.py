"""bringup testmodel presets: a trained model with known answers, an fp16-overflow model, llama-8b shapes.

PyTorch and transformers are imported inside the tests that need them (seconds to import): the
fast tier collects this module for the CLI test at the end and should not pay for them. The known
model is trained once a session (conftest.py), so the tests that read it are `slow`.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from bringup.engines.targets import model_answers
from bringup.testmodel.shards import PRESETS, tensor_shapes
from bringup.testmodel.tiny import TestModelSpec as Spec
from bringup.testmodel.tiny import write_preset
from bringup.testmodel.train import KNOWN, greedy_chat
from bringup.verify.reference import ServerOutput, compare, compute_reference, tolerance
from tests.conftest import bringup


@pytest.mark.slow
def test_known_model_answers_what_its_file_says(known_model):
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

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


def _logits(model: Path, dtype):
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(str(model))
    m = LlamaForCausalLM.from_pretrained(str(model), dtype=dtype).eval()
    ids = tok(
        ["<|user|>\nrev a b c</s>\n<|assistant|>\n"], add_special_tokens=False, return_tensors="pt"
    ).input_ids
    with torch.no_grad():
        return m(ids).logits[0].float()


@pytest.mark.slow
def test_fp16_overflows_while_bf16_agrees_with_fp32(known_model, overflow_model):
    import torch

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


@pytest.mark.slow
def test_fp16_overflow_preset_is_the_known_model_with_its_mlps_rescaled(tmp_path, monkeypatch):
    """write_preset's fp16-overflow branch (the session's overflow_model is made from the known
    model directly): the same trained weights, up_proj x 2^k and down_proj x 2^-k. Training is
    stubbed out here; the trained model's behaviour is the test above's."""
    from safetensors.numpy import load_file

    import bringup.testmodel.train as train

    monkeypatch.setattr(train, "train_known", lambda out, seed=0: {})
    plain = load_file(str(write_preset(tmp_path / "known", "known") / "model.safetensors"))
    scaled = load_file(str(write_preset(tmp_path / "over", "fp16-overflow") / "model.safetensors"))
    assert set(plain) == set(scaled)
    ups = [n for n in plain if n.endswith("mlp.up_proj.weight")]
    assert ups
    k = float(scaled[ups[0]].flat[0] / plain[ups[0]].flat[0])
    assert k >= 2**8 and k == 2.0 ** round(math.log2(k))
    for name, t in plain.items():
        factor = k if name in ups else 1 / k if name.endswith("mlp.down_proj.weight") else 1.0
        assert (scaled[name] == t * factor).all(), name


@pytest.mark.slow
def test_llama_8b_preset_shapes_and_shards(tmp_path):
    import torch
    from safetensors import safe_open
    from transformers import LlamaForCausalLM

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
