"""A tuning on launches: `bringup tune`'s library entry point, from its settings to its result.

It lives in session/ beside `Run` (not in tuning/) because, like a run, it joins every stage: the
target and its identity, the journal, the executors, the tuning session and the reports.

`Tuning` is to `bringup tune` what `bringup.session.run.Run` is to `bringup run`: the CLI parses
its options into `TuneSettings` and calls it. It resolves what to tune (a bring-up run's validated
configuration, or a configuration given), the knobs, the GPUs and the reference; launches each
point through the evaluator (bringup/tuning/evaluator.py) on this machine or a Ray cluster; runs
the tuning session (bringup/tuning/session.py: the search, the repeat phase, the choice), sweeps
the chosen configuration's concurrency, and writes tune.json, FINDINGS.md and the HTML report.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, Field, field_validator

from bringup.core.candidate import Candidate, FlagError, parse_flags, split_env
from bringup.core.datafiles import KnowledgeFileError
from bringup.core.reserved import ReservedFlag, refuse
from bringup.engines.targets import Target, TargetError, resolve_target
from bringup.guard import files, ranges, secrets
from bringup.guard.safetext import safe_text
from bringup.loadgen import BenchConfig
from bringup.loadgen.config import parse_slos
from bringup.record.journal import Journal, RunRecord
from bringup.session.identity import gather_facts, hardware_fingerprint, model_identity
from bringup.session.resume import run_folder
from bringup.session.settings import RunError
from bringup.trial.executor import Executor
from bringup.trial.process import library_call
from bringup.trial.slots import SlotError, parallel_width, parse_gpus
from bringup.tuning.evaluator import LaunchEvaluator, alone, beside
from bringup.tuning.knobs import (
    KnobError,
    as_changes,
    load_knobs,
    parallel_check,
    parse_knob_overrides,
    start_point,
    with_base_levels,
)
from bringup.tuning.repeats import apply_to
from bringup.tuning.result import RepeatRun, SweepPoint, TunePoint, TuneResult
from bringup.tuning.session import TuneSession
from bringup.tuning.tuner import Point, Tuner
from bringup.tuning.verdict import RepeatRule

if TYPE_CHECKING:
    import optuna

    from bringup.tuning.knobs import Knob


class TuneError(ValueError):
    """Bad input for a tuning: what is wrong and what to do."""


class TuneSettings(BaseModel):
    """What `bringup tune` is asked to do (its options, parsed)."""

    run: str | None = None  # tune this bring-up run's validated configuration (its id)
    engine: str | None = None  # or this engine, model (or scenario) and configuration
    model: str | None = None
    scenario: str | None = None
    config: str = ""  # the working configuration's engine flags (without a run)
    knobs: list[str] | None = None  # only these knobs (None: every known one)
    knob: list[str] = Field(default_factory=list)  # levels for a knob: FLAG=v1,v2,...
    # Every number's range is bringup/guard/ranges.py's (a sweep of -1 was recorded as a concurrency).
    trials: int = ranges.LAUNCHES.field(20)  # launch budget of the search
    objective: Literal["goodput", "throughput", "pareto"] = "goodput"
    sampler: Literal["tpe", "random", "grid"] = "tpe"
    slo: str | None = None  # latency targets, e.g. ttft_p99=2s,itl_p99=50ms (engine seconds)
    concurrency: int = ranges.CONCURRENCY.field(8)
    num_prompts: int = ranges.TUNE_REQUESTS.field(64)
    input_len: int = ranges.TOKENS.field(128)
    output_len: int = ranges.TOKENS.field(64)
    range_ratio: float = ranges.SPREAD.field(
        0.0
    )  # mixed lengths: uniform in [L(1-r), L(1+r)] (vLLM's random dataset)
    sweep: str = "1,2,4,8,16,32"  # concurrencies for the chosen configuration's sweep ('' for none)
    seed: int = ranges.SEED.field(0)
    time_scale: float = ranges.TIME_SCALE.field(0.01)  # a scenario's real seconds per simulated second
    python: str | None = None
    timeout: float = ranges.SECONDS.field(1800.0)
    reference: str = "auto"
    parallel: str = "1"  # points at once: a number, or auto
    ray: str | None = None
    gpus: str | None = None
    repeats: int = ranges.REPEATS.field(6)  # the repeat phase's budget in rounds (0: none)
    finalists: int = ranges.FINALISTS.field(2)
    alpha: float = ranges.ALPHA.field(0.05)

    @field_validator("sweep")
    @classmethod
    def _sweep_in_range(cls, v: str) -> str:
        if v.strip():
            ranges.number_list(v, ranges.CONCURRENCY, "--sweep")
        return v

    def sweep_list(self) -> list[int]:
        """The sweep's concurrencies ([] for none)."""
        return ranges.number_list(self.sweep, ranges.CONCURRENCY, "--sweep") if self.sweep.strip() else []


