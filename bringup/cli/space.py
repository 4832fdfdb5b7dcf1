"""``bringup space``: the search space with each level's verdict, before any launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import out_console, print_json, usage_error


@app.command("space")
def space_cmd(
    engine: str = typer.Option(None, help="vllm or sglang."),
    model: str = typer.Option(None, help="Model folder or hub id."),
    scenario: Path = typer.Option(None, help="A scenario file (its hardware, model and engine version)."),
    baseline: str = typer.Option("", help="The starting command's engine flags."),
    vary: str = typer.Option(None, help="Only these flags (comma-separated)."),
    fix: list[str] = typer.Option([], help="Pin a flag: FLAG=VALUE (repeatable)."),
    space: Path = typer.Option(None, help="A space file."),
    knowledge: bool = typer.Option(True, help="Apply knowledge rules."),
    python: str = typer.Option(None, help="Python interpreter of the engine's environment."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Print the factors, their levels, and what knowledge says of each level (and which facts it used)."""
    from bringup.knowledge_files import KnowledgeFileError  # inside: `bringup --help` stays fast
    from bringup.run import Run, RunError, RunSettings
    from bringup.space import SpaceError, parse_fix
    from bringup.targets import TargetError

    try:
        settings = RunSettings(
            engine=engine,
            model=model,
            scenario=str(scenario) if scenario else None,
            python=python,
            baseline=baseline,
            vary=[v.strip() for v in vary.split(",") if v.strip()] if vary else [],
            fix=parse_fix(fix),
            space_file=str(space) if space else None,
            knowledge=knowledge,
        )
        r = Run(settings, Path("/nonexistent-bringup-runs"))
        r.prepare_offline()
    except (TargetError, RunError, SpaceError, KnowledgeFileError) as e:
        raise usage_error(str(e)) from None
    st = r.strategy
    rows: list[dict[str, Any]] = []  # JSON rows, as --json prints them
    for f in r.space.factors:
        base = st.base_level(f)
        if f.name in st.frozen:
            value, why = st.frozen[f.name]
            rows.append(
                {
                    "flag": f.name,
                    "level": "any",
                    "baseline": True,
                    "effective": value,
                    "p_bad": None,
                    "verdicts": [
                        {
                            "verdict": "forced",
                            "reason": why,
                            "source": "",
                            "rule": "",
                            "facts": {},
                            "value": value,
                        }
                    ],
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
                    "p_bad": round(st.p_bad(f, lv), 3),
                    "verdicts": [v.to_json() for v in vs],
                }
            )
    frozen = {k: {"value": v, "why": w} for k, (v, w) in st.frozen.items()}
    if json_out:
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
            }
        )
        raise typer.Exit(0)
    out_console.print(
        f"[bold]{r.target.engine.log_dialect} {r.target.version}[/]: {len(r.space.factors)} factors, "
        f"{r.space.size():,} configurations. Facts: "
        + ", ".join(f"{k}={v}" for k, v in r.facts.items() if k.startswith(("gpu.", "model.", "device")))
    )
    t = Table(header_style="bold", show_lines=False)
    for c in ("flag", "level", "verdict", "reason", "facts used"):
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
                v["reason"],
                facts,
            )
        else:
            t.add_row(row["flag"], row["level"] + (" (baseline)" if row["baseline"] else ""), "", "", "")
    out_console.print(t)
    for k, v in frozen.items():
        out_console.print(f"[bold]{k}[/] is fixed by the engine at {v['value']}: {v['why']}")
