"""How a bring-up run's jobs become trials: their folder, settings and GPUs, and where they run.

The loop (bringup/session/run.py) decides what to launch; this decides how: a screen's changes
applied (and its shrink to one GPU), the probe ladder a launch gets, the trial's folder, the
GPUs it sees, and the executor that runs it (this machine, or a Ray cluster). Kept apart so that
the loop never handles a path, a port or a GPU index.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bringup.core.candidate import Candidate
from bringup.engines.targets import Target
from bringup.facts.gpus import default_watch, visible_indices
from bringup.observe.outcome import Outcome
from bringup.record.results import Attempt, Purpose
from bringup.search.screening import ScreeningPolicy
from bringup.session.settings import RunError, RunSettings
from bringup.trial.executor import Executor, Job, LocalExecutor, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.trial.slots import GpuSlots
from bringup.verify.probes import KnownAnswer, ProbeConfig

if TYPE_CHECKING:
    from bringup.dryrun import DryRun


@dataclass
class Launcher:
    """Makes a run's jobs and runs them as trials, on the run's GPUs."""

    target: Target
    settings: RunSettings
    screening: ScreeningPolicy
    answers: list[KnownAnswer]
    reference: Any  # bringup.verify.reference.Reference, or None: no reference probe
    gpu_slots: GpuSlots
    width: int  # trials at once, at most
    # The flags that shrink a screen to one GPU (empty: screens keep their parallel sizes).
    screen_shrink: dict[str, Any]
    # What runs one trial on this machine: `Trial`, or one with its constructor and `run()`.
    trial_factory: Callable[..., Any] = Trial
    on_event: Callable[[str, str], None] | None = None
    run_dir: Path = field(default_factory=Path)  # set once the run is opened

    def need(self, launch: Candidate) -> int:
        """GPUs a launch takes, at most the run's."""
        total = len(self.gpu_slots.gpus)
        return min(total, self.target.engine.gpus_needed(launch, self.target.spec, total))

    def as_launched(self, job: Job) -> Candidate:
        """The candidate as launched: a screen's flags (and its shrink to one GPU) applied."""
        if not job.screen:
            return job.cand
        return job.cand.with_changes({**(self.screening.flags or {}), **job.extra.get("shrunk", {})})

    def job(
        self, seq: int, purpose: Purpose, cand: Candidate, extra: dict[str, Any], screen: bool = False
    ) -> Job:
        if screen and self.screen_shrink:  # this screen on one GPU (journaled with it)
            extra = {**extra, "shrunk": dict(self.screen_shrink)}
        job = Job(seq, purpose, cand, screen, extra)
        job.need = self.need(self.as_launched(job))
        return job

    def parts(self, job: Job) -> tuple[Candidate, Path, TrialSettings]:
        """A job's launch (a screen's changes applied), its folder and its trial settings."""
        s = self.settings
        launch = self.as_launched(job)
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

    def run_job(self, job: Job) -> TrialRun:
        """Run one trial (in the executor's worker): the candidate on the job's GPUs and port."""
        launch, tdir, settings = self.parts(job)
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
            on_event=self.on_event,
        ).run()
        return TrialRun(out, tdir, started, time.time())

    def remote_job(self, job: Job) -> tuple[Any, Path]:
        """What a Ray node needs to run a job (bringup/trial/rayexec.py), and the folder its files land in."""
        from bringup.trial.rayexec import RemoteTrial, settings_for_node

        launch, tdir, settings = self.parts(job)
        t = self.target
        return RemoteTrial(
            t.engine,
            launch,
            tdir.name,
            settings_for_node(settings),
            t.spec,
            t.version,
            real_gpus=t.world.gpus_here,
        ), tdir

    def executor(
        self,
        run_job: Callable[[Job], TrialRun],
        remote_job: Callable[[Job], tuple[Any, Path]],
        hw_fp: str,
    ) -> Executor:
        """Where the trials run: on a Ray cluster's nodes of this hardware (``settings.ray``; as
        many at once as their GPUs hold, or --parallel N), else on this machine's GPUs."""
        if self.settings.ray:
            return self._ray_executor(remote_job, hw_fp)
        watch = default_watch()

        def back(gpus: list[str]) -> bool:
            idx = visible_indices(",".join(gpus))
            return watch.is_back(idx) if idx is not None else True

        return LocalExecutor(
            run_job, self.gpu_slots, self.width, gpu_free=back, clock=self.target.world.clock()
        )

    def _ray_executor(self, remote_job: Callable[[Job], tuple[Any, Path]], hw_fp: str) -> Executor:
        from bringup.trial.rayexec import RayClusterError, RayMissing, cluster_executor

        s = self.settings
        try:
            ex = cluster_executor(
                remote_job,
                hw_fp,
                s.ray or "auto",
                s.parallel,
                self.gpu_slots.total,
                not self.target.world.gpus_here,
                on_event=self.on_event,
                resource=s.node_type,
                clock=self.target.world.clock(),
            )
        except (RayMissing, RayClusterError) as e:
            raise RunError(str(e)) from None
        self.width = ex.width
        return ex

    def refused(
        self, dry: DryRun | None, seq: int, cand: Candidate, attempts: list[Attempt]
    ) -> tuple[Outcome, Path, float, float, dict[str, Any]] | None:
        """The installed engine's own checks refuse ``cand`` (bringup/dryrun/): its refusal as an
        outcome with its folder, start, end and journal extra (attempt ``seq``, purpose "dry-run",
        never launched); None: not refused, or not asked (no checks, or as many refused as the bound)."""
        if dry is None or not dry.available:
            return None
        if sum(1 for a in attempts if a.purpose == "dry-run") >= 200:  # a bound, whatever the space
            return None
        v = dry.check(cand)
        if not v.refused:
            return None
        from bringup.dryrun import refusal_outcome

        out = refusal_outcome(v, cand, self.target.engine.log_dialect)
        tdir = self.run_dir / "trials" / f"{seq:02d}-dry-run-{cand.key()[:8]}"
        tdir.mkdir(parents=True, exist_ok=True)
        (tdir / "dryrun.json").write_text(json.dumps(v.to_json(), indent=2))
        (tdir / "outcome.json").write_text(out.model_dump_json(indent=2))
        now = time.time()
        return out, tdir, now - v.seconds, now, {"dry_run": v.to_json()}


