"""``bringup trial``: launch one configuration, probe it, tear it down, say what happened."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from bringup.cli import app
from bringup.cli._common import (
    err_console,
    new_trial_dir,
    port_number,
    positive,
    print_json,
    render_outcome,
    runs_root,
    shown,
    usage_error,
    writable_runs_root,
)

if TYPE_CHECKING:
    from bringup.verify.probes import KnownAnswer


def parse_answers(answers: list[str]) -> list[KnownAnswer]:
    from bringup.verify.probes import KnownAnswer

    out = []
    for a in answers:
        prompt, sep, expected = a.rpartition("=")
        if not sep or not prompt.strip() or not expected.strip():
            raise usage_error(f"--answer {a!r}: write it as 'PROMPT=EXPECTED', e.g. 'What is 2+2?=4'")
        out.append(KnownAnswer(prompt.strip(), expected.strip()))
    return out


@app.command("trial", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def trial_cmd(
    ctx: typer.Context,
    engine: str = typer.Option(
        None, help="vllm, sglang or transformers (engines.yaml; not with --scenario)."
    ),
    model: str = typer.Option(None, help="Model folder or hub id (with --scenario: the scenario's model)."),
    scenario: Path = typer.Option(None, help="Replay a scenario file instead of a real engine."),
    time_scale: float = typer.Option(
        0.01, help="Scenario only: real seconds per simulated second.", callback=positive
    ),
    port: int = typer.Option(None, help="Port for the server (default: a free one).", callback=port_number),
    timeout: float = typer.Option(
        1800.0, help="Seconds from launch to ready before giving up.", callback=positive
    ),
    hang_timeout: float = typer.Option(
        600.0, help="Seconds without a new log line (not ready) that make a hang.", callback=positive
    ),
    python: str = typer.Option(
        None, help="Python interpreter of the engine's environment (default: this one)."
    ),
    gpus: str = typer.Option(
        None, help="CUDA_VISIBLE_DEVICES for the server, e.g. 0,1 (default: inherited)."
    ),
    answer: list[str] = typer.Option([], help="Known answer 'PROMPT=EXPECTED' to check (repeatable)."),
    env: list[str] = typer.Option([], help="Environment variable for the server: NAME=VALUE (repeatable)."),
    batch: int = typer.Option(8, min=2, help="Concurrent requests in the batch probe."),
    long_tokens: int = typer.Option(256, min=200, help="Tokens in the long greedy decode probe."),
    reference: str = typer.Option(
        "auto",
        help="Reference for the reference probe: a file from `bringup reference`, "
        "auto (in-process when the model is a local folder that fits), or none.",
    ),
    validate: bool = typer.Option(True, help="Reject flags the engine's --help rejects without launching."),
    runs_dir: Path = typer.Option(None, help="Where trial folders go (default ./bringup-runs)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Run one trial and print its outcome. Engine flags go after `--`.

    Exit code 0 when it works, 1 when it does not, 2 for bad usage.
    """
    from rich.status import Status  # heavy imports inside the command: `bringup --help` stays fast

    from bringup.core.candidate import Candidate, FlagError, parse_env, parse_flags
    from bringup.core.reserved import reserved_flag
    from bringup.engines.targets import TargetError, resolve_target
    from bringup.env.registry import launch_environment
    from bringup.trial.launch import Trial, TrialSettings
    from bringup.trial.process import Interrupted, install_signal_handlers
    from bringup.verify.probes import ProbeConfig
    from bringup.verify.reference import ReferenceError, reference_for

    install_signal_handlers()  # on the main thread: SIGTERM/SIGHUP tear servers down (exit 143/129)

    try:
        target = resolve_target(
            engine=engine, model=model, scenario=scenario, python=python, time_scale=time_scale, gpus=gpus
        )
    except TargetError as e:
        raise usage_error(str(e)) from None
    tokens = list(ctx.args)
    if why := reserved_flag(tokens, target.spec, target.engine.info.model_flag):
        raise usage_error(why)
    try:
        flags = parse_flags(tokens, target.spec)
    except FlagError:
        try:  # the trial reports what the engine would reject; keep the tokens as given
            flags = parse_flags(tokens, None)
        except FlagError as e:
            raise usage_error(f"cannot read the engine flags: {e}") from None
    try:
        env_vars = {**launch_environment(target.engine.env_registry(target.version)), **parse_env(env)}
    except FlagError as e:
        raise usage_error(f"--env: {e}") from None
    cand = Candidate.make(target.engine.log_dialect, target.model, flags, env_vars)
    answers = target.answers + parse_answers(answer)
    ref = None
    if not target.engine.simulated:
        try:
            ref, why = reference_for(target.model, reference, cache_dir=runs_root(runs_dir) / "references")
        except ReferenceError as e:
            raise usage_error(f"--reference: {e}") from None
        if not json_out:
            err_console.print(f"[dim]reference:[/] {escape(shown(why))}")
    settings = TrialSettings(
        timeout=timeout,
        hang_timeout=hang_timeout,
        port=port,
        validate=validate,
        probe=ProbeConfig(batch_size=batch, long_tokens=long_tokens, answers=answers, reference=ref),
    )
    trial_dir = new_trial_dir(writable_runs_root(runs_dir), target.engine.log_dialect, cand.key())
    status = Status("launching", console=err_console) if not json_out else None
    state = {"phase": "spawn", "line": ""}

    def on_event(kind: str, text: str) -> None:
        if status is None:
            return
        if kind == "gpu":  # GPUs busy before the first launch, memory not given back (bringup/facts/gpus.py)
            err_console.print(f"[dim]gpu:[/] {escape(shown(text))}")
            return
        if kind == "phase":
            state["phase"] = text
        elif kind == "line" and text.strip():
            from bringup.guard.safetext import safe_line

            state["line"] = escape(safe_line(text.strip(), 100))  # no escapes or markup reach the terminal
        status.update(f"[bold]{state['phase']}[/]  [dim]{state['line']}[/]")

    trial = Trial(
        target.engine, cand, trial_dir, settings, spec=target.spec, version=target.version, on_event=on_event
    )
    try:
        if status:
            with status:
                outcome = trial.run()
        else:
            outcome = trial.run()
    except Interrupted as e:
        err_console.print(
            f"[bold yellow]interrupted ({e}); the server was torn down.[/] Log: {trial_dir / 'server.log'}"
        )
        raise typer.Exit(e.exit_code) from None
    if json_out:
        print_json(outcome.model_dump())
    else:
        render_outcome(outcome)
    raise typer.Exit(0 if outcome.works else 1)
