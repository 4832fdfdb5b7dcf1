"""``bringup explain``: classify a saved server log offline."""

from __future__ import annotations

from pathlib import Path

import typer

from bringup.cli import app
from bringup.cli._common import print_json, render_outcome, usage_error


@app.command("explain")
def explain_cmd(
    logfile: Path = typer.Argument(..., help="A server log (bringup's server.log or any saved engine log)."),
    engine: str = typer.Option(None, help="vllm, sglang or transformers (default: guessed from the log)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Say why a launch failed: failure class, phase, root-cause evidence and a hint."""
    from bringup.engines.base import engine_names

    if engine and engine not in engine_names():
        raise usage_error(f"unknown engine {engine!r}: use one of {', '.join(engine_names())}")
    if not logfile.is_file():
        raise usage_error(f"{logfile} is not a file: give the path of a saved server log")
    from bringup.engines.explain import (
        explain_file,  # heavy imports inside the command: `bringup --help` stays fast
    )

    outcome = explain_file(logfile, engine)
    if json_out:
        keep = (
            "status",
            "failure_class",
            "phase",
            "evidence",
            "hint",
            "implicates",
            "implicated_levels",
            "root_exception",
            "signature",
            "requested",
            "effective",
            "overrides",
            "log_path",
            "engine",
        )
        print_json({k: v for k, v in outcome.model_dump().items() if k in keep})
    else:
        render_outcome(outcome)
    raise typer.Exit(0 if outcome.status == "works" else 1)
