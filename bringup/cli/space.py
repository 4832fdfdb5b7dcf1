"""``bringup space``: the search space with each level's verdict, before any launch."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import options, out_console, print_json, usage_error

if TYPE_CHECKING:
    from bringup.session.prepare import PreparedRun


class SpaceOptions:
    """`bringup space`'s options."""

    engine: Annotated[str | None, typer.Option(help="vllm or sglang.")] = None
    model: Annotated[str | None, typer.Option(help="Model folder or hub id.")] = None
    scenario: Annotated[
        Path | None, typer.Option(help="A scenario file (its hardware, model and engine version).")
    ] = None
    baseline: Annotated[str, typer.Option(help="The starting command's engine flags.")] = ""
    vary: Annotated[str | None, typer.Option(help="Only these flags (comma-separated).")] = None
    fix: Annotated[list[str], typer.Option(help="Pin a flag: FLAG=VALUE (repeatable).")] = []
    space: Annotated[Path | None, typer.Option(help="A space file.")] = None
    knowledge: Annotated[bool, typer.Option(help="Apply knowledge rules.")] = True
    python: Annotated[str | None, typer.Option(help="Python interpreter of the engine's environment.")] = None
    dry_run: Annotated[
        str,
        typer.Option(
            "--dry-run",
            help="Also ask the installed engine's own checks on each level (the baseline with that one "
            "change): auto (on a GPU target of a real engine), always (scenarios too) or "
            "never (knowledge only).",
        ),
    ] = "never"
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False


@app.command("space")
@options(SpaceOptions)
def space_cmd(o: SpaceOptions) -> None:
    """Print the factors, their levels, and what knowledge says of each level (and which facts it used)."""
    r = _prepared(o)
    rows = _rows(r)  # JSON rows, as --json prints them
    notes = _origins_and_engine_checks(r, rows, o.dry_run)
    frozen = {k: {"value": v, "why": w} for k, (v, w) in r.strategy.frozen.items()}
    if o.json_out:
        print_json(
            {
                "engine": r.target.engine.log_dialect,
                "engine_version": r.target.version,
                "facts": r.facts,
                "factors": [
                    {"flag": f.name, "kind": f.kind, "levels": ["unset", *map(str, f.levels)]}
                    for f in r.space.factors
                ],
                "levels": rows,
                "frozen": frozen,
                "fixed": r.space.fixed,
                "size": r.space.size(),
                "dry_run_notes": notes,
            }
        )
        raise typer.Exit(0)
    out_console.print(
        f"[bold]{r.target.engine.log_dialect} {r.target.version}[/]: {len(r.space.factors)} factors, "
        f"{r.space.size():,} configurations. Facts: "
        + ", ".join(f"{k}={v}" for k, v in r.facts.items() if k.startswith(("gpu.", "model.", "device")))
    )
    out_console.print(_table(rows))
    _footer(frozen, notes)


def _prepared(o: SpaceOptions) -> PreparedRun:
    """The run these options describe, prepared as a run would be, without a journal or a launch."""
    from bringup.core.datafiles import KnowledgeFileError  # inside: `bringup --help` stays fast
    from bringup.engines.targets import TargetError
    from bringup.search.space import SpaceError, parse_fix
    from bringup.session.run import Run, RunError, RunSettings

    try:
        settings = RunSettings(
            engine=o.engine,
            model=o.model,
            scenario=str(o.scenario) if o.scenario else None,
            python=o.python,
            baseline=o.baseline,
            vary=[v.strip() for v in o.vary.split(",") if v.strip()] if o.vary else [],
            fix=parse_fix(o.fix),
            space_file=str(o.space) if o.space else None,
            knowledge=o.knowledge,
        )
        r = Run(settings, Path("/nonexistent-bringup-runs"))
        r.prepare_offline()
    except (TargetError, RunError, SpaceError, KnowledgeFileError) as e:
        raise usage_error(str(e)) from None
    return r


