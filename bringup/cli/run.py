"""``bringup run``: the main job. Find a validated configuration, explain it, report it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bringup.cli import app
from bringup.cli._common import (
    RAY_HELP,
    err_console,
    options,
    out_console,
    print_json,
    shown,
    tears_down_on_signal,
    usage_error,
    writable_runs_root,
)
from bringup.cli._nodetypes import facts_of_node_type, node_types_if_asked
from bringup.cli.trial import parse_answers
from bringup.guard import ranges

if TYPE_CHECKING:
    from bringup.record.results import Attempt, Purpose, RunResult
    from bringup.search.space import Space
    from bringup.session.settings import RunSettings


def default_model() -> Path:
    """The embedded default: a tiny generated model, made once and cached."""
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


class RunOptions:
    """`bringup run`'s options."""

    engine: Annotated[
        str | None,
        typer.Option(help="vllm, sglang or transformers (default with no model and no scenario: vllm)."),
    ] = None
    model: Annotated[
        str | None, typer.Option(help="Model folder or hub id (default: a tiny generated model).")
    ] = None
    scenario: Annotated[
        Path | None, typer.Option(help="Replay a scenario file instead of a real engine.")
    ] = None
    baseline: Annotated[
        str,
        typer.Option(
            help="The starting command: 'NAME=VALUE ... --flag x' (environment, then "
            "engine flags), e.g. a model card's."
        ),
    ] = ""
    env: Annotated[
        list[str],
        typer.Option(help="An environment variable of the starting command: NAME=VALUE (repeatable)."),
    ] = []
    vary: Annotated[str | None, typer.Option(help="Only vary these flags (comma-separated).")] = None
    fix: Annotated[list[str], typer.Option(help="Pin a flag: FLAG=VALUE (repeatable).")] = []
    keep: Annotated[
        list[str],
        typer.Option(
            help="Keep a setting of the starting command as given (FLAG or env:NAME, repeatable); "
            "every other one is a suspect the search may undo."
        ),
    ] = []
    space: Annotated[
        Path | None, typer.Option(help="A space file (YAML: factors and levels, fixed flags).")
    ] = None
    knowledge: Annotated[
        bool, typer.Option(help="Use knowledge rules and the memory plan (--no-knowledge: signatures alone).")
    ] = True
    screen: Annotated[
        str, typer.Option(help="Screen kernels with dummy weights and fewer layers: auto, always, never.")
    ] = "auto"
    max_launches: Annotated[
        int, typer.Option(help="Launch budget for the search (screens count).", **ranges.LAUNCHES.option())
    ] = 12
    dry_run: Annotated[
        str,
        typer.Option(
            "--dry-run",
            help="Before each launch, ask the installed engine's own checks with this target's facts "
            "(a refused candidate is never launched): auto (on a GPU target of a real engine), always "
            "(scenarios and CPU targets too) or never.",
        ),
    ] = "auto"
    max_hours: Annotated[
        float | None,
        typer.Option(help="Time budget in hours (simulated hours for scenarios).", **ranges.HOURS.option()),
    ] = None
    minimize: Annotated[
        bool, typer.Option(help="Find the minimal fix: undo each change in turn (extra launches).")
    ] = True
    max_minimize_launches: Annotated[
        int, typer.Option(help="Launch budget for the minimal fix.", **ranges.MORE_LAUNCHES.option())
    ] = 8
    retry_known: Annotated[bool, typer.Option(help="Relaunch what already failed here in earlier runs.")] = (
        False
    )
    resume: Annotated[bool, typer.Option(help="Resume a run (the latest, or --run-id).")] = False
    run_id: Annotated[str | None, typer.Option(help="With --resume: the run to resume.")] = None
    time_scale: Annotated[
        float,
        typer.Option(help="Scenario only: real seconds per simulated second.", **ranges.TIME_SCALE.option()),
    ] = 0.01
    timeout: Annotated[
        float, typer.Option(help="Seconds from launch to ready per trial.", **ranges.SECONDS.option())
    ] = 1800.0
    hang_timeout: Annotated[
        float, typer.Option(help="Seconds without a log line that make a hang.", **ranges.SECONDS.option())
    ] = 600.0
    python: Annotated[str | None, typer.Option(help="Python interpreter of the engine's environment.")] = None
    answer: Annotated[list[str], typer.Option(help="Known answer 'PROMPT=EXPECTED' (repeatable).")] = []
    reference: Annotated[
        str,
        typer.Option(
            help="Reference for the reference probe: a file from `bringup reference`, "
            "auto (in-process when the model is a local folder that fits), or none."
        ),
    ] = "auto"
    parallel: Annotated[
        str | None,
        typer.Option(
            help="Trials at once, each on its own GPUs and port: a number, or auto "
            "(as many as the GPUs hold with the baseline's need). Default 1; with --ray, auto."
        ),
    ] = None
    ray: Annotated[str | None, typer.Option("--ray", help=RAY_HELP)] = None
    gpus: Annotated[
        str | None,
        typer.Option(
            help="The GPUs the run may use (CUDA_VISIBLE_DEVICES entries, e.g. 0,1; "
            "default: every GPU doctor sees)."
        ),
    ] = None
    node_types: Annotated[
        str | None,
        typer.Option(
            "--node-types",
            help="With --ray: bring the model up on several node types of the cluster at once, one run "
            "each (all: every bringup-hw-* type its alive nodes declare; or TYPE[,TYPE...], each a "
            "bringup-hw-<hash> or a doctor fingerprint); per-type runs under RUNS_DIR/<type>/, "
            "a summary in RUNS_DIR/NODE-TYPES.md.",
        ),
    ] = None
    runs_dir: Annotated[
        Path | None, typer.Option(help="Runs folder with the journal (default ./bringup-runs).")
    ] = None
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False
    lessons: Annotated[
        list[str],
        typer.Option(
            help="Lessons of other runs (`bringup lessons export`): a file or a folder of them "
            "(repeatable; also BRINGUP_LESSONS, a path list). Used as priors where their scope "
            "reaches this target.",
        ),
    ] = []


