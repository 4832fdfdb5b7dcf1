"""``bringup reference``: record a model's own greedy output, for machines where it does not fit."""

from __future__ import annotations

from pathlib import Path

import typer

from bringup.cli import app
from bringup.cli._common import err_console, refuse_damaged_model, shown, usage_error
from bringup.guard import ranges


@app.command("reference")
def reference_cmd(
    model: str = typer.Argument(..., help="Model folder or hub id."),
    out: Path = typer.Option(
        None, "-o", "--out", help="Reference file to write (default MODEL-NAME.reference.json)."
    ),
    tokens: int = typer.Option(16, help="Greedy tokens per prompt.", **ranges.REFERENCE_TOKENS.option()),
    device: str = typer.Option("cpu", help="Torch device for the float32 forward (cpu, cuda, cuda:1)."),
) -> None:
    """Compute greedy tokens and top logprobs on the reference prompts with transformers in float32,
    and write them with the model's identity (config and tokenizer hashes). `bringup run/trial
    --reference FILE` compares a server's output with it."""
    from bringup.verify.reference import ReferenceError, compute_reference, model_folder  # lazy: fast --help

    if model_folder(model) is None and not Path(model).exists() and "/" not in model:
        raise usage_error(f"model {model!r} is not a folder here and not a hub id (org/name)")
    refuse_damaged_model(model)
    out = out or Path(f"{Path(model).name or 'model'}.reference.json")
    try:
        ref = compute_reference(model, tokens=tokens, device=device)
    except ReferenceError as e:
        raise usage_error(str(e)) from None
    except ImportError as e:
        raise usage_error(f"computing a reference needs torch and transformers: {e}") from None
    except (OSError, ValueError) as e:  # a hub id not reachable from here, a folder transformers cannot load
        raise usage_error(f"cannot load {model} with transformers: {str(e).splitlines()[0][:300]}") from None
    ref.save(out)
    err_console.print(
        f"wrote {shown(out)}: {len(ref.prompts)} prompts x {tokens} tokens, {shown(ref.identity.short())}",
        markup=False,
    )