class TuneObserver(Protocol):
    """Progress of a tuning, for the terminal. Every method is optional to act on."""

    def started(self, tuning: Tuning) -> None: ...
    def point(self, p: Point) -> None: ...
    def repeating(self, rule: RepeatRule) -> None: ...
    def repeat(self, r: RepeatRun) -> None: ...


class QuietTuneObserver:
    def started(self, tuning: Tuning) -> None:
        pass

    def point(self, p: Point) -> None:
        pass

    def repeating(self, rule: RepeatRule) -> None:
        pass

    def repeat(self, r: RepeatRun) -> None:
        pass


@dataclass
class Tuning:
    """One `bringup tune`: prepare(), search(), finish() (or execute(), all three)."""

    settings: TuneSettings
    root: Path  # the runs folder, with the journal
    observer: TuneObserver = field(default_factory=QuietTuneObserver)
    # Set by prepare():
    journal: Journal = field(init=False)
    target: Target = field(init=False)
    base: Candidate = field(init=False)  # the working configuration tuned
    row: RunRecord | None = field(default=None, init=False)  # the bring-up run tuned, if any
    run_id: str = field(init=False)
    run_dir: Path = field(init=False)
    tune_id: str = field(init=False)
    tune_dir: Path = field(init=False)
    knobs: list[Knob] = field(init=False)
    gpus: list[str] = field(init=False)
    width: int = field(init=False)  # points at once
    reference: Any = field(default=None, init=False)  # bringup.verify.reference.Reference, or None
    reference_why: str = field(default="", init=False)
    bench_cfg: BenchConfig = field(init=False)
    evaluator: LaunchEvaluator = field(init=False)
    executor: Executor | None = field(default=None, init=False)  # None: one point after another, here
    session: TuneSession = field(init=False)
    # Set by search() and finish():
    t0: float = field(default=0.0, init=False)
    sweep_points: list[SweepPoint] = field(default_factory=list, init=False)
    report_html: Path | None = field(default=None, init=False)

    @library_call
    def execute(self) -> TuneResult:
        self.prepare()
        self.search()
        return self.finish()

    # -- preparing ----------------------------------------------------------------------------
    @library_call
    def prepare(self) -> None:
        """What to tune, on which GPUs, with which knobs and reference; the run and its folders."""
        s = self.settings
        self.journal = Journal(self.root / "journal.sqlite")
        try:
            slos = parse_slos(s.slo) if s.slo else []
            self.sweep_list = s.sweep_list()
        except ValueError as e:
            raise TuneError(f"--slo/--sweep: {e}") from None
        try:
            self.target, self.base = self._what()
            facts, _ = gather_facts(self.target)
            knobs = load_knobs(
                self.target.engine.log_dialect,
                self.target.spec,
                facts,
                only=s.knobs,
                overrides=parse_knob_overrides(s.knob),
            )
            self.gpus = parse_gpus(s.gpus, int(facts.get("gpu.count") or 0))
            self.width = parallel_width(s.parallel, len(self.gpus))
        except (TargetError, KnowledgeFileError, KnobError, SlotError, ReservedFlag) as e:
            raise TuneError(str(e)) from None
        except FlagError as e:
            raise TuneError(f"--config: {e}") from None
        self.knobs = with_base_levels(knobs, self.base.flag_dict)
        self._reference()
        self._open(facts)
        self.bench_cfg = self._bench_cfg(slos)
        self.evaluator = self._evaluator()
        self.executor = self._executor(self.width, s.parallel)
        self.width = self.executor.width if self.executor is not None else 1
        self.session = TuneSession(self._tuner(facts), self._rule(), on_repeat=self.observer.repeat)

    def _what(self) -> tuple[Target, Candidate]:
        """The target and the configuration to tune: a bring-up run's validated one (``run``), or
        the one given with its engine and model."""
        s = self.settings
        if not s.run:
            t = resolve_target(
                engine=s.engine,
                model=s.model,
                scenario=Path(s.scenario) if s.scenario else None,
                python=s.python,
                time_scale=s.time_scale,
                gpus=s.gpus,
            )
            tokens = split_env(s.config)[1]
            refuse(tokens, "tune --config", t.engine.log_dialect, t.spec, t.engine.info.model_flag)
            return t, Candidate.make(t.engine.log_dialect, t.model, parse_flags(tokens, t.spec))
        self.row = row = self.journal.run(s.run)
        if row is None:
            raise TuneError(f"no run {s.run!r} in {self.root / 'journal.sqlite'}")
        if not (row.result or {}).get("final_candidate"):
            raise TuneError(f"run {s.run} has no validated configuration to tune (status {row.status})")
        assert row.result is not None
        rs = row.settings
        t = resolve_target(
            engine=rs.get("engine"),
            model=rs.get("model"),
            scenario=Path(rs["scenario"]) if rs.get("scenario") else None,
            python=rs.get("python"),
            time_scale=s.time_scale,
            gpus=s.gpus,
        )
        return t, Candidate.from_json(row.result["final_candidate"])

    def _reference(self) -> None:
        """The reference every point's trial is probed against (a run's own choice by default)."""
        from bringup.verify.reference import ReferenceError, reference_for

        s, self.reference_why = self.settings, "no reference for a scenario"
        if not self.target.world.weights_here:
            return
        choice = (
            s.reference
            if s.reference != "auto" or not s.run or self.row is None
            else (self.row.settings.get("reference") or "auto")
        )
        try:
            self.reference, self.reference_why = reference_for(
                self.target.model, choice, cache_dir=self.root / "references"
            )
        except ReferenceError as e:
            raise TuneError(f"--reference: {e}") from None

    def _open(self, facts: dict[str, Any]) -> None:
        """The tuning's id and folder, under the run's (a tuning without a run gets a run of its own)."""
        t, s = self.target, self.settings
        self.hw_fp = hardware_fingerprint(facts, t.world.identity_scope())
        self.model_id = model_identity(t)
        self.tune_id = time.strftime("tune-%Y%m%d-%H%M%S")
        if self.row is not None:
            self.run_id = self.row.id
        else:
            self.run_id = f"{self.tune_id}-{t.engine.log_dialect}"
        try:
            self.run_dir = run_folder(self.root, self.run_id)
        except RunError as e:
            raise TuneError(str(e)) from None
        if self.row is None:
            only = {"tune_only": True, "engine": t.engine.log_dialect, "model": t.model}
            only |= {"scenario": s.scenario, "config": s.config}
            self.journal.create_run(
                self.run_id, t.engine.log_dialect, t.version, self.model_id, self.hw_fp, only, self.run_dir
            )
        try:
            self.tune_dir = files.make_dirs(self.run_dir / "tune" / self.tune_id, inside=self.root)
        except files.UnsafeFile as e:
            raise TuneError(str(e)) from None

    def _bench_cfg(self, slos: list[Any]) -> BenchConfig:
        s = self.settings
        return BenchConfig(
            url="http://127.0.0.1:1",
            concurrency=s.concurrency,
            num_prompts=s.num_prompts,
            input_len=s.input_len,
            output_len=s.output_len,
            range_ratio=s.range_ratio,
            seed=s.seed,
            slos=slos,
            warmup=1,
            tokenizer=self.target.world.tokenizer_kind,
        )

    def _evaluator(self) -> LaunchEvaluator:
        s, t = self.settings, self.target
        return LaunchEvaluator(
            t,
            self.base,
            self.bench_cfg,
            self.tune_dir,
            self.journal,
            self.run_id,
            self.hw_fp,
            self.model_id,
            time_scale=t.world.clock_scale(),  # real seconds per engine second (a scenario's time scale)
            timeout=s.timeout,
            objective=s.objective if s.objective != "pareto" else "throughput",
            reference=self.reference,
            machine_gpus=len(self.gpus),
            clock=t.world.clock(),
        )

    def _executor(self, width: int, parallel: str) -> Executor | None:
        """Where points run: on a Ray cluster (``ray``), several at once on this machine (disjoint
        GPUs and ports, the GPU hygiene of a run), or None: one after another, in this process."""
        ev, world, ray = self.evaluator, self.target.world, self.settings.ray
        if ray:
            from bringup.trial.rayexec import RayClusterError, RayMissing, cluster_executor

            try:
                return cluster_executor(
                    ev.remote_job,
                    ev.hw_fp,
                    ray,
                    parallel,
                    len(self.gpus),
                    not world.gpus_here,
                    finish=ev.finish_job,
                    clock=world.clock(),
                )
            except (RayMissing, RayClusterError) as e:
                raise TuneError(str(e)) from None
        if width <= 1:
            return None
        from bringup.facts.gpus import default_watch, visible_indices
        from bringup.trial.executor import LocalExecutor
        from bringup.trial.slots import GpuSlots

        watch = default_watch()

        def back(held: list[str]) -> bool:
            idx = visible_indices(",".join(held))
            return watch.is_back(idx) if idx is not None else True

        return LocalExecutor(ev.run_job, GpuSlots(self.gpus), width, gpu_free=back, clock=world.clock())

    def _tuner(self, facts: dict[str, Any]) -> Tuner:
        s = self.settings
        return Tuner(
            self.knobs,
            self.evaluator,
            objective=s.objective,
            budget=s.trials,
            seed=s.seed,
            sampler=s.sampler,
            on_point=self.observer.point,
            predicted_infeasible=parallel_check(facts, self.base.flag_dict),
            start=start_point(self.knobs, self.base.flag_dict),
            storage=self._storage(),
            study_name=self.tune_id,
            clock=self.target.world.clock(),
        )

    def _storage(self) -> optuna.storages.BaseStorage | None:
        """Points at once: the study in a journal file in the tune folder, Optuna's storage that
        several processes (or Ray workers) can share, appended to as each point is asked and told.
        One at a time: in memory, as before."""
        if self.width <= 1:
            return None
        import optuna
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(str(self.tune_dir / "optuna.journal")))

    def _rule(self) -> RepeatRule | None:
        """The repeat phase's rule (None: no repeats, or a Pareto front, which has no single winner)."""
        s = self.settings
        if not s.repeats or s.objective == "pareto":
            return None
        return RepeatRule(s.finalists, min(3, s.repeats), s.repeats, s.alpha)

    # -- searching ------------------------------------------------------------------------------
    @library_call
    def search(self) -> None:
        """The search, the repeat phase (alone; beside each other first when the search shared
        this host), and the chosen configuration's concurrency sweep."""
        self.t0 = time.time()
        self.observer.started(self)
        ev, session = self.evaluator, self.session
        session.search(self.executor, ev.job if self.executor is not None else None)
        if session.rule is not None:
            self.observer.repeating(session.rule)
            ray = self.settings.ray
            measure, close = alone(ev, (lambda: self._executor(1, "1")) if ray else None)
            try:
                shared = (
                    beside(ev, lambda: self._executor(self.width, str(self.width)))
                    if self.width > 1
                    else None
                )
                session.repeat(measure, shared)
            finally:
                close()
        best = session.chosen()
        self.sweep_points = ev.sweep(best, self.sweep_list) if best is not None and self.sweep_list else []

    # -- the result -------------------------------------------------------------------------------
    @library_call
    def finish(self) -> TuneResult:
        """The result, with the repeat phase's verdict and the reference's, into tune.json,
        FINDINGS.md (the tuning's, and the run's again) and the run's HTML report."""
        session = self.session
        result = to_result(
            session.tuner,
            self.tune_id,
            self.run_dir,
            self.target,
            self.base,
            self.bench_cfg,
            self.sweep_points,
            self.t0,
            parallel=self.width,
        )
        if session.outcome is not None and session.rule is not None:
            apply_to(result, session.outcome, session.rule)
        result.reference = self.reference_why
        if self.reference is not None and result.best is not None:
            result.reference_verdict = self.evaluator.verdicts.get(result.best.trial_dir or "", "not probed")
        secrets.write_text(self.tune_dir / "tune.json", result.model_dump_json(indent=2))
        _write_findings(self.run_dir, self.tune_dir, result)
        self.report_html = _write_html(self.run_dir)
        return result


