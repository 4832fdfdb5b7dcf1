"""``bringup trial``: launch one configuration, probe it, tear it down, say what happened."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from bringup.cli import app
from bringup.cli._common import (
    err_console,
    new_trial_dir,
    options,
    print_json,
    render_outcome,
    runs_root,
    shown,
    tears_down_on_signal,
    usage_error,
    writable_runs_root,
)
from bringup.guard import ranges

if TYPE_CHECKING:
    from rich.status import Status

    from bringup.core.candidate import Candidate
    from bringup.engines.targets import Target
    from bringup.observe.outcome import Outcome
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


class TrialOptions:
    """`bringup trial`'s options (engine flags go after `--`, into ctx.args)."""

    ctx: typer.Context
    engine: Annotated[
        str | None, typer.Option(help="vllm, sglang or transformers (not with --scenario).")
    ] = None
    model: Annotated[
        str | None, typer.Option(help="Model folder or hub id (with --scenario: the scenario's model).")
    ] = None
    scenario: Annotated[
        Path | None, typer.Option(help="Replay a scenario file instead of a real engine.")
    ] = None
    time_scale: Annotated[
        float,
        typer.Option(help="Scenario only: real seconds per simulated second.", **ranges.TIME_SCALE.option()),
    ] = 0.01
    port: Annotated[
        int | None, typer.Option(help="Port for the server (default: a free one).", **ranges.PORT.option())
    ] = None
    timeout: Annotated[
        float, typer.Option(help="Seconds from launch to ready before giving up.", **ranges.SECONDS.option())
    ] = 1800.0
    hang_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds without a new log line (not ready) that make a hang.", **ranges.SECONDS.option()
        ),
    ] = 600.0
    python: Annotated[
        str | None, typer.Option(help="Python interpreter of the engine's environment (default: this one).")
    ] = None
    gpus: Annotated[
        str | None, typer.Option(help="CUDA_VISIBLE_DEVICES for the server, e.g. 0,1 (default: inherited).")
    ] = None
    answer: Annotated[
        list[str], typer.Option(help="Known answer 'PROMPT=EXPECTED' to check (repeatable).")
    ] = []
    env: Annotated[
        list[str], typer.Option(help="Environment variable for the server: NAME=VALUE (repeatable).")
    ] = []
    batch: Annotated[
        int, typer.Option(help="Concurrent requests in the batch probe.", **ranges.BATCH.option())
    ] = 8
    long_tokens: Annotated[
        int, typer.Option(help="Tokens in the long greedy decode probe.", **ranges.LONG_TOKENS.option())
    ] = 256
    reference: Annotated[
        str,
        typer.Option(
            help="Reference for the reference probe: a file from `bringup reference`, "
            "auto (in-process when the model is a local folder that fits), or none."
        ),
    ] = "auto"
    validate: Annotated[
        bool, typer.Option(help="Reject flags the engine's --help rejects without launching.")
    ] = True
    runs_dir: Annotated[
        Path | None, typer.Option(help="Where trial folders go (default ./bringup-runs).")
    ] = None
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False


