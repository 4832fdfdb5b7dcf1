"""``bringup testmodel``: write a tiny random-weight model that real engines can serve."""

from __future__ import annotations

from pathlib import Path

import typer

from bringup.cli import app
from bringup.cli._common import finite, usage_error


def _refuse_to_overwrite(out_dir: Path, force: bool) -> None:
    """A user's folder is never replaced silently: its config.json and weights were overwritten."""
    if out_dir.exists() and not out_dir.is_dir():
        raise usage_error(f"{out_dir} is a file, not a folder: give a new folder for the test model")
    if out_dir.is_dir() and not force and (held := sorted(p.name for p in out_dir.iterdir())):
        raise usage_error(
            f"{out_dir} is not empty ({', '.join(held[:5])}{' …' if len(held) > 5 else ''}): give a new "
            "folder, or --force to replace its files"
        )


@app.command("testmodel")
def testmodel_cmd(
    out_dir: Path = typer.Argument(..., help="Folder to write the model into (created)."),
    head_dim: int = typer.Option(
        64, help="Attention head size. 64 serves on the vLLM CPU build; 16 does not."
    ),
    layers: int = typer.Option(2, min=1, help="Decoder layers."),
    vocab: int = typer.Option(512, min=300, help="Tokenizer vocabulary size (byte-level BPE)."),
    heads: int = typer.Option(2, min=1, help="Attention heads."),
    kv_heads: int = typer.Option(0, min=0, help="KV heads (0: same as heads; fewer gives GQA)."),
    seed: int = typer.Option(0, help="Seed for the random weights."),
    preset: str = typer.Option(
        "random",
        help="What to write: random (tiny random weights), known (trained: known "
        "answers), fp16-overflow (wrong in float16, right in bf16/fp32), llama-8b (8 B random "
        "weights for a GPU). docs/probes.md says more.",
    ),
    shard_gib: float = typer.Option(
        4.0, min=0.001, help="llama-8b: the largest safetensors shard, GiB.", callback=finite
    ),
    force: bool = typer.Option(
        False, "--force", help="Write into a folder that is not empty (replacing its files)."
    ),
) -> None:
    """Write a small Llama-style model with a real tokenizer and a chat template (or a --preset)."""
    # inside: `bringup --help` stays fast
    from bringup.testmodel.tiny import PRESET_HELP, TestModelSpec, write_preset, write_test_model

    _refuse_to_overwrite(out_dir, force)
    if preset not in PRESET_HELP:
        raise typer.BadParameter(f"--preset {preset!r}: use one of {', '.join(PRESET_HELP)}")
    if kv_heads and heads % kv_heads:
        raise typer.BadParameter(f"heads ({heads}) must be a multiple of kv-heads ({kv_heads})")
    spec = TestModelSpec(
        head_dim=head_dim, layers=layers, vocab=vocab, heads=heads, kv_heads=kv_heads or heads, seed=seed
    )
    if preset != "random":
        path = write_preset(out_dir, preset, spec, shard_gib=shard_gib)
        typer.echo(f"wrote {path} (preset {preset}, seed {seed})")
        return
    path = write_test_model(out_dir, spec)
    typer.echo(f"wrote {path} (head_dim {head_dim}, {layers} layers, vocab {vocab}, seed {seed})")