# How long a run with nothing in flight waits for the memory of a GPU its next launch needs:
# a server that another program started beside the run holds it until that program ends.
GPU_WAIT_S = 120.0


def fits_budget(decision: Any, left: int, flying: list[Any], follow: list[Any]) -> bool:
    """Whether the next launch fits the launches left, keeping one for the confirmation of every
    screen in flight or queued (a screen that passes is followed by its full launch: issue 36, a
    passed screen once went unconfirmed when screens had spent the budget) and of this one if it
    is a screen. Room for one launch only turns a screen into its full launch."""
    room = left - sum(1 for j in flying if j.screen) - len(follow)
    if room >= 2 or (room == 1 and not decision.screen):
        return True
    if room == 1:
        decision.screen = False
        return True
    return False


def held_gpus_stop(ex: Executor, attempts: list[Attempt]) -> str | None:
    """With nothing in flight, wait for GPUs a leftover or another program holds: None when none
    is held (nothing to wait for), "" when they came back (launch on), else why the run stops."""
    t0 = time.monotonic()
    held = ex.wait_for_held(GPU_WAIT_S)
    if not held:
        return None if held is None else ""
    return held_reason(held, attempts, time.monotonic() - t0)


def held_reason(held: list[str], attempts: list[Attempt], waited_s: float) -> str:
    """Why a run stopped on GPUs still held: which, for how long it waited, and what the last
    trial's GPU reading found holding them (processes, memory), so the user knows what to free."""
    found: list[str] = []
    for a in reversed(attempts):
        try:
            gpu = json.loads((Path(a.trial_dir) / "outcome.json").read_text()).get("gpu") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(gpu, dict) and gpu.get("held"):
            found = [str(x) for x in gpu["held"]]
            break
    what = f" ({'; '.join(found)})" if found else ""
    return (
        f"the next launch needs GPU {', '.join(held)}, whose memory was still not back {waited_s:.0f} s "
        f"after the last teardown{what}: end what holds it"
    )
