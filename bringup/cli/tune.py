"""``bringup tune``: make a working configuration fast, under latency targets.

The options parse into `bringup.session.tuning.TuneSettings`; `Tuning` does the work; this module
prints its progress and its result.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
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
from bringup.cli.tune_repeats import on_run, print_repeats
from bringup.guard import ranges

if TYPE_CHECKING:  # every cli module is imported at start: the tuner (Optuna, numpy) only when tuning
    from bringup.session.tuning import TuneSettings, Tuning
    from bringup.tuning.result import RepeatRun, TuneResult
    from bringup.tuning.tuner import Point
    from bringup.tuning.verdict import RepeatRule


class TuneOptions:
    """`bringup tune`'s options."""

    run: Annotated[
        str | None, typer.Option("--run", help="Tune the validated configuration of this bring-up run (id).")
    ] = None
    engine: Annotated[str | None, typer.Option(help="vllm or sglang (with --model and --config).")] = None
    model: Annotated[str | None, typer.Option(help="Model folder or hub id.")] = None
    scenario: Annotated[Path | None, typer.Option(help="A scenario file (with a performance model).")] = None
    config: Annotated[str, typer.Option(help="The working configuration's engine flags (without --run).")] = (
        ""
    )
    knobs: Annotated[str | None, typer.Option(help="Only these knobs (comma-separated flags).")] = None
    knob: Annotated[list[str], typer.Option(help="Levels for a knob: FLAG=v1,v2,... (repeatable).")] = []
    trials: Annotated[int, typer.Option(help="Launch budget.", **ranges.LAUNCHES.option())] = 20
    objective: Annotated[
        str, typer.Option(help="goodput (requests/s meeting --slo), throughput, or pareto.")
    ] = "goodput"
    sampler: Annotated[str, typer.Option(help="tpe (Optuna), random, or grid (every point).")] = "tpe"
    slo: Annotated[
        str | None, typer.Option(help="Latency targets, e.g. ttft_p99=2s,itl_p99=50ms (engine seconds).")
    ] = None
    concurrency: Annotated[
        int, typer.Option(help="Concurrent requests in the workload.", **ranges.CONCURRENCY.option())
    ] = 8
    num_prompts: Annotated[int, typer.Option(help="Requests per point.", **ranges.TUNE_REQUESTS.option())] = (
        64
    )
    input_len: Annotated[int, typer.Option(help="Prompt tokens.", **ranges.TOKENS.option())] = 128
    output_len: Annotated[int, typer.Option(help="Output tokens.", **ranges.TOKENS.option())] = 64
    range_ratio: Annotated[
        float,
        typer.Option(
            help="Mixed lengths: each prompt and output uniform in [L(1-r), L(1+r)] (0: fixed).",
            **ranges.SPREAD.option(),
        ),
    ] = 0.0
    sweep: Annotated[
        str,
        typer.Option(
            help="Concurrencies for the best configuration's sweep ('' for none).",
            **ranges.CONCURRENCY.list_option(),
        ),
    ] = "1,2,4,8,16,32"
    seed: Annotated[
        int, typer.Option(help="Seed for the sampler and the workload.", **ranges.SEED.option())
    ] = 0
    time_scale: Annotated[
        float,
        typer.Option(help="Scenario only: real seconds per simulated second.", **ranges.TIME_SCALE.option()),
    ] = 0.01
    python: Annotated[str | None, typer.Option(help="Python interpreter of the engine's environment.")] = None
    timeout: Annotated[
        float, typer.Option(help="Seconds from launch to ready per point.", **ranges.SECONDS.option())
    ] = 1800.0
    reference: Annotated[
        str,
        typer.Option(
            help="Reference the winner must agree with: a file from `bringup reference`, "
            "auto (the run's, or in-process when the model is a local folder that fits), none."
        ),
    ] = "auto"
    parallel: Annotated[
        str | None,
        typer.Option(
            help="Points at once, each on its own GPUs and port: a number, or auto "
            "(one per GPU; a point that needs several GPUs takes several). Default 1; with --ray, auto "
            "(one per GPU of the cluster's nodes of this hardware)."
        ),
    ] = None
    ray: Annotated[str | None, typer.Option("--ray", help=RAY_HELP)] = None
    gpus: Annotated[
        str | None,
        typer.Option(
            help="The GPUs the tuning may use (CUDA_VISIBLE_DEVICES entries, e.g. 0,1; "
            "default: every GPU the machine has)."
        ),
    ] = None
    repeats: Annotated[
        int,
        typer.Option(
            **ranges.REPEATS.option(),
            help="Repeat budget: after the search, at most this many interleaved rounds of the baseline "
            "and the finalists, until a winner beats the baseline beyond noise or none can (0: no "
            "repeats, the search's single measurements name the winner).",
        ),
    ] = 6
    finalists: Annotated[
        int,
        typer.Option(
            help="The search's best points measured again beside the baseline.", **ranges.FINALISTS.option()
        ),
    ] = 2
    alpha: Annotated[
        float,
        typer.Option(
            help="False-verdict rate the winner's test is held to (family-wise).", **ranges.ALPHA.option()
        ),
    ] = 0.05
    runs_dir: Annotated[
        Path | None, typer.Option(help="Runs folder with the journal (default ./bringup-runs).")
    ] = None
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False


