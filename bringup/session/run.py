"""A bring-up run: the loop that launches what the strategy decides, until one validates.

The target's --help and facts build the space and the knowledge; the strategy decides each next
launch (and whether to screen it first); each launch is a trial, recorded in the journal and fed
back to the strategy. Once a configuration passes every probe, minimizing (delta debugging,
`bringup.search.minimize`) finds the smallest change from the baseline that fixes it, and the report
says why everything else failed. Decisions live in the strategy, results in `bringup.record.results`,
identities in `bringup.session.identity`: this module is only the loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from pydantic import BaseModel, Field

from bringup.core.candidate import Candidate, FlagError, change_tokens, parse_command
from bringup.core.reserved import reserved_flag
from bringup.engines.targets import Target, resolve_target
from bringup.env.registry import absent_components, launch_environment, names_absent_component, other_platform
from bringup.facts.gpus import default_watch, visible_indices
from bringup.guard import secrets
from bringup.guard.runlock import RunLock, RunLocked
from bringup.knowledge.rules import Knowledge, memory_model_for
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal, TrialRecord
from bringup.record.results import Attempt, Prediction, Purpose, RunResult
from bringup.search.envfactors import EnvFactors
from bringup.search.minimize import MinimalFix, minimal_fix
from bringup.search.screening import ScreeningPolicy, one_gpu_screen, screen_flags
from bringup.search.space import Space, add_baseline_flags, build_space, drop_inapplicable, drop_levels
from bringup.search.strategy import Strategy
from bringup.session.identity import gather_facts, hardware_fingerprint, model_identity
from bringup.session.plan_check import record_kv
from bringup.trial.executor import Done, Executor, Job, LocalExecutor, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.slots import GpuSlots, SlotError, parallel_width, parse_gpus
from bringup.verify.probes import KnownAnswer, ProbeConfig

if TYPE_CHECKING:
    from bringup.facts.modelinfo import Fingerprint


def settings_target(s: RunSettings) -> Target:
    """The engine and model a run's settings name (here, or on a node that gathers its facts)."""
    return resolve_target(
        engine=s.engine,
        model=s.model,
        scenario=Path(s.scenario) if s.scenario else None,
        python=s.python,
        time_scale=s.time_scale,
        gpus=s.gpus,
    )


class RunError(ValueError):
    """Bad input for a run: what is wrong and what to do."""


class RunSettings(BaseModel):
    engine: str | None = None
    model: str | None = None
    scenario: str | None = None
    python: str | None = None
    time_scale: float = 0.01
    baseline: str = ""  # NAME=VALUE ... --flag x: the starting command's environment and flags
    env: dict[str, str] = Field(default_factory=dict)  # more of the starting environment (--env)
    vary: list[str] = Field(default_factory=list)
    fix: dict[str, Any] = Field(default_factory=dict)
    space_file: str | None = None
    knowledge: bool = True
    screen: Literal["auto", "always", "never"] = "auto"
    screen_layers: int = 4
    max_launches: int = 12
    max_hours: float | None = None
    minimize: bool = True
    max_minimize_launches: int = 8
    retry_known: bool = False
    timeout: float = 1800.0
    hang_timeout: float = 600.0
    answers: list[tuple[str, str]] = Field(default_factory=list)
    batch: int = 8
    long_tokens: int = 256
    # The reference-differential probe: a file from `bringup reference`, "auto" (in-process with
    # transformers when the model is a local folder that fits) or "none" (bringup/verify/reference.py).
    reference: str = "auto"
    # Trials at once: "1" (one after another), a number, or "auto" (as many as the GPUs hold with
    # the baseline's need); each on its own GPUs and port (bringup/trial/slots.py, bringup/trial/executor.py).
    parallel: str = "1"
    gpus: str | None = None  # the GPUs the run may use (CUDA_VISIBLE_DEVICES entries); None: all
    # Trials on a Ray cluster (bringup/trial/rayexec.py): "auto" (the cluster running here, else a
    # one-node one) or its address; None: on this machine. With it, parallel "auto" is as many
    # trials as the cluster's nodes of this hardware have GPUs.
    ray: str | None = None
    # With ray: the node type whose nodes take the trials, the Ray resource they declare
    # (``bringup-hw-<hash>``; bringup/session/nodetypes.py runs one bring-up per type); None: this machine's.
    node_type: str | None = None
    # Before each launch, ask the installed engine's own checks with the target's facts
    # (bringup/dryrun/): "auto" (where an adapter and the target's version are installed; a
    # refused candidate is observed as its refusal and never launched) or "never".
    dry_run: Literal["auto", "never"] = "never"


class RunObserver(Protocol):
    """Progress of a run, for a live display. Every method is optional to act on."""

    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None: ...
    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None: ...
    def trial_event(self, kind: str, text: str) -> None: ...
    def attempted(self, attempt: Attempt) -> None: ...
    def finished(self, result: RunResult) -> None: ...


class QuietObserver:
    def started(self, run_id: str, run_dir: Path, space: Space, resumed: int) -> None:
        pass

    def launching(self, seq: int, purpose: Purpose, changes: str, screen: bool) -> None:
        pass

    def trial_event(self, kind: str, text: str) -> None:
        pass

    def attempted(self, attempt: Attempt) -> None:
        pass

    def finished(self, result: RunResult) -> None:
        pass