@app.command("run")
@options(RunOptions)
@tears_down_on_signal
def run_cmd(o: RunOptions) -> None:
    """Find a launch configuration that works, prove it, explain every failure, report it."""
    root = writable_runs_root(o.runs_dir)
    _check_choices(screen=o.screen, dry_run=o.dry_run)
    settings, rid = _resumed(root, o.run_id, o.max_launches) if o.resume else (_settings(o), None)
    node_types_if_asked(settings, root, o.node_types, o.json_out, o.resume)  # with --node-types: ends here
    result = _execute(settings, root, rid, o.json_out)
    if o.json_out:
        d = result.model_dump()
        d.pop("attempts", None)
        d["attempts"] = [a.model_dump() for a in result.attempts]
        print_json(d)
    else:
        out_console.print(summary(result))
    raise typer.Exit(0 if result.validated else 1)


def _settings(o: RunOptions) -> RunSettings:
    """A new run's settings from its options (with no model and no scenario: the embedded default)."""
    from bringup.core.candidate import FlagError, parse_env
    from bringup.search.space import SpaceError, parse_fix
    from bringup.session.settings import RunSettings

    default = o.scenario is None and o.model is None and o.engine in (None, "vllm")
    try:
        fixed, env_vars = parse_fix(o.fix), parse_env(o.env)
    except (SpaceError, FlagError) as e:
        raise usage_error(f"--fix/--env: {e}") from None
    return RunSettings(
        engine="vllm" if default else o.engine,
        model=str(default_model()) if default else o.model,
        scenario=str(o.scenario) if o.scenario else None,
        python=o.python,
        time_scale=o.time_scale,
        baseline=o.baseline,
        env=env_vars,
        vary=[v.strip() for v in o.vary.split(",") if v.strip()] if o.vary else [],
        fix=fixed,
        keep=list(o.keep),
        space_file=str(o.space) if o.space else None,
        knowledge=o.knowledge,
        screen=o.screen,
        dry_run=o.dry_run,
        max_launches=o.max_launches,
        max_hours=o.max_hours,
        minimize=o.minimize,
        max_minimize_launches=o.max_minimize_launches,
        retry_known=o.retry_known,
        timeout=o.timeout,
        hang_timeout=o.hang_timeout,
        answers=[(a.prompt, a.expected) for a in parse_answers(o.answer)],
        reference=o.reference,
        parallel=o.parallel or ("auto" if o.ray else "1"),
        gpus=o.gpus,
        ray=o.ray,
        lessons=[*o.lessons, *filter(None, os.environ.get("BRINGUP_LESSONS", "").split(os.pathsep))],
    )


def _execute(settings: RunSettings, root: Path, rid: str | None, json_out: bool) -> RunResult:
    """The run, with its live table on stderr (not with --json); bad input and a stop end it with a message."""
    from bringup.core.datafiles import KnowledgeFileError
    from bringup.core.reserved import ReservedFlag
    from bringup.engines.targets import TargetError
    from bringup.search.space import SpaceError
    from bringup.session.run import QuietObserver, Run, RunError
    from bringup.trial.process import Interrupted
    from bringup.trial.rayexec import RayClusterError  # Ray itself is imported only with --ray

    live = (
        Live(_table([]), console=err_console, refresh_per_second=4, transient=False) if not json_out else None
    )
    observer = LiveTable(live) if live else QuietObserver()
    r = Run(settings, root, run_id=rid, observer=observer, node_facts=facts_of_node_type(settings))
    try:
        if live:
            with live:
                return r.execute()
        return r.execute()
    except (TargetError, RunError, SpaceError, KnowledgeFileError, RayClusterError, ReservedFlag) as e:
        raise usage_error(str(e)) from None
    except Interrupted as e:
        err_console.print(
            f"[bold yellow]interrupted ({e}); servers torn down.[/] Resume with: "
            f"bringup run --resume --run-id {r.run_id} --runs-dir {root}"
        )
        raise typer.Exit(e.exit_code) from None


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
    if r.lessons or r.lessons_refused:
        first = sum(u.first for u in r.lessons)
        used = f"{len(r.lessons)} used ({first} in the first candidate)"
        grid.add_row(
            "lessons", Text(used + (f", {len(r.lessons_refused)} refused" if r.lessons_refused else ""))
        )
    findings = Path(r.run_dir) / "FINDINGS.md"
    grid.add_row("findings", Text(str(findings)))
    html = Path(r.run_dir) / "report.html"
    if html.exists():
        grid.add_row("report", Text(str(html)))
    return Group(head, grid)


def _check_choices(**given: str) -> None:
    """--screen and --dry-run take one of a few words; anything else is bad usage."""
    from bringup.dryrun import MODES

    allowed = {"screen": ("auto", "always", "never"), "dry_run": MODES}
    for name, value in given.items():
        if value not in allowed[name]:
            flag = "--" + name.replace("_", "-")
            raise usage_error(f"{flag} {value!r}: use {', '.join(allowed[name][:-1])} or {allowed[name][-1]}")