@app.command("trial", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@options(TrialOptions)
@tears_down_on_signal
def trial_cmd(o: TrialOptions) -> None:
    """Run one trial and print its outcome. Engine flags go after `--`.

    Exit code 0 when it works, 1 when it does not, 2 for bad usage.
    """
    from bringup.engines.targets import TargetError, resolve_target  # inside: `bringup --help` stays fast

    try:
        t = resolve_target(
            engine=o.engine,
            model=o.model,
            scenario=o.scenario,
            python=o.python,
            time_scale=o.time_scale,
            gpus=o.gpus,
        )
    except TargetError as e:
        raise usage_error(str(e)) from None
    if why := _beyond_context(t, o.long_tokens):
        raise usage_error(why)
    cand = _candidate(t, list(o.ctx.args), o.env)
    answers = t.answers + parse_answers(o.answer)
    outcome = _run(o, t, cand, answers, _reference(t, o.reference, o.runs_dir, o.json_out))
    if o.json_out:
        print_json(outcome.model_dump())
    else:
        render_outcome(outcome)
    raise typer.Exit(0 if outcome.works else 1)


def _run(o: TrialOptions, t: Target, cand: Candidate, answers: list[KnownAnswer], ref: Any) -> Outcome:
    """The trial, its progress on one status line (none with --json); a stop ends it with a message."""
    from rich.status import Status

    from bringup.trial.launch import Trial, TrialSettings
    from bringup.trial.process import Interrupted
    from bringup.verify.probes import ProbeConfig

    probe = ProbeConfig(batch_size=o.batch, long_tokens=o.long_tokens, answers=answers, reference=ref)
    settings = TrialSettings(
        timeout=o.timeout, hang_timeout=o.hang_timeout, port=o.port, validate=o.validate, probe=probe
    )
    trial_dir = new_trial_dir(writable_runs_root(o.runs_dir), t.engine.log_dialect, cand.key())
    progress = _Progress(None if o.json_out else Status("launching", console=err_console))
    trial = Trial(
        t.engine, cand, trial_dir, settings, spec=t.spec, version=t.version, on_event=progress.event
    )
    try:
        return progress.running(trial.run)
    except Interrupted as e:
        err_console.print(
            f"[bold yellow]interrupted ({e}); the server was torn down.[/] Log: {trial_dir / 'server.log'}"
        )
        raise typer.Exit(e.exit_code) from None


def _beyond_context(target: Target, long_tokens: int) -> str | None:
    """`--long-tokens` past the model's own context (config.json's max_position_embeddings, a
    scenario's model): refused before the launch. Before, the engine's HTTP 400 was read as wrong
    output that blamed the kernels (issue 40)."""
    from bringup.verify.probes import LONG_DECODE_PROMPT_TOKENS

    facts = target.world.machine_facts()
    most = (facts or {}).get("model.max_context") if facts is not None else _model_context(target.model)
    if not isinstance(most, int) or long_tokens + LONG_DECODE_PROMPT_TOKENS <= most:
        return None
    return (
        f"--long-tokens {long_tokens} is beyond the model's context of {most} tokens (with the "
        f"probe's prompt): give --long-tokens {max(most - LONG_DECODE_PROMPT_TOKENS, 1)} or less"
    )


def _model_context(model: str) -> int | None:
    """The context a local model folder declares (config.json), None when it is not known here."""
    from bringup.facts.modelinfo import fingerprint

    try:
        return fingerprint(model, read_weights=False).max_context if Path(model).is_dir() else None
    except (OSError, ValueError):
        return None


def _candidate(target: Target, tokens: list[str], env: list[str]) -> Candidate:
    """The candidate the engine flags after `--` and the --env variables make (with the user's own
    engine variables); bad usage ends here."""
    from bringup.core.candidate import Candidate, FlagError, parse_env, parse_flags
    from bringup.core.reserved import ReservedFlag, refuse
    from bringup.env.registry import launch_environment

    try:
        refuse(
            tokens, "the engine flags", target.engine.log_dialect, target.spec, target.engine.info.model_flag
        )
    except ReservedFlag as e:
        raise usage_error(str(e)) from None
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
    return Candidate.make(target.engine.log_dialect, target.model, flags, env_vars)


def _reference(target: Target, reference: str, runs_dir: Path | None, json_out: bool) -> Any:
    """The reference for the reference probe (None: none, or a scenario's model), said on stderr."""
    from bringup.verify.reference import ReferenceError, reference_for

    if not target.world.weights_here:
        return None
    try:
        ref, why = reference_for(target.model, reference, cache_dir=runs_root(runs_dir) / "references")
    except ReferenceError as e:
        raise usage_error(f"--reference: {e}") from None
    if not json_out:
        err_console.print(f"[dim]reference:[/] {escape(shown(why))}")
    return ref


class _Progress:
    """The trial's phase and latest log line on one status line (none with --json); GPU hygiene
    messages above it (bringup/facts/gpus.py)."""

    def __init__(self, status: Status | None) -> None:
        self.status = status
        self.phase, self.line = "spawn", ""

    def event(self, kind: str, text: str) -> None:
        if self.status is None:
            return
        if kind == "gpu":  # GPUs busy before the first launch, memory not given back
            err_console.print(f"[dim]gpu:[/] {escape(shown(text))}")
            return
        if kind == "phase":
            self.phase = text
        elif kind == "line" and text.strip():
            from bringup.guard.safetext import safe_line

            self.line = escape(safe_line(text.strip(), 100))  # no escapes or markup reach the terminal
        self.status.update(f"[bold]{self.phase}[/]  [dim]{self.line}[/]")

    def running(self, run: Callable[[], Outcome]) -> Outcome:
        if self.status is None:
            return run()
        with self.status:
            return run()