def _rows(r: PreparedRun) -> list[dict[str, Any]]:
    """Each factor's levels with the strategy's verdicts on them (a level the engine forces: one row)."""
    st, rows = r.strategy, []
    for f in r.space.factors:
        base = st.base_level(f)
        if f.name in st.frozen:
            value, why = st.frozen[f.name]
            forced = {
                "verdict": "forced",
                "reason": why,
                "source": "",
                "rule": "",
                "facts": {},
                "value": value,
            }
            rows.append(
                {
                    "flag": f.name,
                    "level": "any",
                    "baseline": True,
                    "effective": value,
                    "p_bad": None,
                    "verdicts": [forced],
                }
            )
            continue
        levels = [None, *f.levels]
        for lv in levels:
            vs = st.verdicts(f, lv)
            rows.append(
                {
                    "flag": f.name,
                    "level": f.describe_level(lv),
                    "baseline": (lv == base) if lv is not None else base is None,
                    "effective": st.eff(f, lv),
                    "p_bad": round(st.risk(f, lv), 3),
                    "verdicts": [v.to_json() for v in vs],
                }
            )
    return rows


def _table(rows: list[dict[str, Any]]) -> Table:
    t = Table(header_style="bold", show_lines=False)
    for c in ("flag", "level", "verdict", "from", "reason", "facts used", "engine check"):
        t.add_column(c, overflow="fold")
    style = {"incompatible": "red", "risky": "yellow", "preferred": "green"}
    for row in rows:
        if row["verdicts"]:
            v = row["verdicts"][0]
            facts = ", ".join(f"{k}={val}" for k, val in v["facts"].items())
            t.add_row(
                row["flag"],
                row["level"] + (" (baseline)" if row["baseline"] else ""),
                f"[{style.get(v['verdict'], '')}]{v['verdict']}[/]",
                v["from"],
                v["reason"],
                facts,
                _dry_cell(row),
            )
        else:
            t.add_row(
                row["flag"],
                row["level"] + (" (baseline)" if row["baseline"] else ""),
                "",
                "",
                "",
                "",
                _dry_cell(row),
            )
    return t


def _footer(frozen: dict[str, dict[str, Any]], notes: list[str]) -> None:
    for k, v in frozen.items():
        out_console.print(f"[bold]{k}[/] is fixed by the engine at {v['value']}: {v['why']}")
    for n in notes:
        out_console.print(n, markup=False)


def _origins_and_engine_checks(r: Any, rows: list[dict[str, Any]], dry_run: str) -> list[str]:
    """Each verdict's origin ("from"), and where the dry run is wanted (bringup.dryrun.wanted: auto
    on a GPU target of a real engine, always) the engine's own check per level."""
    from bringup.dryrun import MODES, wanted

    if dry_run not in MODES:
        raise usage_error(f"--dry-run {dry_run!r}: use {', '.join(MODES)}")
    for row in rows:
        for v in row["verdicts"]:
            v["from"] = _origin(v)
    return (
        _engine_checks(r, rows)
        if wanted(dry_run, r.facts, not r.target.world.installed_engine_launches)
        else []
    )


def _origin(v: dict[str, Any]) -> str:
    """Where a knowledge verdict came from: a rule of rules.yaml, or a fact (memory plan, engine)."""
    if v.get("rule"):
        return f"rule {v['rule']}"
    return "hardware fact" if v.get("facts") else "engine"


def _engine_checks(r: Any, rows: list[dict[str, Any]]) -> list[str]:
    """Each level's verdict from the installed engine's own checks (bringup/dryrun/): the baseline
    with that one level, the device described by the facts. Notes: why it could not ask, once."""
    from bringup.dryrun import for_target

    dr = for_target(r.target, r.facts)
    try:
        for row in rows:
            if row["level"] == "any":
                continue
            f = next(f for f in r.space.factors if f.name == row["flag"])
            level = (
                None
                if row["level"] == "unset"
                else next((lv for lv in f.levels if f.describe_level(lv) == row["level"]), None)
            )
            cand = r.baseline.with_changes({f.name: level})
            row["dry_run"] = dr.check(cand).to_json()
            if not dr.available:
                break
    finally:
        dr.close()
    return list(dr.notes)


def _dry_cell(row: dict[str, Any]) -> str:
    d = row.get("dry_run")
    if not d:
        return ""
    style = {"refused": "red", "passes": "green"}.get(d["status"], "dim")
    msg = d["message"] if d["status"] != "passes" else ""
    return f"[{style}]{d['label']}[/] {msg[:240]}".strip()
