"""Random bf16 weights at real model sizes, written tensor by tensor into safetensors shards.

For bring-ups on a GPU machine (issue 11): an 8B-parameter Llama-shaped model in a few minutes
without holding more than one tensor in memory. The safetensors format (8-byte header length,
JSON header, raw little-endian data) is written directly, so each tensor is generated, written
and dropped; torch makes the random numbers when it is installed (fast), numpy otherwise.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bringup.guard import files

PRESETS: dict[str, dict[str, int]] = {
    # Llama-3-8B shapes (meta-llama/Meta-Llama-3-8B config.json). The tokenizer stays the small
    # byte-level BPE of bringup testmodel (its trainer cannot reach 128k tokens on a small corpus):
    # vocab_size keeps the real 128256 rows, the ids past the tokenizer's are never produced by it.
    "llama-8b": {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
    },
}


def tensor_shapes(cfg: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every Llama tensor's name and shape, in file order."""
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (v, h))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (q, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
            (p + "self_attn.o_proj.weight", (h, q)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (inter, h)),
            (p + "mlp.up_proj.weight", (inter, h)),
            (p + "mlp.down_proj.weight", (h, inter)),
        ]
    out += [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]
    return out


def _bf16_bytes(name: str, shape: tuple[int, ...], seed: int) -> bytes:
    """One tensor as bf16 bytes: ones for norms, N(0, 0.02) otherwise."""
    n = int(np.prod(shape))
    try:
        import torch

        g = torch.Generator().manual_seed(seed)
        t = (
            torch.ones(n, dtype=torch.bfloat16)
            if name.endswith("norm.weight")
            else (torch.randn(n, generator=g, dtype=torch.float32) * 0.02).to(torch.bfloat16)
        )
        return t.view(torch.int16).numpy().tobytes()
    except ImportError:
        rng = np.random.default_rng(seed)
        a = (
            np.ones(n, np.float32)
            if name.endswith("norm.weight")
            else (rng.standard_normal(n, dtype=np.float32) * 0.02)
        )
        return (a.view(np.uint32) >> 16).astype("<u2").tobytes()  # bf16: the top half of fp32


def _shards(
    shapes: list[tuple[str, tuple[int, ...]]], shard_bytes: int
) -> Iterator[list[tuple[str, tuple[int, ...]]]]:
    cur: list[tuple[str, tuple[int, ...]]] = []
    size = 0
    for name, shape in shapes:
        b = int(np.prod(shape)) * 2
        if cur and size + b > shard_bytes:
            yield cur
            cur, size = [], 0
        cur.append((name, shape))
        size += b
    if cur:
        yield cur


def write_sharded_weights(out_dir: Path, cfg: dict, shard_gib: float = 4.0, seed: int = 0) -> Path:
    """Write model-0000i-of-0000n.safetensors and model.safetensors.index.json; return the index."""
    shapes = tensor_shapes(cfg)
    groups = list(_shards(shapes, int(shard_gib * 2**30)))
    weight_map: dict[str, str] = {}
    order = {name: i for i, (name, _) in enumerate(shapes)}
    total = 0
    for si, group in enumerate(groups):
        fname = f"model-{si + 1:05d}-of-{len(groups):05d}.safetensors"
        header: dict = {"__metadata__": {"format": "pt"}}
        off = 0
        for name, shape in group:
            b = int(np.prod(shape)) * 2
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + b]}
            off += b
            weight_map[name] = fname
        hb = json.dumps(header, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)  # the data starts 8-aligned
        with files.open_write(out_dir / fname, text=False) as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            for name, shape in group:
                f.write(_bf16_bytes(name, shape, seed * 100003 + order[name]))
        total += off
    index = out_dir / "model.safetensors.index.json"
    files.write_text(
        index, json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1)
    )
    return index