@app.command("tune")
@options(TuneOptions)
@tears_down_on_signal
def tune_cmd(o: TuneOptions) -> None:
    """Search the performance knobs (memory fraction, batch limits, chunked prefill, CUDA-graph sizes,
    parallelism) for the best goodput or a Pareto front; failures become infeasible points."""
    # Optuna and aiohttp load here, not when the CLI starts: `bringup --help` and the other commands need neither.
    from bringup.session.tuning import TuneError, Tuning
    from bringup.trial.process import Interrupted

    settings = _settings(o)
    tuning = Tuning(settings, writable_runs_root(o.runs_dir), TuneLines())
    # With --json, stdout holds the one JSON object: whatever else prints to it meanwhile (Ray's
    # thread saying a node died, between two library calls that each put stdout back) goes to stderr.
    with contextlib.redirect_stdout(sys.stderr) if o.json_out else contextlib.nullcontext():
        try:
            tuning.prepare()
        except TuneError as e:
            raise usage_error(str(e)) from None
        try:
            tuning.search()
        except Interrupted as e:
            err_console.print(f"[bold yellow]interrupted ({e}); servers torn down.[/]")
            raise typer.Exit(e.exit_code) from None
        result = tuning.finish()
    if o.json_out:
        html = tuning.report_html
        print_json(json.loads(result.model_dump_json()) | ({"report_html": str(html)} if html else {}))
    else:
        _print_result(result, tuning)
    raise typer.Exit(0 if result.best else 1)


def _settings(o: TuneOptions) -> TuneSettings:
    """The options as the library takes them (the two choices typer hands over as plain strings, checked)."""
    from bringup.session.tuning import TuneSettings

    if o.objective not in ("goodput", "throughput", "pareto"):
        raise usage_error(f"--objective {o.objective!r}: use goodput, throughput or pareto")
    if o.sampler not in ("tpe", "random", "grid"):
        raise usage_error(f"--sampler {o.sampler!r}: use tpe, random or grid")
    return TuneSettings(
        run=o.run,
        engine=o.engine,
        model=o.model,
        scenario=str(o.scenario) if o.scenario else None,
        config=o.config,
        knobs=[k.strip() for k in o.knobs.split(",") if k.strip()] if o.knobs else None,
        knob=o.knob,
        trials=o.trials,
        objective=o.objective,
        sampler=o.sampler,
        slo=o.slo,
        concurrency=o.concurrency,
        num_prompts=o.num_prompts,
        input_len=o.input_len,
        output_len=o.output_len,
        range_ratio=o.range_ratio,
        sweep=o.sweep,
        seed=o.seed,
        time_scale=o.time_scale,
        python=o.python,
        timeout=o.timeout,
        reference=o.reference,
        parallel=o.parallel or ("auto" if o.ray else "1"),  # as `bringup run` takes them
        ray=o.ray,
        gpus=o.gpus,
        repeats=o.repeats,
        finalists=o.finalists,
        alpha=o.alpha,
    )