@dataclass
class Run:
    settings: RunSettings
    root: Path
    run_id: str | None = None  # given: resume this run
    observer: RunObserver = field(default_factory=QuietObserver)
    # Facts and model fingerprint gathered on a node of the run's node type (bringup/session/nodetypes.py),
    # as `gather_facts` returns them; None: gathered on this machine.
    node_facts: tuple[dict[str, Any], Fingerprint | None] | None = None
    # What runs one trial on this machine: `Trial` (a real launch), or one with the same
    # constructor and `run() -> Outcome` (bringup.oracle.inprocess.InProcessTrial answers a
    # scenario launch in-process, for benchmarks that run the loop hundreds of times).
    trial_factory: Callable[..., Any] = Trial
    target: Target = field(init=False)

    # -- preparing ---------------------------------------------------------------------------------
    def prepare_offline(self) -> None:
        """Everything but the journal: for `bringup space`."""
        self._prepare(journal=False)

    def prepare(self) -> None:
        self._prepare(journal=True)

    def _prepare(self, journal: bool) -> None:
        s = self.settings
        self.target = settings_target(s)
        t = self.target
        baseline = s.baseline or t.engine.default_baseline()  # a scenario's user starts from its command
        try:
            flags, env = parse_command(baseline, t.spec)
        except FlagError as e:
            raise RunError(
                f"--baseline: {e}; check the flag against the engine's --help "
                f"({t.engine.log_dialect} {t.version})"
            ) from None
        if why := reserved_flag(list(flags), t.spec, t.engine.info.model_flag):
            raise RunError(f"--baseline: {why}")
        # The user's own engine-relevant variables reach every launch: they are part of the
        # candidate, so a fix is never credited to a flag when a variable did it.
        registry = t.engine.env_registry(t.version)
        env = {**launch_environment(registry), **env, **s.env}
        self.baseline = Candidate.make(t.engine.log_dialect, t.model, flags, env, label="baseline")
        self.facts, self.fingerprint = (
            (dict(self.node_facts[0]), self.node_facts[1]) if self.node_facts else gather_facts(t)
        )
        self.hw_fp = hardware_fingerprint(self.facts, t.engine.identity_scope())
        self.model_id = model_identity(t)
        self.journal = Journal(self.root / "journal.sqlite") if journal else None
        errors = self.journal.plan_errors(self.hw_fp, t.engine.log_dialect) if self.journal else []
        mem = (
            memory_model_for(self.facts, t.engine.log_dialect, self.fingerprint, errors)
            if s.knowledge
            else None
        )
        self.knowledge = Knowledge(
            self.facts, t.engine.log_dialect, t.version, enabled=s.knowledge, memory_model=mem
        )
        self.space: Space = build_space(
            t.engine.log_dialect,
            t.spec,
            self.baseline,
            vary=s.vary or None,
            fix=s.fix or None,
            space_file=Path(s.space_file) if s.space_file else None,
        )
        device = self.facts.get("device")
        absent = absent_components(self.facts)
        drop_levels(
            self.space,
            self.baseline,
            lambda level: other_platform(level, device) or names_absent_component(level, absent),
        )
        not_here = drop_inapplicable(self.space, self.facts) if not (s.vary or s.space_file) else []
        if not (s.vary or s.space_file):  # kernels of a component the target lacks (NSA on a GQA model)
            lacking = [
                f
                for f in self.space.factors
                if f.origin == "builtin" and names_absent_component(f.name, absent)
            ]
            self.space.factors = [f for f in self.space.factors if f not in lacking]
            not_here += [
                f"{f.name} (its kernels serve a component this model does not have)" for f in lacking
            ]
        if not (s.vary or s.space_file):
            add_baseline_flags(self.space, self.baseline, t.spec)
        self.env = EnvFactors(registry, device=self.facts.get("device"), absent=absent_components(self.facts))
        for f in self.env.initial(
            {
                k: v
                for k, v in self.baseline.env_dict.items()
                if self.env.registry.status(k) in ("known", "deprecated", "ignored", "common")
            }
        ):
            if f.name not in self.space.names and f.name[4:] not in (s.fix or {}):
                self.space.factors.append(f)
        w = self.facts.get("model.weights_gib")
        self.screening = ScreeningPolicy(
            s.screen, screen_flags(t.spec, s.screen_layers), float(w) if w else 0.0, t.engine.simulated
        )
        self.strategy = Strategy(
            self.space, self.baseline, self.knowledge, t.spec, screening=self.screening, env=self.env
        )
        self.strategy.notes += [f"not searched on this target: {g}" for g in not_here]
        self.answers = [KnownAnswer(p, e) for p, e in s.answers] + list(t.answers)
        self._slots()
        self.reference, self.reference_why = self._reference(journal)
        self.dry = None
        if s.dry_run == "auto":
            from bringup.dryrun import for_target

            self.dry = for_target(t, self.facts)
            self.strategy.notes += self.dry.notes
            self.dry.start()  # the engine's import overlaps with the run's own start

    def _slots(self) -> None:
        """The run's GPUs (``gpu_slots``) and how many trials run at once on them (``width``)."""
        s, t = self.settings, self.target
        try:
            gpus = parse_gpus(s.gpus, int(self.facts.get("gpu.count") or 0))
            width = parallel_width(s.parallel, len(gpus))
        except SlotError as e:
            raise RunError(str(e)) from None
        # Screens run on one GPU each where their few layers fit, so they run side by side.
        self.screen_shrink = (
            one_gpu_screen(self.facts, s.screen_layers, t.engine.parallel_flags(t.spec))
            if width > 1 and self.screening.flags
            else {}
        )
        self.screening.beside = bool(self.screen_shrink) and self.screening.big_model
        self.gpu_slots, self.width = GpuSlots(gpus), width
        self.strategy.limit_gpus(t.engine.parallel_flags(t.spec), len(gpus))

    def _need(self, launch: Candidate) -> int:
        """GPUs a launch takes, at most the run's."""
        total = len(self.gpu_slots.gpus)
        return min(total, self.target.engine.gpus_needed(launch, self.target.spec, total))

    def _as_launched(self, job: Job) -> Candidate:
        """The candidate as launched: a screen's flags (and its shrink to one GPU) applied."""
        if not job.screen:
            return job.cand
        return job.cand.with_changes({**(self.screening.flags or {}), **job.extra.get("shrunk", {})})

    def _reference(self, journal: bool):
        """The model's own output for the reference probe (None: not on the ladder), and why."""
        from bringup.verify.reference import ReferenceError, reference_for

        if self.target.engine.simulated or not journal:
            return None, "no reference for a scenario or an offline plan"
        try:
            gpus = self.gpu_slots.gpus
            mem = self.facts.get("gpu.memory_gib")
            return reference_for(
                self.target.model,
                self.settings.reference,
                cache_dir=self.root / "references",
                gpu=gpus[0] if gpus else None,
                gpu_memory_gib=float(mem) if mem else None,
            )
        except ReferenceError as e:
            raise RunError(f"--reference: {e}") from None

    # -- launching -----------------------------------------------------------------------------
    def _trial_parts(self, job: Job) -> tuple[Candidate, Path, TrialSettings]:
        """A job's launch (a screen's changes applied), its folder and its trial settings."""
        s = self.settings
        launch = self._as_launched(job)
        probe = ProbeConfig(
            batch_size=s.batch,
            long_tokens=s.long_tokens,
            answers=[] if job.screen else self.answers,
            reference=None if job.screen else self.reference,
        )
        tdir = self.run_dir / "trials" / f"{job.seq:02d}-{job.purpose}-{job.cand.key()[:8]}"
        n = 1
        while tdir.exists():  # a trial killed before it finished leaves its folder: keep it
            n += 1
            tdir = self.run_dir / "trials" / f"{job.seq:02d}-{job.purpose}-{job.cand.key()[:8]}-retry{n}"
        settings = TrialSettings(
            timeout=s.timeout, hang_timeout=s.hang_timeout, probe=probe, port=job.port, cancel=job.cancel
        )
        return launch, tdir, settings

    def _run_job(self, job: Job) -> TrialRun:
        """Run one trial (in the executor's worker): the candidate on the job's GPUs and port."""
        launch, tdir, settings = self._trial_parts(job)
        engine = self.target.engine
        if self.width > 1 and job.gpus:  # trials at once: each sees only its own GPUs
            engine = dataclasses.replace(engine, gpus=",".join(job.gpus))
        started = time.time()
        out = self.trial_factory(
            engine,
            launch,
            tdir,
            settings,
            spec=self.target.spec,
            version=self.target.version,
            on_event=self.observer.trial_event,
        ).run()
        return TrialRun(out, tdir, started, time.time())

    def _remote_job(self, job: Job) -> tuple[Any, Path]:
        """What a Ray node needs to run a job (bringup/trial/rayexec.py), and the folder its files land in."""
        from bringup.trial.rayexec import RemoteTrial, settings_for_node

        launch, tdir, settings = self._trial_parts(job)
        t = self.target
        return RemoteTrial(
            t.engine,
            launch,
            tdir.name,
            settings_for_node(settings),
            t.spec,
            t.version,
            real_gpus=not t.engine.simulated,
        ), tdir

    def _submit(self, ex: Executor, job: Job) -> None:
        self.observer.launching(job.seq, job.purpose, job.cand.describe_diff(self.baseline), job.screen)
        ex.submit(job)

    def _record(self, d: Done) -> Outcome:
        """A finished trial into the journal, the memory plan's record and the attempts."""
        assert self.journal is not None and self.run_id is not None and d.run is not None
        job, r = d.job, d.run
        if not d.cancelled:  # a trial cut short tells the memory plan nothing
            record_kv(
                r.outcome,
                r.tdir,
                self.target.engine.log_dialect,
                self.facts,
                self.fingerprint,
                self.journal,
                self.hw_fp,
                self.model_id,
                self.run_id,
                job.seq,
            )
        extra = dict(job.extra)
        if self.width > 1 or job.where != "local":
            extra.update(gpus=job.gpus, where=job.where, clock_start_s=job.sim_start, clock_end_s=d.clock)
        self._log(job.seq, job.purpose, job.cand, r.outcome, r.tdir, r.started, r.ended, extra)
        return r.outcome

    def _job(
        self, seq: int, purpose: Purpose, cand: Candidate, extra: dict[str, Any], screen: bool = False
    ) -> Job:
        if screen and self.screen_shrink:  # this screen on one GPU (journaled with it)
            extra = {**extra, "shrunk": dict(self.screen_shrink)}
        job = Job(seq, purpose, cand, screen, extra)
        job.need = self._need(self._as_launched(job))
        return job

    def _launch(self, ex: Executor, job: Job) -> Outcome:
        """One trial now, with nothing else in flight (minimizing is one question at a time)."""
        self._submit(ex, job)
        while True:
            d = ex.wait()
            if d.run is not None:
                return self._record(d)
            self.lost.append(f"#{d.job.seq} on {d.job.where}: {d.lost_why}")
            self._submit(ex, d.job)  # a lost trial is the machine's failure: run it again

    # -- the run ---------------------------------------------------------------------------------
    def _new_run_id(self) -> str:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name = Path(self.target.model).name or "model"
        base = f"{stamp}-{self.target.engine.log_dialect}-{name}"[:80]
        rid, n = base, 1
        while (self.root / "runs" / rid).exists():
            n += 1
            rid = f"{base}-{n}"
        return rid

    def _mark_interrupted(self) -> None:
        j: Journal | None = getattr(self, "journal", None)
        if j is None or self.run_id is None or getattr(self, "_writer", None) is None:
            return  # not this process's run to mark (a refused second writer)
        with contextlib.suppress(Exception):  # a full disk may refuse this too: the journal stays intact
            row = j.run(self.run_id)
            if row is not None and row.status == "running":
                j.set_status(self.run_id, "interrupted")

    def _lock_writer(self) -> None:
        """One writer per run: a second resume of a run in progress is refused, not run twice."""
        assert self.run_id is not None
        try:
            self._writer = RunLock(self.run_dir, self.run_id).acquire()
        except (RunLocked, OSError) as e:
            raise RunError(str(e)) from None

    def _open(self) -> list[TrialRecord]:
        """Create the run, or reopen it on resume; returns this run's finished trials."""
        assert self.journal is not None
        if self.run_id is None:
            self.run_id = self._new_run_id()
            self.run_dir = self.root / "runs" / self.run_id
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._lock_writer()
            self.journal.create_run(
                self.run_id,
                self.target.engine.log_dialect,
                self.target.version,
                self.model_id,
                self.hw_fp,
                self.settings.model_dump(),
                self.run_dir,
            )
            return []
        row = self.journal.run(self.run_id)
        if row is None:
            raise RunError(f"no run {self.run_id} in {self.root / 'journal.sqlite'}")
        self.run_dir = Path(row.run_dir)
        self._lock_writer()
        self.journal.set_status(self.run_id, "running")
        return self.journal.trials(self.run_id)

    def _learn_priors(self) -> tuple[int, list[Candidate]]:
        """What other runs on this machine, engine version and model already know."""
        assert self.journal is not None and self.run_id is not None
        priors = (
            []
            if self.settings.retry_known
            else self.journal.prior_trials(
                self.hw_fp, self.target.engine.log_dialect, self.target.version, self.model_id, self.run_id
            )
        )
        known_good: list[Candidate] = []
        for rec in priors:
            if rec.purpose == "screen" and rec.outcome.status == "works":
                continue
            if rec.outcome.status == "cancelled":  # preempted: no verdict on its candidate
                continue
            cand = rec.candidate
            if rec.outcome.status == "works":
                if all(c.key() != cand.key() for c in known_good):
                    known_good.append(cand)
                continue
            self.strategy.observe(cand, rec.outcome, source="journal")
        return len(priors), known_good

    def _replay(self, done: list[TrialRecord], screened_ok: set[str]) -> tuple[int, Candidate | None]:
        """Feed this run's own finished trials back (resume); returns (last seq, validated)."""
        seq, validated = 0, None
        for rec in done:
            seq = max(seq, rec.seq)
            purpose = cast(Purpose, rec.purpose)  # a run's own trials: search, screen or minimize
            self.attempts.append(
                self._attempt(
                    rec.seq,
                    purpose,
                    rec.candidate,
                    rec.outcome,
                    Path(rec.trial_dir),
                    rec.extra.get("wall_s", 0.0),
                    rec.extra,
                )
            )
            if rec.purpose == "minimize" or rec.outcome.status == "cancelled":
                continue  # a preempted trial: no verdict on its candidate
            if rec.purpose == "screen":
                if rec.outcome.status == "works":
                    screened_ok.add(self.strategy.predicted_key(rec.candidate))
                self.strategy.observe(rec.candidate, rec.outcome, source="screen")
                continue
            self.strategy.observe(rec.candidate, rec.outcome)
            if rec.outcome.status == "works":
                validated = rec.candidate
        return seq, validated

    def execute(self) -> RunResult:
        try:
            return self._execute()
        except BaseException:  # a signal or a full disk at any phase: the run is not left `running`
            self._mark_interrupted()
            raise
        finally:
            if getattr(self, "_writer", None) is not None:
                self._writer.release()

    def _execute(self) -> RunResult:
        self.prepare()
        t0 = time.time()
        done = self._open()
        assert self.journal is not None and self.run_id is not None
        secrets.write_text(
            self.run_dir / "run.json",
            json.dumps(
                {"run_id": self.run_id, "settings": secrets.scrub(self.settings.model_dump())},
                indent=2,
                default=str,
            ),
        )
        self.observer.started(self.run_id, self.run_dir, self.space, len(done))
        priors, known_good = self._learn_priors()
        self.attempts: list[Attempt] = []
        self.lost: list[str] = []
        screened_ok: set[str] = set()
        seq, validated = self._replay(done, screened_ok)
        self._replayed_s = sum(self.screening.cost_s(a) for a in self.attempts)
        try:
            # Inside the try: an executor that cannot start (no Ray node of this hardware) marks the
            # run interrupted in the journal, not forever "running".
            self.ex = ex = self._executor()
        except BaseException:
            self.journal.set_status(self.run_id, "interrupted")
            raise
        status, stop_reason = "budget", ""
        self._search_clock: float | None = None
        self._round = 0  # each _fill call: launches started together (see _outlasts_likelier)
        try:
            self._follow: list[Job] = []  # full launches of screens that passed; trials lost with their node
            while validated is None:
                self._wake: float | None = None  # when to look again at a launch waiting for GPUs
                stop, seq = self._fill(ex, seq, known_good, screened_ok)
                if not ex.in_flight():
                    status, stop_reason = stop or (status, stop_reason)
                    break
                d = self._answer(ex)
                if d is not None:
                    validated = self._deliver(d, screened_ok)
            self._search_clock = ex.now()
            while ex.in_flight():  # what was launched beside the winner still reports, for the record
                d = ex.wait()
                if d.run is not None:
                    self._deliver(d, screened_ok)
            fix = MinimalFix([], False, validated) if validated is not None else None
            if validated is not None:
                status, stop_reason = "validated", "a configuration passed every probe"
                if self.settings.minimize:
                    fix, seq = self._minimize(validated, seq)
        except BaseException:
            self.journal.set_status(self.run_id, "interrupted")
            raise
        finally:
            ex.close()
            self._close_dry()
        result = self._result(status, stop_reason, validated, fix, t0, priors)
        self.journal.finish_run(self.run_id, status, result.model_dump())
        from bringup.report.findings import write_report
        from bringup.report.html import load_tunes, write_html

        write_report(result, self.run_dir)
        write_html(self.run_dir, result, load_tunes(self.run_dir))
        self.observer.finished(result)
        return result

    def _answer(self, ex: Executor) -> Done | None:
        """The next trial that answered, for the strategy; None: a wake-up (preempting may pay by
        now, see _preempt_for) or a trial lost with its node (run again first, not a failure)."""
        d = ex.wait_until(self._wake)
        if d is None or d.run is not None:
            return d
        if not d.cancelled:  # preempted and lost on the way: nothing to record or rerun
            self.lost.append(f"#{d.job.seq} on {d.job.where}: {d.lost_why}")
            self._follow.insert(0, d.job)
        return None

    def _executor(self) -> Executor:
        slots, width = self.gpu_slots, self.width
        if self.settings.ray:
            return self._ray_executor()
        watch = default_watch()

        def back(gpus: list[str]) -> bool:
            idx = visible_indices(",".join(gpus))
            return watch.is_back(idx) if idx is not None else True

        return LocalExecutor(self._run_job, slots, width, gpu_free=back, clock=self.target.engine.clock())

    def _ray_executor(self) -> Executor:
        """Trials on a Ray cluster's nodes of this machine's hardware (bringup/trial/rayexec.py); as many
        at once as their GPUs hold, or --parallel N."""
        from bringup.trial.rayexec import RayClusterError, RayMissing, cluster_executor

        s = self.settings
        try:
            ex = cluster_executor(
                self._remote_job,
                self.hw_fp,
                s.ray or "auto",
                s.parallel,
                self.gpu_slots.total,
                self.target.engine.simulated,
                on_event=self.observer.trial_event,
                resource=s.node_type,
                clock=self.target.engine.clock(),
            )
        except (RayMissing, RayClusterError) as e:
            raise RunError(str(e)) from None
        self.width = ex.width
        return ex

    def _fill(
        self, ex: Executor, seq: int, known_good: list[Candidate], screened_ok: set[str]
    ) -> tuple[tuple[str, str] | None, int]:
        """Start launches while slots are free; returns (why the search stops, if it does; seq)."""
        s = self.settings
        self._round += 1  # launches started together, in this call
        while len(ex.in_flight()) < ex.width:
            flying = ex.in_flight()
            launches = sum(1 for a in self.attempts if a.purpose in ("search", "screen")) + len(flying)
            if launches >= s.max_launches:
                return (
                    "budget",
                    f"launch budget ({s.max_launches}) spent; {self.strategy.summary()}{self._resume_hint()}",
                ), seq
            if self._follow:  # a screened candidate's full launch, or a trial lost with its node
                started, seq = self._follow_up(ex, seq)
                if not started:
                    break  # it waits for its GPUs; no new trial takes them meanwhile
                continue
            if s.max_hours is not None and self._hours() >= s.max_hours:
                return ("budget", f"time budget ({s.max_hours} h) spent"), seq
            d, seq = self._next_launch(known_good, screened_ok, flying, seq)
            if d.candidate is None:
                if flying:
                    break  # an answer in flight may open another way
                why = self.strategy.explain_stop()
                return (
                    "impossible" if self.strategy.impossible() else "not-found",
                    why + self._resume_hint(),
                ), seq
            extra = {"p_success": d.p_success, "reasons": d.reasons}
            job = self._job(seq + 1, "screen" if d.screen else "search", d.candidate, extra, screen=d.screen)
            if not ex.fits(job) and self._preempt_for(ex, job):
                # Queued: it starts as soon as the preempted screens have given their GPUs back.
                job.seq, job.extra["p_then"] = 0, self.strategy.success_probability(job.cand)
                self._follow.insert(sum(1 for j in self._follow if j.seq != 0), job)
                break
            if not ex.fits(job) or self._outlasts_likelier(job, flying):
                break  # it waits for its GPUs; what is in flight reports first
            seq += 1
            job.extra["round"] = self._round
            self._submit(ex, job)
        return None, seq

    def _resume_hint(self) -> str:
        """How to go on searching where this run stopped short (not for a proof of impossibility)."""
        if self.strategy.impossible():
            return ""
        more = self.settings.max_launches + 6
        return f". Resume the search with: bringup run --resume --run-id {self.run_id} --max-launches {more}"

    def _next_launch(
        self, known_good: list[Candidate], screened_ok: set[str], flying: list[Job], seq: int
    ) -> tuple[Any, int]:
        """The strategy's next launch, past every candidate the installed engine's own checks
        refuse (each observed as its refusal, attempt seq + 1, never launched); (decision, seq)."""
        while True:
            d = self.strategy.next_launch(
                known_good, self.attempts, screened_ok, pending=[j.cand for j in flying]
            )
            extra = {"p_success": d.p_success, "reasons": d.reasons}
            if d.candidate is None or not self._refused_dry(seq + 1, d.candidate, extra):
                return d, seq
            seq += 1

    def _close_dry(self) -> None:
        if self.dry is not None:
            self.dry.close()

    def _refused_dry(self, seq: int, cand: Candidate, extra: dict[str, Any]) -> bool:
        """The installed engine's own checks refuse ``cand`` (bringup/dryrun/): record the refusal
        as attempt ``seq`` (purpose "dry-run", no launch) and let the strategy learn from it."""
        if self.dry is None or not self.dry.available:
            return False
        if sum(1 for a in self.attempts if a.purpose == "dry-run") >= 200:  # a bound, whatever the space
            return False
        v = self.dry.check(cand)
        if not v.refused:
            return False
        from bringup.dryrun import refusal_outcome

        out = refusal_outcome(v, cand, self.target.engine.log_dialect)
        tdir = self.run_dir / "trials" / f"{seq:02d}-dry-run-{cand.key()[:8]}"
        tdir.mkdir(parents=True, exist_ok=True)
        (tdir / "dryrun.json").write_text(json.dumps(v.to_json(), indent=2))
        (tdir / "outcome.json").write_text(out.model_dump_json(indent=2))
        now = time.time()
        self._log(seq, "dry-run", cand, out, tdir, now - v.seconds, now, {**extra, "dry_run": v.to_json()})
        self.strategy.observe(cand, out, source="dry-run")
        return True

    def _outlasts_likelier(self, job: Job, flying: list[Job]) -> bool:
        """A screen started now would end after a likelier one started earlier: if that one passes,
        its full launch wants the GPUs this one holds, and waits. (Screens started together end
        together; those are a batch.)"""
        p = job.extra.get("p_success") or 0.0
        return job.screen and any(
            j.screen and j.extra.get("round") != self._round and (j.extra.get("p_success") or 0.0) > p
            for j in flying
        )

    def _preempt_for(self, ex: Executor, job: Job) -> bool:
        """Cancel screens in flight that hold GPUs a waiting full launch needs, when it is likelier
        to work than what each of them tests and starting it now is expected to reach a validated
        configuration sooner; whether any screen is (already) being cancelled for it.

        Starting the launch now saves, if it works, the time the screens still had to run (R, the
        longest expected remainder); if it fails, their answers come later by the work thrown away
        (E, the longest elapsed: a screen of a candidate still worth it runs again). Preempt when
        p x R > (1 - p) x E. A cancelled screen is no evidence: its candidate stays untried, and the
        strategy proposes it again or not as the answers say."""
        if job.screen or self.width <= 1:
            return False
        flying = ex.in_flight()
        going = [j for j in flying if j.cancelled_at is not None]
        if going and ex.fits(job, going):
            return True  # already freeing enough: wait for those
        p = self.strategy.success_probability(job.cand)
        victims = sorted(
            (
                j
                for j in flying
                if j.screen and j.cancelled_at is None and self.strategy.success_probability(j.cand) < p
            ),
            key=lambda j: (self.strategy.success_probability(j.cand), -j.sim_start),
        )
        chosen: list[Job] = []
        for v in victims:  # the least likely first, the latest started first among equals
            chosen.append(v)
            if ex.fits(job, going + chosen):
                break
        else:
            return bool(going)  # cancelling every likelier-beaten screen would not free enough
        now = ex.now()
        if not self._preempting_pays(p, chosen, now):
            # Look again when it would pay, if the screens are still running then.
            self._wake = self._pays_from(p, chosen, now)
            return bool(going)
        what = f"{job.cand.describe_diff(self.baseline)} (p={p:.2f})"
        for v in chosen:
            ex.cancel(v)
            if v.cancelled_at is not None:  # not one that has just answered by itself
                v.extra["preempted_by"] = what
                v.extra["preempted_p"] = round(self.strategy.success_probability(v.cand), 4)
        return True

    def _preempting_pays(self, p: float, chosen: list[Job], at: float) -> bool:
        """p x R > (1 - p) x E at clock time ``at`` (see _preempt_for)."""
        left = max(self.screening.remaining_s(at - v.sim_start, self.attempts) for v in chosen)
        lost = max(at - v.sim_start for v in chosen)
        return p * left > (1 - p) * lost

    def _pays_from(self, p: float, chosen: list[Job], now: float) -> float | None:
        """The first clock time, up to the launch deadline, at which preempting ``chosen`` would
        pay if they are still running then (a screen past every other one's time is expected to
        run on: one that hangs is preempted before the hang deadline frees its GPUs); None: never."""
        step = max(1.0, self.settings.timeout / 1000)
        for k in range(1, int(self.settings.timeout / step) + 1):
            if self._preempting_pays(p, chosen, now + k * step):
                return now + k * step
        return None

    def _preempted(self, d: Done) -> None:
        """A screen cancelled for a likelier full launch, into the journal as cancelled: no failure
        class, nothing for the strategy to learn (on a double, what it would have shown after the
        cancel is not known at that time)."""
        assert d.run is not None
        job, r = d.job, d.run
        out = r.outcome.model_copy(deep=True)
        out.status, out.failure_class, out.signature, out.root_exception = "cancelled", None, None, None
        out.implicates, out.implicated_levels, out.kv_report = [], {}, None
        cut = self.ex.clock.cut_at_cancel(d.clock - job.sim_start)
        if cut is not None:  # the trial ran on in real time; on the run's clock it ended at the cancel
            out.phase, out.probes = None, []
            out.timings.simulated = cut
        by = job.extra.get("preempted_by", "a likelier full launch")
        out.evidence = [f"preempted at {d.clock:.0f} s of the run's clock: {by} waited for its GPUs"]
        out.hint = (
            "Cancelled to free its GPUs for a full launch judged likelier to work; not evidence "
            "about this candidate (it may be screened again)."
        )
        (r.tdir / "outcome.json").write_text(out.model_dump_json(indent=2))
        self._record(dataclasses.replace(d, run=dataclasses.replace(r, outcome=out)))

    def _follow_up(self, ex: Executor, seq: int) -> tuple[bool, int]:
        """Start the first follow-up if its GPUs are free (or drop it: an answer that came back
        since its screen makes it unlikely); (whether the loop may go on filling, seq)."""
        job = self._follow[0]
        if job.seq == 0 and not self.strategy.still_worth(job.cand, job.extra.get("p_then", 0.0)):
            self._follow.pop(0)
            return True, seq
        if not ex.fits(job):
            self._preempt_for(ex, job)
            return False, seq
        self._follow.pop(0)
        job.extra.pop("p_then", None)
        if job.seq == 0:
            seq += 1
            job.seq = seq
        self._submit(ex, job)
        return True, seq

    def _deliver(self, d: Done, screened_ok: set[str]) -> Candidate | None:
        """An answer back to the strategy; the candidate when it validated."""
        job = d.job
        if d.cancelled:
            self._preempted(d)
            return None
        out = self._record(d)
        if job.screen:
            if (
                out.status != "works"
                and (out.failure_class or "").startswith("oom")
                and job.extra.get("shrunk")
            ):
                # A screen cannot judge memory, least of all one shrunk to a GPU: its few layers did
                # not fit where the estimate said they would. Inconclusive, not evidence against the
                # candidate (the strategy may propose it again): screens keep their parallel sizes
                # from now on.
                self.screen_shrink = {}
                self.screening.beside = False
                return None
            if out.status != "works":
                self.strategy.observe(job.cand, out, source="screen")
                return None
            # A screen that passed: its full launch goes next, as soon as its GPUs are free (trials
            # at once: unless an answer that comes back meanwhile makes it unlikely, see _fill).
            screened_ok.add(self.strategy.predicted_key(job.cand))
            self.strategy.observe(job.cand, out, source="screen")
            extra = {k: v for k, v in job.extra.items() if k != "shrunk"}
            follow = self._job(
                0, "search", job.cand, {**extra, "p_then": self.strategy.success_probability(job.cand)}
            )
            self._follow.append(follow)
            # The most likely first (answers arrive in any order); lost trials (seq given) stay ahead.
            self._follow.sort(key=lambda j: (j.seq == 0, -j.extra.get("p_then", 0.0)))
            return None
        self.strategy.observe(job.cand, out)
        return job.cand if out.status == "works" else None

    def _hours(self) -> float:
        """The run's clock in hours: its earlier sessions' launches (resume), then this one's."""
        return (self._replayed_s + self.ex.now()) / 3600

    def _log(
        self,
        seq: int,
        purpose: Purpose,
        cand: Candidate,
        out: Outcome,
        tdir: Path,
        started: float,
        ended: float,
        extra: dict,
    ) -> None:
        assert self.journal is not None and self.run_id is not None
        key = self.strategy.predicted_key(cand)
        self.journal.add_trial(
            TrialRecord(
                run_id=self.run_id,
                seq=seq,
                purpose=purpose,
                candidate=cand,
                effective_key=key,
                outcome=out,
                trial_dir=str(tdir),
                extra={**extra, "wall_s": ended - started},
                started=started,
                ended=ended,
                hardware_fp=self.hw_fp,
                model_id=self.model_id,
            )
        )
        a = self._attempt(seq, purpose, cand, out, tdir, ended - started, extra)
        self.attempts.append(a)
        self.observer.attempted(a)

    def _attempt(
        self, seq: int, purpose: Purpose, cand: Candidate, out: Outcome, tdir: Path, wall: float, extra: dict
    ) -> Attempt:
        return Attempt(
            number=seq,
            purpose=purpose,
            changes=cand.describe_diff(self.baseline),
            status=out.status,
            failure_class=out.failure_class,
            phase=out.phase,
            evidence=out.key_evidence()[:300],
            wall_s=extra.get("wall_s", wall) or wall,
            simulated_s=out.timings.simulated,
            p_success=extra.get("p_success"),
            reasons=extra.get("reasons", []),
            trial_dir=str(tdir),
            overrides=list(out.overrides),
            hint=out.hint,
            signature=out.signature,
            gpus=extra.get("gpus", []),
            where=extra.get("where", ""),
            clock_start_s=extra.get("clock_start_s"),
            clock_end_s=extra.get("clock_end_s"),
        )

    # -- minimizing ------------------------------------------------------------------------------
    def _minimize(self, working: Candidate, seq: int) -> tuple[MinimalFix, int]:
        """ddmin between the baseline and the working candidate; returns the fix and the last seq."""
        assert self.journal is not None and self.run_id is not None
        outcomes: dict[str, Outcome] = {o.key: o.outcome for o in self.strategy.observations}
        # On resume, earlier minimizing trials answer again from the journal.
        for rec in self.journal.trials(self.run_id, "minimize"):
            outcomes.setdefault(self.strategy.predicted_key(rec.candidate), rec.outcome)
        launched = sum(1 for a in self.attempts if a.purpose == "minimize")
        counter = {"seq": seq}

        def launch(cand: Candidate) -> Outcome:
            counter["seq"] += 1
            return self._launch(self.ex, self._job(counter["seq"], "minimize", cand, {}))

        fix = minimal_fix(
            self.baseline,
            working,
            self.strategy.predicted_key,
            outcomes,
            launch,
            self.settings.max_minimize_launches - launched,
            ignored=set(self.strategy.frozen),
        )
        return fix, counter["seq"]

    def _result(
        self,
        status: str,
        stop_reason: str,
        validated: Candidate | None,
        fix: MinimalFix | None,
        t0: float,
        priors: int,
    ) -> RunResult:
        eng = self.target.engine
        search = [a for a in self.attempts if a.purpose in ("search", "screen")]
        # The clock when the search ended: one trial at a time, the sum of its launches; at once,
        # the time to the first validated configuration (launches beside it overlap).
        clock = self._search_clock if self._search_clock is not None else self.ex.now()
        sim_hours = self.ex.clock.hours(self._replayed_s + clock)
        probes, warnings = [], []
        ok = [a for a in self.attempts if a.purpose == "search" and a.status == "works"]
        if ok:
            try:
                o = Outcome.model_validate_json((Path(ok[-1].trial_dir) / "outcome.json").read_text())
                probes, warnings = o.probes, o.warnings
            except (OSError, ValueError):
                pass
        final = fix.final if fix else None
        minimal = fix.changes if fix else []
        return RunResult(
            final_probes=probes,
            warnings=warnings,
            parallel=self.width,
            lost_trials=list(self.lost),
            reference=self.reference_why,
            node_type=getattr(self.ex, "resource", None),
            run_id=self.run_id or "",
            run_dir=str(self.run_dir),
            status=status,
            validated=validated is not None,
            launches=len(search),
            screening_launches=sum(1 for a in search if a.purpose == "screen"),
            minimize_launches=sum(1 for a in self.attempts if a.purpose == "minimize"),
            simulated_hours=sim_hours,
            wall_seconds=time.time() - t0,
            final_command=final.shell_command(eng.command_prefix(final)) if final else None,
            final_candidate=final.to_json() if final else None,
            minimal_fix=[c.describe() for c in minimal],
            minimal_fix_str=" ".join(change_tokens(minimal)) if minimal else None,
            minimal_fix_verified=fix.verified if fix else False,
            stop_reason=stop_reason,
            attempts=self.attempts,
            baseline=self.baseline.to_json(),
            baseline_command=self.baseline.shell_command(eng.command_prefix(self.baseline)),
            predictions=self.predictions(),
            engine=eng.log_dialect,
            engine_version=self.target.version,
            model=self.target.model,
            facts={k: v for k, v in self.facts.items() if not isinstance(v, (dict, list))},
            strategy_state=self.strategy.state(),
            journal_priors=priors,
            knowledge=self.settings.knowledge,
        )

    def predictions(self) -> list[Prediction]:
        """What knowledge said about the baseline's own levels before any launch."""
        out = []
        for f in self.space.factors:
            level = f.level_in(self.baseline.flag_dict, self.baseline.env_dict)
            for v in self.strategy.verdicts(f, level):
                out.append(Prediction(flag=f.name, level=f.describe_level(level), **v.to_json()))
        return out
