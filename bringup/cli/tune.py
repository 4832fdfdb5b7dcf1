"""``bringup tune``: make a working configuration fast, under latency targets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal, cast

import typer
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


def _objective_and_sampler(objective: str, sampler: str) -> tuple[Any, Literal["tpe", "random", "grid"]]:
    """The two choices typer hands over as plain strings, checked."""
    if objective not in ("goodput", "throughput", "pareto"):
        raise usage_error(f"--objective {objective!r}: use goodput, throughput or pareto")
    if sampler not in ("tpe", "random", "grid"):
        raise usage_error(f"--sampler {sampler!r}: use tpe, random or grid")
    return objective, cast(Literal["tpe", "random", "grid"], sampler)


@app.command("tune")
def tune_cmd(
    run: str = typer.Option(
        None, "--run", help="Tune the validated configuration of this bring-up run (id)."
    ),
    engine: str = typer.Option(None, help="vllm or sglang (with --model and --config)."),
    model: str = typer.Option(None, help="Model folder or hub id."),
    scenario: Path = typer.Option(None, help="A scenario file (with a performance model)."),
    config: str = typer.Option("", help="The working configuration's engine flags (without --run)."),
    knobs: str = typer.Option(None, help="Only these knobs (comma-separated flags)."),
    knob: list[str] = typer.Option([], help="Levels for a knob: FLAG=v1,v2,... (repeatable)."),
    trials: int = typer.Option(20, min=1, help="Launch budget."),
    objective: str = typer.Option(
        "goodput", help="goodput (requests/s meeting --slo), throughput, or pareto."
    ),
    sampler: str = typer.Option("tpe", help="tpe (Optuna), random, or grid (every point)."),
    slo: str = typer.Option(None, help="Latency targets, e.g. ttft_p99=2s,itl_p99=50ms (engine seconds)."),
    concurrency: int = typer.Option(8, min=1, help="Concurrent requests in the workload."),
    num_prompts: int = typer.Option(64, min=4, help="Requests per point."),
    input_len: int = typer.Option(128, min=1, help="Prompt tokens."),
    output_len: int = typer.Option(64, min=1, help="Output tokens."),
    sweep: str = typer.Option(
        "1,2,4,8,16,32", help="Concurrencies for the best configuration's sweep ('' for none)."
    ),
    seed: int = typer.Option(0, help="Seed for the sampler and the workload."),
    time_scale: float = typer.Option(
        0.01, help="Scenario only: real seconds per simulated second.", callback=positive
    ),
    python: str = typer.Option(None, help="Python interpreter of the engine's environment."),
    timeout: float = typer.Option(1800.0, help="Seconds from launch to ready per point.", callback=positive),
    reference: str = typer.Option(
        "auto",
        help="Reference the winner must agree with: a file from `bringup reference`, "
        "auto (the run's, or in-process when the model is a local folder that fits), none.",
    ),
    parallel: str = typer.Option(
        None,
        help="Points at once, each on its own GPUs and port: a number, or auto "
        "(one per GPU; a point that needs several GPUs takes several). Default 1; with --ray, auto "
        "(one per GPU of the cluster's nodes of this hardware).",
    ),
    ray: str = typer.Option(None, "--ray", help=RAY_HELP),
    gpus: str = typer.Option(
        None,
        help="The GPUs the tuning may use (CUDA_VISIBLE_DEVICES entries, e.g. 0,1; "
        "default: every GPU the machine has).",
    ),
    repeats: int = typer.Option(
        6,
        min=0,
        help="Repeat budget: after the search, at most this many interleaved rounds of the baseline "
        "and the finalists, until a winner beats the baseline beyond noise or none can (0: no "
        "repeats, the search's single measurements name the winner).",
    ),
    finalists: int = typer.Option(
        2, min=1, help="The search's best points measured again beside the baseline."
    ),
    alpha: float = typer.Option(
        0.05, min=0.0001, max=0.5, help="False-verdict rate the winner's test is held to (family-wise)."
    ),
    runs_dir: Path = typer.Option(None, help="Runs folder with the journal (default ./bringup-runs)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Search the performance knobs (memory fraction, batch limits, chunked prefill, CUDA-graph sizes,
    parallelism) for the best goodput or a Pareto front; failures become infeasible points."""
    # Optuna and aiohttp load here, not when the CLI starts: `bringup --help` and the other commands need neither.
    from bringup.core.candidate import Candidate, FlagError, parse_flags
    from bringup.core.datafiles import KnowledgeFileError
    from bringup.engines.targets import TargetError, resolve_target
    from bringup.loadgen import BenchConfig
    from bringup.loadgen.config import parse_slos
    from bringup.record.journal import Journal
    from bringup.session.identity import gather_facts, hardware_fingerprint, model_identity
    from bringup.trial.process import Interrupted, install_signal_handlers
    from bringup.trial.rayexec import RayClusterError, RayMissing  # Ray itself is imported only with --ray
    from bringup.trial.slots import SlotError, parallel_width, parse_gpus
    from bringup.tuning.knobs import (
        KnobError,
        load_knobs,
        parallel_check,
        parse_knob_overrides,
        start_point,
        with_base_levels,
    )
    from bringup.tuning.repeats import apply_to
    from bringup.tuning.session import LaunchEvaluator, to_result
    from bringup.tuning.tuner import Tuner
    from bringup.tuning.verdict import RepeatRule
    from bringup.verify.reference import ReferenceError, reference_for

    install_signal_handlers()  # on the main thread: SIGTERM/SIGHUP tear servers down (exit 143/129)
    goal, how = _objective_and_sampler(objective, sampler)
    parallel = parallel or ("auto" if ray else "1")  # as `bringup run` takes them
    root = writable_runs_root(runs_dir)
    journal = Journal(root / "journal.sqlite")
    try:
        slos = parse_slos(slo) if slo else []
        sweep_list = [int(x) for x in sweep.split(",") if x.strip()] if sweep else []
    except ValueError as e:
        raise usage_error(f"--slo/--sweep: {e}") from None
    try:
        if run:
            row = journal.run(run)
            if row is None:
                raise usage_error(f"no run {run!r} in {root / 'journal.sqlite'}")
            if not (row.result or {}).get("final_candidate"):
                raise usage_error(f"run {run} has no validated configuration to tune (status {row.status})")
            s = row.settings
            target = resolve_target(
                engine=s.get("engine"),
                model=s.get("model"),
                scenario=Path(s["scenario"]) if s.get("scenario") else None,
                python=s.get("python"),
                time_scale=time_scale,
                gpus=gpus,
            )
            assert row.result is not None
            base = Candidate.from_json(row.result["final_candidate"])
            run_id, run_dir = row.id, Path(row.run_dir)
        else:
            target = resolve_target(
                engine=engine, model=model, scenario=scenario, python=python, time_scale=time_scale, gpus=gpus
            )
            base = Candidate.make(target.engine.log_dialect, target.model, parse_flags(config, target.spec))
            run_id = None
        facts, _ = gather_facts(target)
        knob_list = load_knobs(
            target.engine.log_dialect,
            target.spec,
            facts,
            only=[k.strip() for k in knobs.split(",") if k.strip()] if knobs else None,
            overrides=parse_knob_overrides(knob),
        )
        gpu_list = parse_gpus(gpus, int(facts.get("gpu.count") or 0))
        width = parallel_width(parallel, len(gpu_list))
    except (TargetError, KnowledgeFileError, KnobError, SlotError) as e:
        raise usage_error(str(e)) from None
    except FlagError as e:
        raise usage_error(f"--config: {e}") from None
    knob_list = with_base_levels(knob_list, base.flag_dict)
    ref, ref_why = None, "no reference for a scenario"
    if not target.engine.simulated:
        choice = (
            reference
            if reference != "auto" or not run or row is None
            else (row.settings.get("reference") or "auto")
        )
        try:
            ref, ref_why = reference_for(target.model, choice, cache_dir=root / "references")
        except ReferenceError as e:
            raise usage_error(f"--reference: {e}") from None
    hw_fp = hardware_fingerprint(facts, target.engine.identity_scope())
    model_id = model_identity(target)
    tune_id = time.strftime("tune-%Y%m%d-%H%M%S")
    if run_id is None:
        run_id = f"{tune_id}-{target.engine.log_dialect}"
        run_dir = root / "runs" / run_id
        journal.create_run(
            run_id,
            target.engine.log_dialect,
            target.version,
            model_id,
            hw_fp,
            {
                "tune_only": True,
                "engine": target.engine.log_dialect,
                "model": target.model,
                "scenario": str(scenario) if scenario else None,
                "config": config,
            },
            run_dir,
        )
    tune_dir = run_dir / "tune" / tune_id
    tune_dir.mkdir(parents=True, exist_ok=True)
    cfg = BenchConfig(
        url="http://127.0.0.1:1",
        concurrency=concurrency,
        num_prompts=num_prompts,
        input_len=input_len,
        output_len=output_len,
        seed=seed,
        slos=slos,
        warmup=1,
        tokenizer=target.engine.tokenizer_kind,
    )
    ts = target.engine.clock_scale()  # real seconds per engine second (a scenario's time scale)
    ev = LaunchEvaluator(
        target,
        base,
        cfg,
        tune_dir,
        journal,
        run_id,
        hw_fp,
        model_id,
        time_scale=ts,
        timeout=timeout,
        objective=goal if goal != "pareto" else "throughput",
        reference=ref,
        machine_gpus=len(gpu_list),
        clock=target.engine.clock(),
    )
    try:
        ex = _executor(ev, gpu_list, width, parallel, ray, target.engine)
    except (RayMissing, RayClusterError) as e:
        raise usage_error(str(e)) from None
    width = ex.width if ex is not None else 1
    table = Table(box=None, header_style="bold")
    for c in ("#", "knobs", "status", "objective", "output tok/s", "p99 e2e s", "note"):
        table.add_column(c, overflow="fold")

    def on_point(p) -> None:
        e = p.evaluation
        if not e.launched:
            return
        note = e.failure_class or e.reason or ""
        err_console.print(
            f"  point {p.number}: {' '.join(f'{k} {v}' for k, v in p.knobs.items())} -> {e.status}"
            + (f" objective {p.objective:.3g}" if p.objective is not None else "")
            + (f" ({note})" if note else "")
        )

    tuner = Tuner(
        knob_list,
        ev,
        objective=goal,
        budget=trials,
        seed=seed,
        sampler=how,
        on_point=on_point,
        predicted_infeasible=parallel_check(facts, base.flag_dict),
        start=start_point(knob_list, base.flag_dict),
        storage=_storage(tune_dir, width),
        study_name=tune_id,
        clock=target.engine.clock(),
    )
    t0 = time.time()
    err_console.print(
        f"tuning {len(knob_list)} knobs ({tuner.grid_size} grid points) with {sampler}, "
        f"budget {trials} launches"
        + (f", {width} at once on Ray {ray}" if ray else "")
        + (f", {width} at once on GPUs {','.join(gpu_list)}" if width > 1 and not ray else "")
        + f"; points go to {tune_dir}"
    )
    rule = RepeatRule(finalists, min(3, repeats), repeats, alpha) if repeats and goal != "pareto" else None
    try:
        outcome = _search(
            tuner,
            ex,
            ev,
            rule,
            lambda w: _executor(ev, gpu_list, w, str(w), ray, target.engine),
            width,
            ray,
        )
        best_knobs = _chosen(tuner, outcome)
        sweep_pts = ev.sweep(best_knobs, sweep_list) if best_knobs is not None and sweep_list else []
    except Interrupted as e:
        err_console.print(f"[bold yellow]interrupted ({e}); servers torn down.[/]")
        raise typer.Exit(e.exit_code) from None
    result = to_result(tuner, tune_id, run_dir, target, base, cfg, sweep_pts, t0, parallel=width)
    if outcome is not None and rule is not None:
        apply_to(result, outcome, rule)
    result.reference = ref_why
    if ref is not None and result.best is not None:
        result.reference_verdict = ev.verdicts.get(result.best.trial_dir or "", "not probed")
    from bringup.guard import secrets

    secrets.write_text(tune_dir / "tune.json", result.model_dump_json(indent=2))
    _write_findings(run_dir, tune_dir, result)
    html = _write_html(run_dir)
    if json_out:
        print_json(json.loads(result.model_dump_json()) | ({"report_html": str(html)} if html else {}))
        raise typer.Exit(0 if result.best else 1)
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
    out_console.print(
        f"{result.launches} launches of {result.grid_size} grid points; result: {tune_dir / 'tune.json'}"
        + (f"; report: {html}" if html else "")
    )
    raise typer.Exit(0 if result.best else 1)