class TuneLines:
    """A tuning's progress on stderr (a TuneObserver, bringup.session.tuning)."""

    def started(self, tuning: Tuning) -> None:
        s, width, ray = tuning.settings, tuning.width, tuning.settings.ray
        err_console.print(
            f"tuning {len(tuning.knobs)} knobs ({tuning.session.tuner.grid_size} grid points) with {s.sampler}, "
            f"budget {s.trials} launches"
            + (f", {width} at once on Ray {ray}" if ray else "")
            + (f", {width} at once on GPUs {','.join(tuning.gpus)}" if width > 1 and not ray else "")
            + f"; points go to {tuning.tune_dir}"
        )

    def point(self, p: Point) -> None:
        e = p.evaluation
        if not e.launched:
            return
        note = e.failure_class or e.reason or ""
        err_console.print(
            f"  point {p.number}: {' '.join(f'{k} {v}' for k, v in p.knobs.items())} -> {e.status}"
            + (f" objective {p.objective:.3g}" if p.objective is not None else "")
            + (f" ({note})" if note else "")
        )

    def repeating(self, rule: RepeatRule) -> None:
        err_console.print(
            f"repeating the baseline and {rule.finalists} finalists, interleaved: {rule.describe()}"
        )

    def repeat(self, r: RepeatRun) -> None:
        on_run(r)


def _print_result(result: TuneResult, tuning: Tuning) -> None:
    """Every launched point as a table, what was ruled out without a launch, the best, where to read more."""
    table = Table(box=None, header_style="bold")
    for c in ("#", "knobs", "status", "objective", "output tok/s", "p99 e2e s", "note"):
        table.add_column(c, overflow="fold")
    skipped = [p for p in result.points if p.failure_class == "predicted"]
    for p in result.points:
        if p.failure_class == "predicted":
            continue
        m = p.metrics
        table.add_row(
            str(p.number),
            Text(shown(" ".join(f"{k} {v}" for k, v in p.knobs.items()))),
            p.status,
            f"{p.objective:.3g}" if p.objective is not None else "",
            f"{m.get('output_tps', 0):.1f}" if m else "",
            f"{m.get('e2e_p99_s', 0):.3f}" if m else "",
            Text(shown((p.failure_class or "") + (f": {p.evidence[:60]}" if p.evidence else ""))),
        )
    out_console.print(table)
    if skipped:
        out_console.print(
            f"{len(skipped)} configurations ruled out without a launch, e.g. point {skipped[0].number}: "
            f"{shown(skipped[0].evidence)}",
            markup=False,
        )
    _print_best(result)
    html = tuning.report_html
    out_console.print(
        f"{result.launches} launches of {result.grid_size} grid points; result: {tuning.tune_dir / 'tune.json'}"
        + (f"; report: {html}" if html else "")
    )


def _print_best(result: TuneResult) -> None:
    if result.repeats is not None:
        print_repeats(result.repeats)
    if result.best:
        m = result.best.metrics
        kept = result.repeats is not None and not result.repeats.beats_baseline
        head = (
            "kept: the baseline"
            if kept and result.repeats and result.best.number == result.repeats.baseline
            else "best"
        )
        out_console.print(
            f"[bold green]{head}[/] (point {result.best.number}, {result.objective} {result.best.objective:.3g} "
            "in the search): "
            f"{m.get('output_tps', 0):.1f} output tok/s, {m.get('rps', 0):.2f} req/s, "
            f"TTFT p99 {m.get('ttft_p99_s', 0):.3f} s, ITL p99 {m.get('itl_p99_s', 0):.4f} s"
        )
        out_console.print(result.best_command, markup=False, highlight=False)
        if result.reference_verdict:
            out_console.print(f"reference ({result.reference}): {result.reference_verdict}", markup=False)
    else:
        out_console.print("[bold red]no feasible point[/]: every launch failed (see the table)")
