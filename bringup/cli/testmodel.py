"""``bringup testmodel``: write a tiny random-weight model that real engines can serve."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from bringup.cli import app
from bringup.cli._common import options, usage_error
from bringup.guard import ranges


def _refuse_to_overwrite(out_dir: Path, force: bool) -> None:
    """A user's folder is never replaced silently: its config.json and weights were overwritten;
    and a folder that cannot be made (under /proc, under a file) is said so before any work."""
    if os.path.lexists(out_dir) and not out_dir.is_dir():
        raise usage_error(
            f"{out_dir} is a file (or a link), not a folder: give a new folder for the test model"
        )
    if out_dir.is_dir() and not force and (held := sorted(p.name for p in out_dir.iterdir())):
        raise usage_error(
            f"{out_dir} is not empty ({', '.join(held[:5])}{' …' if len(held) > 5 else ''}): give a new "
            "folder, or --force to replace its files"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "a part of the path is a file" if isinstance(e, NotADirectoryError) else (e.strerror or str(e))
        raise usage_error(f"cannot make the folder {out_dir}: {why}; give a folder you can write") from None


class TestmodelOptions:
    """`bringup testmodel`'s options."""

    out_dir: Annotated[Path, typer.Argument(help="Folder to write the model into (created).")]
    head_dim: Annotated[
        int,
        typer.Option(
            help="Attention head size. 64 serves on the vLLM CPU build; 16 does not.",
            **ranges.HEAD_DIM.option(),
        ),
    ] = 64
    layers: Annotated[int, typer.Option(help="Decoder layers.", **ranges.LAYERS.option())] = 2
    vocab: Annotated[
        int, typer.Option(help="Tokenizer vocabulary size (byte-level BPE).", **ranges.VOCAB.option())
    ] = 512
    heads: Annotated[int, typer.Option(help="Attention heads.", **ranges.HEADS.option())] = 2
    kv_heads: Annotated[
        int, typer.Option(help="KV heads (0: same as heads; fewer gives GQA).", **ranges.KV_HEADS.option())
    ] = 0
    seed: Annotated[int, typer.Option(help="Seed for the random weights.", **ranges.SEED.option())] = 0
    preset: Annotated[
        str,
        typer.Option(
            help="What to write: random (tiny random weights), known (trained: known "
            "answers), fp16-overflow (wrong in float16, right in bf16/fp32), llama-8b (8 B random "
            "weights for a GPU)."
        ),
    ] = "random"
    shard_gib: Annotated[
        float, typer.Option(help="llama-8b: the largest safetensors shard, GiB.", **ranges.SHARD_GIB.option())
    ] = 4.0
    force: Annotated[
        bool, typer.Option("--force", help="Write into a folder that is not empty (replacing its files).")
    ] = False


@app.command("testmodel")
@options(TestmodelOptions)
def testmodel_cmd(o: TestmodelOptions) -> None:
    """Write a small Llama-style model with a real tokenizer and a chat template (or a --preset)."""
    # inside: `bringup --help` stays fast
    from bringup.testmodel.tiny import PRESET_HELP, TestModelSpec, write_preset, write_test_model

    _refuse_to_overwrite(o.out_dir, o.force)
    if o.preset not in PRESET_HELP:
        raise typer.BadParameter(f"--preset {o.preset!r}: use one of {', '.join(PRESET_HELP)}")
    if o.kv_heads and o.heads % o.kv_heads:
        raise typer.BadParameter(f"heads ({o.heads}) must be a multiple of kv-heads ({o.kv_heads})")
    spec = TestModelSpec(
        head_dim=o.head_dim,
        layers=o.layers,
        vocab=o.vocab,
        heads=o.heads,
        kv_heads=o.kv_heads or o.heads,
        seed=o.seed,
    )
    if o.preset != "random":
        path = write_preset(o.out_dir, o.preset, spec, shard_gib=o.shard_gib)
        typer.echo(f"wrote {path} (preset {o.preset}, seed {o.seed})")
        return
    path = write_test_model(o.out_dir, spec)
    typer.echo(f"wrote {path} (head_dim {o.head_dim}, {o.layers} layers, vocab {o.vocab}, seed {o.seed})")
