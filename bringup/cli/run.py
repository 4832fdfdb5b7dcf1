"""``bringup run``: the main job. Find a validated configuration, explain it, report it."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.live import Live
from rich.table import Table

from bringup.cli import app
from bringup.cli._common import err_console, out_console, print_json, runs_root, usage_error
from bringup.cli.trial import parse_answers
from bringup.journal import Journal
from bringup.knowledge_files import KnowledgeFileError
from bringup.process import Interrupted
from bringup.run import Run, RunError, RunSettings
from bringup.space import SpaceError, parse_fix
from bringup.targets import TargetError


def default_model() -> Path:
    """The embedded default: a tiny generated model, made once and cached."""
    import os

    from bringup.testmodel import write_test_model

    base = Path(os.environ.get("BRINGUP_CACHE") or Path.home() / ".cache" / "bringup")
    path = base / "models" / "tiny-llama-hd64"
    if not (path / "config.json").exists():
        write_test_model(path)
    return path


def _table(attempts) -> Table:
    t = Table(box=None, header_style="bold")
    for c in ("#", "kind", "changed from baseline", "status", "class / phase", "evidence"):
        t.add_column(c, overflow="fold")
    style = {"works": "green", "fails": "red", "wrong-output": "magenta", "timeout": "yellow"}
    for a in attempts:
        t.add_row(str(a.number), a.purpose, a.changes[:60], f"[{style.get(a.status, '')}]{a.status}[/]",
                  f"{a.failure_class or ''} {('/ ' + a.phase) if a.phase and a.status != 'works' else ''}",
                  (a.evidence if a.status != "works" else "all probes passed")[:90])
    return t


@app.command("run")
def run_cmd(
    engine: str = typer.Option(None, help="vllm, sglang or transformers (default with no model and no scenario: vllm)."),
    model: str = typer.Option(None, help="Model folder or hub id (default: a tiny generated model)."),
    scenario: Path = typer.Option(None, help="Replay a scenario file instead of a real engine."),
    baseline: str = typer.Option("", help="The starting command's engine flags, e.g. a model card's."),
    vary: str = typer.Option(None, help="Only vary these flags (comma-separated)."),
    fix: list[str] = typer.Option([], help="Pin a flag: FLAG=VALUE (repeatable)."),
    space: Path = typer.Option(None, help="A space file (YAML: factors and levels, fixed flags)."),
    knowledge: bool = typer.Option(True, help="Use knowledge rules and the memory plan (--no-knowledge: signatures alone)."),
    screen: str = typer.Option("auto", help="Screen kernels with dummy weights and fewer layers: auto, always, never."),
    max_launches: int = typer.Option(12, min=1, help="Launch budget for the search (screens count)."),
    max_hours: float = typer.Option(None, help="Time budget in hours (simulated hours for scenarios)."),
    explain: bool = typer.Option(True, help="Find the minimal fix by delta debugging (extra launches)."),
    max_explain_launches: int = typer.Option(8, min=0, help="Launch budget for the minimal fix."),
    retry_known: bool = typer.Option(False, help="Relaunch what already failed here in earlier runs."),
    resume: bool = typer.Option(False, help="Resume a run (the latest, or --run-id)."),
    run_id: str = typer.Option(None, help="With --resume: the run to resume."),
    time_scale: float = typer.Option(0.01, help="Scenario only: real seconds per simulated second."),
    timeout: float = typer.Option(1800.0, help="Seconds from launch to ready per trial."),
    hang_timeout: float = typer.Option(600.0, help="Seconds without a log line that make a hang."),
    python: str = typer.Option(None, help="Python interpreter of the engine's environment."),
    answer: list[str] = typer.Option([], help="Known answer 'PROMPT=EXPECTED' (repeatable)."),
    runs_dir: Path = typer.Option(None, help="Runs folder with the journal (default ./bringup-runs)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Find a launch configuration that works, prove it, explain every failure, report it."""
    root = runs_root(runs_dir)
    if screen not in ("auto", "always", "never"):
        raise usage_error(f"--screen {screen!r}: use auto, always or never")
    rid = None
    if resume:
        j = Journal(root / "journal.sqlite")
        row = j.run(run_id) if run_id else j.latest_run()
        if row is None:
            raise usage_error(f"nothing to resume in {root}: no run {run_id or ''} in its journal")
        settings = RunSettings.model_validate(row["settings"])
        rid = row["id"]
        if row["status"] in ("validated", "no-working-config"):
            err_console.print(f"run {rid} already ended ({row['status']}); its report: {row['run_dir']}/FINDINGS.md")
    else:
        if scenario is None and model is None and engine in (None, "vllm"):
            engine, model = "vllm", str(default_model())
        try:
            fixed = parse_fix(fix)
        except SpaceError as e:
            raise usage_error(str(e)) from None
        settings = RunSettings(
            engine=engine, model=model, scenario=str(scenario) if scenario else None, python=python,
            time_scale=time_scale, baseline=baseline, vary=[v.strip() for v in vary.split(",") if v.strip()] if vary else [],
            fix=fixed, space_file=str(space) if space else None, knowledge=knowledge, screen=screen,
            max_launches=max_launches, max_hours=max_hours, explain=explain,
            max_explain_launches=max_explain_launches, retry_known=retry_known, timeout=timeout,
            hang_timeout=hang_timeout, answers=[(a.prompt, a.expected) for a in parse_answers(answer)],
        )
    attempts = []
    live = Live(_table(attempts), console=err_console, refresh_per_second=4, transient=False) if not json_out else None
    status_line = {"text": ""}

    def on_event(kind: str, data) -> None:
        if live is None:
            return
        if kind == "start":
            err_console.print(f"run {data['run_id']}: {len(data['space'].factors)} factors, "
                              f"{data['space'].size():,} configurations in the space"
                              + (f"; resuming after {data['resumed']} finished trials" if data["resumed"] else ""))
        elif kind == "launch":
            status_line["text"] = f"launching #{data['seq']} ({data['purpose']}): {data['changes']}"
            live.update(_table(attempts))
        elif kind == "attempt":
            attempts.append(data)
            live.update(_table(attempts))
        elif kind == "trial" and data[0] == "gpu":  # GPU hygiene messages (bringup/gpus.py)
            err_console.print(f"gpu: {data[1]}", markup=False)

    r = Run(settings, root, run_id=rid, on_event=on_event)
    try:
        if live:
            with live:
                result = r.execute()
        else:
            result = r.execute()
    except (TargetError, RunError, SpaceError, KnowledgeFileError) as e:
        raise usage_error(str(e)) from None
    except Interrupted as e:
        err_console.print(f"[bold yellow]interrupted ({e}); servers torn down.[/] Resume with: "
                          f"bringup run --resume --run-id {r.run_id} --runs-dir {root}")
        raise typer.Exit(130) from None
    if json_out:
        d = result.model_dump()
        d.pop("attempts", None)
        d["attempts"] = [a.model_dump() for a in result.attempts]
        print_json(d)
    else:
        out_console.print((Path(result.run_dir) / "FINDINGS.md").read_text(), markup=False, highlight=False)
    raise typer.Exit(0 if result.validated else 1)