def to_result(
    tuner: Tuner,
    tune_id: str,
    run_dir: Path,
    target: Target,
    base: Candidate,
    bench_cfg: BenchConfig,
    sweep: list[SweepPoint],
    t0: float,
    parallel: int = 1,
) -> TuneResult:
    def tp(p: Point) -> TunePoint:
        ev = p.evaluation
        cmd = ev.command or base.with_changes(as_changes(p.knobs)).shell_command(
            target.engine.command_prefix(base)
        )
        return TunePoint(
            number=p.number,
            knobs=p.knobs,
            status=ev.status,
            failure_class=ev.failure_class,
            phase=ev.phase,
            evidence=ev.evidence or ev.reason or None,
            metrics=ev.metrics,
            objective=p.objective,
            launch_s=ev.launch_s,
            simulated_s=ev.simulated_s,
            trial_dir=ev.trial_dir,
            command=cmd,
            clock_start_s=p.clock_start_s,
            clock_end_s=p.clock_end_s,
            gpus=list(ev.gpus),
            where=ev.where,
        )

    best = tuner.best()
    sims = [p.evaluation.simulated_s for p in tuner.points if p.evaluation.simulated_s]
    return TuneResult(
        tune_id=tune_id,
        run_dir=str(run_dir),
        engine=target.engine.log_dialect,
        engine_version=target.version,
        model=target.model,
        base_command=base.shell_command(target.engine.command_prefix(base)),
        objective=tuner.objective,
        slo={x.name: x.target_s for x in bench_cfg.slos},
        workload=json.loads(
            bench_cfg.model_dump_json(
                include={
                    "concurrency",
                    "request_rate",
                    "num_prompts",
                    "input_len",
                    "output_len",
                    "range_ratio",
                    "prefix_len",
                    "seed",
                }
            )
        ),
        knobs={k.flag: k.levels for k in tuner.knobs},
        points=[tp(p) for p in tuner.points],
        best=tp(best) if best else None,
        best_command=tp(best).command if best else None,
        pareto=[p.number for p in tuner.pareto()],
        sweep=sweep,
        launches=tuner.launches,
        grid_size=tuner.grid_size,
        wall_seconds=time.time() - t0,
        simulated_hours=tuner.run_clock.hours(sum(sims)),
        parallel=parallel,
        clock=tuner.run_clock.kind,
        clock_end_s=tuner.clock if tuner.points else None,
        lost_trials=list(tuner.lost),
    )


def _write_findings(run_dir: Path, tune_dir: Path, result: TuneResult) -> None:
    """FINDINGS.md of the tuning (in its folder), and the run's FINDINGS.md again with every
    tuning of the run in it, when the run has a bring-up result."""
    from bringup.report.findings import load_result, render_markdown
    from bringup.tuning.findings import tune_markdown
    from bringup.tuning.result import load_tunes

    secrets.write_text(tune_dir / "FINDINGS.md", safe_text("\n".join(tune_markdown(result)) + "\n"))
    if (run_dir / "findings.json").is_file():
        secrets.write_text(
            run_dir / "FINDINGS.md", render_markdown(load_result(run_dir), load_tunes(run_dir))
        )


def _write_html(run_dir: Path) -> Path:
    """The HTML report of the run folder (bring-up, if any, and every tuning session in it)."""
    from bringup.report.findings import load_result
    from bringup.report.html import load_tunes, write_html

    result = load_result(run_dir) if (run_dir / "findings.json").is_file() else None
    return write_html(run_dir, result, load_tunes(run_dir))
