"""Write a random-weight Llama-3-8B-shaped model for a real GPU bring-up (run on the GPU machine).

The tokenizer, chat template and known config keys come from `bringup testmodel` (a small
byte-level BPE of 512 tokens); the layers are Llama-3-8B's (hidden 4096, 32 heads, 8 KV heads,
head 128, intermediate 14336). The vocabulary stays the tokenizer's, so that every generated
token decodes to text the probes can compare (a 128k vocabulary would decode mostly to nothing);
37 layers instead of 32 make up the embedding's share: 8.07 B parameters, 16 GB in bf16. Weights
are drawn on the GPU one tensor at a time and written in shards with an index, so the host never
holds the model. Usage: python3 tests/data/gpu/make_random_llama.py OUT_DIR [--layers N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from bringup.testmodel.tiny import write_test_model

SHAPES = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}


def tensors(cfg: dict):
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    yield "model.embed_tokens.weight", (v, h)
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        yield p + "self_attn.q_proj.weight", (h, h)
        yield p + "self_attn.k_proj.weight", (kv, h)
        yield p + "self_attn.v_proj.weight", (kv, h)
        yield p + "self_attn.o_proj.weight", (h, h)
        yield p + "mlp.gate_proj.weight", (i, h)
        yield p + "mlp.up_proj.weight", (i, h)
        yield p + "mlp.down_proj.weight", (h, i)
        yield p + "input_layernorm.weight", (h,)
        yield p + "post_attention_layernorm.weight", (h,)
    yield "model.norm.weight", (h,)
    yield "lm_head.weight", (v, h)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=37)
    ap.add_argument("--shard-gb", type=float, default=4.0)
    args = ap.parse_args()
    write_test_model(args.out)  # tokenizer, chat template, generation config
    for f in args.out.glob("*.safetensors"):
        f.unlink()
    cfg = json.loads((args.out / "config.json").read_text()) | SHAPES | {"num_hidden_layers": args.layers}
    (args.out / "config.json").write_text(json.dumps(cfg, indent=2))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev).manual_seed(0)
    shard: dict[str, torch.Tensor] = {}
    size, n, index, total = 0, 0, {}, 0
    names = []

    def flush() -> None:
        nonlocal shard, size, n
        if shard:
            n += 1
            name = f"model-{n:05d}.safetensors"
            save_file({k: t.cpu() for k, t in shard.items()}, str(args.out / name), metadata={"format": "pt"})
            names.append(name)
            for k in shard:
                index[k] = name
            shard, size = {}, 0

    for name, shape in tensors(cfg):
        if len(shape) == 1:
            t = torch.ones(shape, dtype=torch.bfloat16, device=dev)
        else:
            t = (torch.randn(shape, generator=gen, device=dev, dtype=torch.float32) * 0.02).to(torch.bfloat16)
        shard[name] = t
        size += t.numel() * 2
        total += t.numel()
        if size >= args.shard_gb * 1e9:
            flush()
    flush()
    (args.out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total * 2}, "weight_map": index}, indent=2)
    )
    print(json.dumps({"parameters": total, "bytes": total * 2, "shards": len(names)}))


if __name__ == "__main__":
    main()