def _search(tuner, ex, ev, rule, make_executor, width: int, ray: str | None):
    """The search, then (with a rule) the repeat phase: the baseline and the finalists again,
    interleaved, alone; beside each other first when the search shared this host."""
    if ex is not None:
        tuner.run(ex, ev.job)
    else:
        tuner.run()
    if rule is None:
        return None
    from bringup.cli import tune_repeats as tr
    from bringup.tuning.repeats import Repeats

    err_console.print(
        f"repeating the baseline and {rule.finalists} finalists, interleaved: {rule.describe()}"
    )
    measure, close = tr.alone(ev, (lambda: make_executor(1)) if ray else None)
    try:
        shared = tr.beside(ev, lambda: make_executor(width)) if width > 1 else None
        return Repeats(rule, measure, tuner.objective, shared, tr.on_run).run(tuner.points, tuner.start)
    finally:
        close()


def _chosen(tuner, outcome) -> dict[str, str] | None:
    """The configuration the tuning ends with: the verdict's (winner, or the baseline kept), or
    without repeats the search's best."""
    if outcome is not None:
        if outcome.winner is not None:
            return outcome.winner.knobs
        if not outcome.base.failed and outcome.base.number:
            return outcome.base.knobs
    best = tuner.best()
    return best.knobs if best else None


