"""``bringup env``: the environment variables an engine version reads, and those a log implicates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import options, out_console, print_json, usage_error
from bringup.guard import ranges


def _describe(reg, name: str, suggested: list[str]) -> dict:
    from bringup.env.registry import levels

    var = reg.get(name)
    row = {"name": name, "status": reg.status(name), "explain": reg.explain(name)}
    if var is not None:
        row.update(
            {
                "type": var.type,
                "default": var.default_text if not var.default_known else var.default,
                "choices": list(var.choices),
                "description": var.description,
                "section": var.section,
                "levels": levels(var, suggested),
                "owner": var.owner,
            }
        )
    if reg.replacement(name):
        row["replacement"] = reg.replacement(name)
    return row


class EnvOptions:
    """`bringup env`'s options."""

    names: Annotated[
        list[str] | None, typer.Argument(help="Variables to describe (default: those of your environment).")
    ] = None
    engine: Annotated[str, typer.Option(help="vllm or sglang.")] = "vllm"
    python: Annotated[str | None, typer.Option(help="Python interpreter of the engine's environment.")] = None
    version: Annotated[
        str | None,
        typer.Option(help="An engine version (a bundled snapshot when it is not the installed one)."),
    ] = None
    log: Annotated[
        Path | None,
        typer.Option(help="A server log: the variables it names, and those its failure implicates."),
    ] = None
    device: Annotated[
        str | None, typer.Option(help="cuda or cpu: leave out other platforms' variables from the ranking.")
    ] = None
    top: Annotated[
        int, typer.Option(help="How many ranked variables to show for --log.", **ranges.TOP.option())
    ] = 10
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False


@app.command("env")
@options(EnvOptions)
def env_cmd(o: EnvOptions) -> None:
    """Describe environment variables as this engine version reads them (type, default, choices,
    levels), which it ignores, and, with --log, which ones a failure implicates."""
    # heavy imports inside the command: `bringup --help` stays fast
    from bringup.core.datafiles import KnowledgeFileError
    from bringup.env.registry import load_registry, suggested_values, user_env

    try:
        reg = load_registry(o.engine, python=o.python, version=o.version)
    except KnowledgeFileError as e:
        raise usage_error(str(e)) from None
    head = {
        "engine": o.engine,
        "version": reg.version,
        "origin": reg.origin,
        "location": reg.location,
        "variables": len(reg),
        "deprecated": len(reg.deprecated),
    }
    found, ranked = _from_log(reg, o, head) if o.log is not None else ([], [])
    rows = [_describe(reg, n, suggested_values(found, n)) for n in (o.names or [])]
    mine = user_env() if not o.names else {}
    if o.json_out:
        print_json(_as_json(reg, head, rows, mine, found, ranked))
        raise typer.Exit(0)
    out_console.print(
        f"[bold]{o.engine} {reg.version or '(version unknown)'}[/]: {len(reg)} variables "
        f"({reg.origin}{': ' + reg.location if reg.location else ''})"
    )
    for row in rows:
        out_console.print(f"\n[bold]{row['name']}[/] ({row['status']}): {row['explain']}")
        for key in ("type", "default", "choices", "levels", "replacement", "section", "description"):
            if row.get(key) not in (None, "", []):
                out_console.print(f"  {key}: {row[key]}")
    _print_tables(reg, head, mine, found, ranked)
    raise typer.Exit(0)


def _from_log(reg: Any, o: EnvOptions, head: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The variables a server log names, and those its failure implicates, ranked (its failure
    class into ``head``)."""
    from bringup.engines.explain import explain_file
    from bringup.env.registry import common_vars, mentions_in_lines, rank

    log = o.log
    assert log is not None
    if not log.is_file():
        raise usage_error(f"{log} is not a file: give the path of a saved server log")
    lines = log.read_text(errors="replace").splitlines()
    found = mentions_in_lines(lines, list(reg.variables))
    outcome = explain_file(log, o.engine)
    pool = list(reg.variables.values()) + [v for n, v in common_vars().items() if n not in reg.variables]
    ranked = rank(pool, outcome, known=list(reg.variables), limit=o.top, device=o.device, log_lines=lines)
    head["failure_class"] = outcome.failure_class
    return found, ranked


def _as_json(
    reg: Any,
    head: dict[str, Any],
    rows: list[dict],
    mine: dict[str, str],
    found: list[Any],
    ranked: list[Any],
) -> dict[str, Any]:
    from bringup.env.registry import levels, suggested_values

    return {
        **head,
        "described": rows,
        "user_env": [{"name": k, "value": v, "status": reg.status(k)} for k, v in mine.items()],
        "mentions": [
            {
                "name": m.name,
                "value": m.value,
                "action": m.action,
                "status": reg.status(m.name),
                "text": m.text,
            }
            for m in found
        ],
        "ranked": [
            {
                "name": r.var.name,
                "score": r.score,
                "reasons": list(r.reasons),
                "status": reg.status(r.var.name),
                "levels": levels(r.var, suggested_values(found, r.var.name)),
            }
            for r in ranked
        ],
    }


def _print_tables(
    reg: Any, head: dict[str, Any], mine: dict[str, str], found: list[Any], ranked: list[Any]
) -> None:
    from bringup.env.registry import levels, suggested_values

    if mine:
        t = Table("your variable", "value", "status", header_style="bold")
        for k, v in mine.items():
            t.add_row(k, v, reg.status(k))
        out_console.print(t)
    if found:
        t = Table("named by the log", "value", "advice", "status", header_style="bold")
        for m in found:
            t.add_row(m.name, m.value or "", m.action, reg.status(m.name))
        out_console.print(t)
    if ranked:
        t = Table(f"implicated by {head['failure_class']}", "score", "levels", "why", header_style="bold")
        for r in ranked:
            t.add_row(
                r.var.name,
                f"{r.score:g}",
                " ".join(levels(r.var, suggested_values(found, r.var.name))),
                ", ".join(r.reasons),
            )
        out_console.print(t)
