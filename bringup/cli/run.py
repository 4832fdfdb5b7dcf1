"""``bringup run``: the main job. Find a validated configuration, explain it, report it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bringup.cli import app
from bringup.cli._common import (
    RAY_HELP,
    err_console,
    out_console,
    positive,
    print_json,
    shown,
    usage_error,
    writable_runs_root,
)
from bringup.cli._nodetypes import facts_of_node_type, node_types_if_asked
from bringup.cli.trial import parse_answers

if TYPE_CHECKING:
    from bringup.record.results import Attempt, Purpose, RunResult
    from bringup.search.space import Space


def default_model() -> Path:
    """The embedded default: a tiny generated model, made once and cached."""
    import os

    from bringup.testmodel.tiny import write_test_model

    base = Path(os.environ.get("BRINGUP_CACHE") or Path.home() / ".cache" / "bringup")
    path = base / "models" / "tiny-llama-hd64"
    if not (path / "config.json").exists():
        write_test_model(path)
    return path


def _table(attempts: list[Attempt]) -> Table:
    t = Table(box=None, header_style="bold")
    for c in ("#", "kind", "changed from baseline", "status", "class / phase", "evidence"):
        t.add_column(c, overflow="fold")
    style = {
        "works": "green",
        "fails": "red",
        "wrong-output": "magenta",
        "timeout": "yellow",
        "cancelled": "dim",
    }
    for a in attempts:
        t.add_row(
            str(a.number),
            Text(shown(a.purpose)),
            Text(shown(a.changes, 60)),
            Text(a.status, style=style.get(a.status, "")),
            Text(
                shown(
                    f"{a.failure_class or ''} {('/ ' + a.phase) if a.phase and a.status != 'works' else ''}"
                )
            ),
            Text(shown(a.evidence if a.status != "works" else "all probes passed", 90)),
        )
    return t


def _resumed(root: Path, run_id: str | None, max_launches: int):
    """The settings and id of the run to resume; a search that stopped short goes on with more launches."""
    from bringup.record.journal import Journal
    from bringup.session.settings import RunSettings

    j = Journal(root / "journal.sqlite")
    row = j.run(run_id) if run_id else j.latest_run()
    if row is None:
        raise usage_error(f"nothing to resume in {root}: no run {run_id or ''} in its journal")
    settings = RunSettings.model_validate(row.settings)
    if max_launches > settings.max_launches:
        settings.max_launches = max_launches
    if row.status in ("validated", "impossible"):
        err_console.print(f"run {row.id} already ended ({row.status}); its report: {row.run_dir}/FINDINGS.md")
    return settings, row.id


@app.command("run")
def run_cmd(
    engine: str = typer.Option(
        None, help="vllm, sglang or transformers (default with no model and no scenario: vllm)."
    ),
    model: str = typer.Option(None, help="Model folder or hub id (default: a tiny generated model)."),
    scenario: Path = typer.Option(None, help="Replay a scenario file instead of a real engine."),
    baseline: str = typer.Option(
        "",
        help="The starting command: 'NAME=VALUE ... --flag x' (environment, then "
        "engine flags), e.g. a model card's.",
    ),
    env: list[str] = typer.Option(
        [], help="An environment variable of the starting command: NAME=VALUE (repeatable)."
    ),
    vary: str = typer.Option(None, help="Only vary these flags (comma-separated)."),
    fix: list[str] = typer.Option([], help="Pin a flag: FLAG=VALUE (repeatable)."),
    space: Path = typer.Option(None, help="A space file (YAML: factors and levels, fixed flags)."),
    knowledge: bool = typer.Option(
        True, help="Use knowledge rules and the memory plan (--no-knowledge: signatures alone)."
    ),
    screen: str = typer.Option(
        "auto", help="Screen kernels with dummy weights and fewer layers: auto, always, never."
    ),
    max_launches: int = typer.Option(12, min=1, help="Launch budget for the search (screens count)."),
    dry_run: str = typer.Option(
        "never",
        "--dry-run",
        help="Before each launch, ask the installed engine's own checks with this target's facts: "
        "auto (a refused candidate is never launched) or never (docs/dryrun.md).",
    ),
    max_hours: float = typer.Option(
        None, help="Time budget in hours (simulated hours for scenarios).", callback=positive
    ),
    minimize: bool = typer.Option(True, help="Find the minimal fix by delta debugging (extra launches)."),
    max_minimize_launches: int = typer.Option(8, min=0, help="Launch budget for the minimal fix."),
    retry_known: bool = typer.Option(False, help="Relaunch what already failed here in earlier runs."),
    resume: bool = typer.Option(False, help="Resume a run (the latest, or --run-id)."),
    run_id: str = typer.Option(None, help="With --resume: the run to resume."),
    time_scale: float = typer.Option(
        0.01, help="Scenario only: real seconds per simulated second.", callback=positive
    ),
    timeout: float = typer.Option(1800.0, help="Seconds from launch to ready per trial.", callback=positive),
    hang_timeout: float = typer.Option(
        600.0, help="Seconds without a log line that make a hang.", callback=positive
    ),
    python: str = typer.Option(None, help="Python interpreter of the engine's environment."),
    answer: list[str] = typer.Option([], help="Known answer 'PROMPT=EXPECTED' (repeatable)."),
    reference: str = typer.Option(
        "auto",
        help="Reference for the reference probe: a file from `bringup reference`, "
        "auto (in-process when the model is a local folder that fits), or none.",
    ),
    parallel: str = typer.Option(
        None,
        help="Trials at once, each on its own GPUs and port: a number, or auto "
        "(as many as the GPUs hold with the baseline's need). Default 1; with --ray, auto.",
    ),
    ray: str = typer.Option(
        None,
        "--ray",
        help=RAY_HELP,
    ),
    gpus: str = typer.Option(
        None,
        help="The GPUs the run may use (CUDA_VISIBLE_DEVICES entries, e.g. 0,1; "
        "default: every GPU doctor sees).",
    ),
    node_types: str = typer.Option(
        None,
        "--node-types",
        help="With --ray: bring the model up on several node types of the cluster at once, one run "
        "each (all: every bringup-hw-* type its alive nodes declare; or TYPE[,TYPE...], each a "
        "bringup-hw-<hash> or a doctor fingerprint); per-type runs under RUNS_DIR/<type>/, "
        "a summary in RUNS_DIR/NODE-TYPES.md (docs/parallel.md).",
    ),
    runs_dir: Path = typer.Option(None, help="Runs folder with the journal (default ./bringup-runs)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Find a launch configuration that works, prove it, explain every failure, report it."""
    from bringup.core.candidate import FlagError, parse_env
    from bringup.core.datafiles import KnowledgeFileError
    from bringup.engines.targets import TargetError
    from bringup.search.space import SpaceError, parse_fix
    from bringup.session.run import QuietObserver, Run, RunError, RunSettings
    from bringup.trial.process import Interrupted, install_signal_handlers
    from bringup.trial.rayexec import RayClusterError  # Ray itself is imported only with --ray

    install_signal_handlers()  # on the main thread: SIGTERM/SIGHUP tear servers down (exit 143/129)

    root = writable_runs_root(runs_dir)
    _check_choices(screen=screen, dry_run=dry_run)
    rid = None
    if resume:
        settings, rid = _resumed(root, run_id, max_launches)
    else:
        if scenario is None and model is None and engine in (None, "vllm"):
            engine, model = "vllm", str(default_model())
        try:
            fixed = parse_fix(fix)
            env_vars = parse_env(env)
        except (SpaceError, FlagError) as e:
            raise usage_error(f"--fix/--env: {e}") from None
        settings = RunSettings(
            engine=engine,
            model=model,
            scenario=str(scenario) if scenario else None,
            python=python,
            time_scale=time_scale,
            baseline=baseline,
            env=env_vars,
            vary=[v.strip() for v in vary.split(",") if v.strip()] if vary else [],
            fix=fixed,
            space_file=str(space) if space else None,
            knowledge=knowledge,
            screen=screen,
            dry_run=dry_run,
            max_launches=max_launches,
            max_hours=max_hours,
            minimize=minimize,
            max_minimize_launches=max_minimize_launches,
            retry_known=retry_known,
            timeout=timeout,
            hang_timeout=hang_timeout,
            answers=[(a.prompt, a.expected) for a in parse_answers(answer)],
            reference=reference,
            parallel=parallel or ("auto" if ray else "1"),
            gpus=gpus,
            ray=ray,
        )
    node_types_if_asked(settings, root, node_types, json_out, resume)  # with --node-types: ends here
    live = (
        Live(_table([]), console=err_console, refresh_per_second=4, transient=False) if not json_out else None
    )
    r = Run(
        settings,
        root,
        run_id=rid,
        observer=LiveTable(live) if live else QuietObserver(),
        node_facts=facts_of_node_type(settings),
    )
    try:
        if live:
            with live:
                result = r.execute()
        else:
            result = r.execute()
    except (TargetError, RunError, SpaceError, KnowledgeFileError, RayClusterError) as e:
        raise usage_error(str(e)) from None
    except Interrupted as e:
        err_console.print(
            f"[bold yellow]interrupted ({e}); servers torn down.[/] Resume with: "
            f"bringup run --resume --run-id {r.run_id} --runs-dir {root}"
        )
        raise typer.Exit(e.exit_code) from None
    if json_out:
        d = result.model_dump()
        d.pop("attempts", None)
        d["attempts"] = [a.model_dump() for a in result.attempts]
        print_json(d)
    else:
        out_console.print(summary(result))
    raise typer.Exit(0 if result.validated else 1)