def _print_best(result) -> None:
    if result.repeats is not None:
        from bringup.cli.tune_repeats import print_repeats

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


def _write_findings(run_dir: Path, tune_dir: Path, result) -> None:
    """FINDINGS.md of the tuning (in its folder), and the run's FINDINGS.md again with every
    tuning of the run in it, when the run has a bring-up result."""
    from bringup.guard import secrets
    from bringup.report.findings import load_result, render_markdown
    from bringup.tuning.findings import tune_markdown
    from bringup.tuning.result import load_tunes

    secrets.write_text(tune_dir / "FINDINGS.md", "\n".join(tune_markdown(result)) + "\n")
    if (run_dir / "findings.json").is_file():
        secrets.write_text(
            run_dir / "FINDINGS.md", render_markdown(load_result(run_dir), load_tunes(run_dir))
        )


def _storage(tune_dir: Path, width: int):
    """Points at once: the study in a journal file in the tune folder, Optuna's storage that
    several processes (or Ray workers) can share, appended to as each point is asked and told.
    One at a time: in memory, as before."""
    if width <= 1:
        return None
    import optuna
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(tune_dir / "optuna.journal")))


def _executor(ev, gpus: list[str], width: int, parallel: str, ray: str | None, engine):
    """Where points run: on a Ray cluster (--ray), several at once on this machine (disjoint GPUs
    and ports, the GPU hygiene of a run), or None: one after another, in this process."""
    if ray:
        from bringup.trial.rayexec import cluster_executor

        return cluster_executor(
            ev.remote_job,
            ev.hw_fp,
            ray,
            parallel,
            len(gpus),
            engine.simulated,
            finish=ev.finish_job,
            clock=engine.clock(),
        )
    if width <= 1:
        return None
    from bringup.facts.gpus import default_watch, visible_indices
    from bringup.trial.executor import LocalExecutor
    from bringup.trial.slots import GpuSlots

    watch = default_watch()

    def back(held: list[str]) -> bool:
        idx = visible_indices(",".join(held))
        return watch.is_back(idx) if idx is not None else True

    return LocalExecutor(ev.run_job, GpuSlots(gpus), width, gpu_free=back, clock=engine.clock())


def _write_html(run_dir: Path) -> Path:
    """The HTML report of the run folder (bring-up, if any, and every tuning session in it)."""
    from bringup.report.findings import load_result
    from bringup.report.html import load_tunes, write_html

    result = load_result(run_dir) if (run_dir / "findings.json").is_file() else None
    return write_html(run_dir, result, load_tunes(run_dir))
