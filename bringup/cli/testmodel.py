"""``bringup testmodel``: write a tiny random-weight model that real engines can serve."""

from __future__ import annotations

from pathlib import Path

import typer

from bringup.cli import app


@app.command("testmodel")
def testmodel_cmd(
    out_dir: Path = typer.Argument(..., help="Folder to write the model into (created)."),
    head_dim: int = typer.Option(64, help="Attention head size. 64 serves on the vLLM CPU build; 16 does not."),
    layers: int = typer.Option(2, min=1, help="Decoder layers."),
    vocab: int = typer.Option(512, min=300, help="Tokenizer vocabulary size (byte-level BPE)."),
    heads: int = typer.Option(2, min=1, help="Attention heads."),
    kv_heads: int = typer.Option(0, min=0, help="KV heads (0: same as heads; fewer gives GQA)."),
    seed: int = typer.Option(0, help="Seed for the random weights."),
) -> None:
    """Write a small Llama-style model with a real tokenizer and a chat template."""
    if kv_heads and heads % kv_heads:
        raise typer.BadParameter(f"heads ({heads}) must be a multiple of kv-heads ({kv_heads})")
    from bringup.testmodel import TestModelSpec, write_test_model  # inside: `bringup --help` stays fast

    spec = TestModelSpec(head_dim=head_dim, layers=layers, vocab=vocab, heads=heads,
                         kv_heads=kv_heads or heads, seed=seed)
    path = write_test_model(out_dir, spec)
    typer.echo(f"wrote {path} (head_dim {head_dim}, {layers} layers, vocab {vocab}, seed {seed})")