class LiveTable:
    """The run's attempts as a table that grows while it runs (on stderr). A RunObserver (bringup.session.settings)."""

    def __init__(self, live: Live):
        self.live = live
        self.attempts: list[Attempt] = []

    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None:
        err_console.print(
            f"run {shown(run_id)}: {len(space.factors)} factors, {space.size():,} configurations in the space"
            + (f"; resuming after {resumed} finished trials" if resumed else "")
        )

    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None:
        self.live.update(_table(self.attempts))
        # Trials at once: say what starts, since the table only grows when one ends.
        err_console.print(f"#{seq} {purpose}: {shown(changes, 100)}", markup=False, style="dim")

    def trial_event(self, kind: str, text: str) -> None:
        if kind == "gpu":  # GPU hygiene messages (bringup/facts/gpus.py)
            err_console.print(f"gpu: {shown(text)}", markup=False)

    def attempted(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        self.live.update(_table(self.attempts))

    def finished(self, result: RunResult) -> None:
        pass


def summary(r: RunResult) -> Group:
    """The end of the main job in the terminal: the result, the command, the fix, where to read more."""
    style = "bold green" if r.validated else "bold red"
    head = Text.assemble(
        ("validated" if r.validated else r.status.replace("-", " "), style),
        f" after {r.launches} launch{'es' if r.launches != 1 else ''}"
        + (f" ({r.screening_launches} screens)" if r.screening_launches else "")
        + (f" + {r.minimize_launches} to minimize the fix" if r.minimize_launches else "")
        + (f", {r.simulated_hours:.2f} simulated hours" if r.simulated_hours is not None else "")
        + f": {shown(r.stop_reason)}",
    )
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column(overflow="fold")
    if r.final_command:
        grid.add_row("command", Text(shown(r.final_command)))
    if r.minimal_fix_str:
        grid.add_row(
            "minimal fix",
            Text(shown(r.minimal_fix_str + ("" if r.minimal_fix_verified else " (not minimised)"))),
        )
    grid.add_row("baseline", Text(shown(r.baseline_command)))
    findings = Path(r.run_dir) / "FINDINGS.md"
    grid.add_row("findings", Text(str(findings)))
    html = Path(r.run_dir) / "report.html"
    if html.exists():
        grid.add_row("report", Text(str(html)))
    return Group(head, grid)


def _check_choices(**given: str) -> None:
    """--screen and --dry-run take one of a few words; anything else is bad usage."""
    allowed = {"screen": ("auto", "always", "never"), "dry_run": ("auto", "never")}
    for name, value in given.items():
        if value not in allowed[name]:
            flag = "--" + name.replace("_", "-")
            raise usage_error(f"{flag} {value!r}: use {', '.join(allowed[name][:-1])} or {allowed[name][-1]}")
