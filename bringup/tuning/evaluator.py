"""A tuning's points evaluated by launching them: launch, probe, benchmark, journal.

Each point is a trial (the same runner as bring-up, so a failure is classified) with a workload
run while the server is up. Metrics are reported in the engine's own seconds: for a scenario
the measured real seconds are divided by its time scale, and SLOs are scaled the other way.
`alone` and `beside` wire the evaluator to executors for the repeat phase
(bringup/tuning/repeats.py): alone, a repeat is one launch with nothing else in flight (on this
machine, or one job at a time on the Ray cluster); beside, every configuration of a round is
launched at once, on its own GPUs and port, as the search ran them, to measure what a neighbour costs.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate
from bringup.core.clock import Clock, WallClock
from bringup.engines.targets import Target
from bringup.loadgen import BenchConfig, bench
from bringup.loadgen.config import SLO
from bringup.observe.outcome import Outcome
from bringup.record.journal import Journal, TrialRecord
from bringup.trial.executor import Job, TrialRun
from bringup.trial.launch import Trial, TrialSettings
from bringup.tuning.knobs import as_changes
from bringup.tuning.result import SweepPoint
from bringup.tuning.tuner import Evaluation, Objective, objective_value
from bringup.verify.probes import ProbeConfig

TIME_KEYS = ("ttft", "itl", "tpot", "e2e")


def metrics_from_summary(flat: dict[str, Any], time_scale: float) -> dict[str, float]:
    """The loadgen's summary in engine seconds (a scenario runs time_scale times faster)."""
    s = time_scale
    m: dict[str, float] = {
        "rps": (flat.get("request_throughput") or 0.0) * s,
        "output_tps": (flat.get("output_throughput") or 0.0) * s,
        "completed": float(flat.get("completed") or 0),
        "failed": float(flat.get("failed") or 0),
    }
    if flat.get("request_goodput") is not None:
        m["goodput_rps"] = flat["request_goodput"] * s
        m["slo_attainment"] = flat.get("slo_attainment") or 0.0
    for name in TIME_KEYS:
        for stat in ("p50", "p90", "p99", "mean"):
            v = flat.get(f"{name}_{stat}_ms")
            if v is not None:
                m[f"{name}_{stat}_s"] = v / 1000.0 / s
    return m


@dataclass
class Workload:
    """A point's load, run against its server once every probe passed, and stopped early when it
    is clearly worse than the best so far. It holds only what it needs (no evaluator, no journal),
    so a Ray node runs it as this machine does (it travels in bringup.trial.rayexec.RemoteTrial)."""

    cfg: BenchConfig  # scaled to the engine's clock; the url is the server's, given per launch
    best: float | None
    time_scale: float
    objective: Objective
    prune_factor: float

    def stop_when(self, summary: Any) -> str | None:
        best = self.best
        if best is None or best <= 0:
            return None
        if summary.completed + summary.failed < max(8, (self.cfg.num_prompts or 100) // 4):
            return None
        est = objective_value(metrics_from_summary({**summary.flat()}, self.time_scale), self.objective)
        if est < self.prune_factor * best:
            return f"running objective {est:.3g} < {self.prune_factor:g} x best {best:.3g}"
        return None

    def __call__(self, url: str) -> dict:
        return bench(self.cfg.model_copy(update={"url": url}), stop_when=self.stop_when).summary.flat()


@dataclass
class LaunchEvaluator:
    """Evaluates knob settings by launching them and running the workload."""

    target: Target
    base: Candidate
    bench_cfg: BenchConfig  # url is filled in per launch; SLOs in engine seconds
    tune_dir: Path
    journal: Journal
    run_id: str
    hw_fp: str
    model_id: str
    time_scale: float = 1.0
    prune_factor: float = 0.5  # stop a point whose running goodput is under this share of the best
    timeout: float = 1800.0
    hang_timeout: float = 600.0
    objective: Objective = "goodput"
    seq: int = 0
    machine_gpus: int = 0  # the GPUs points may take (a job's need is at most these)
    reference: Any = None  # bringup.verify.reference.Reference: every point's trial runs the reference probe
    verdicts: dict[str, str] = field(default_factory=dict)  # trial dir -> the reference probe's verdict
    clock: Clock = field(default_factory=WallClock)  # the tuning's (the engine's)

    def _scaled_cfg(self, url: str) -> BenchConfig:
        slos = [
            SLO(metric=x.metric, stat=x.stat, target_s=x.target_s * self.time_scale)
            for x in self.bench_cfg.slos
        ]
        sup = self.target.engine.info.probes  # what the engine's API offers (engines.yaml)
        # The key the launched server expects (its --api-key, or the variable it reads: engines.yaml).
        engine = self.target.engine
        key = self.bench_cfg.api_key or engine.api_key(self.base, engine.launch_env(self.base))
        update: dict = {
            "url": url,
            "slos": slos,
            "api_key": key,
            "ignore_eos": self.bench_cfg.ignore_eos and sup.ignore_eos,
        }
        if not sup.list_models and not self.bench_cfg.model:
            update["model"] = self.target.model  # its /v1/models does not list the served model
        return self.bench_cfg.model_copy(update=update)

    def run_trial(
        self,
        cand: Candidate,
        workload: Callable[[str], dict],
        purpose: str,
        seq: int | None = None,
        gpus: list[str] | None = None,
        port: int | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple:
        """One launch with a workload. ``seq``, ``gpus``, ``port``: where a trial that runs beside
        others goes (its own CUDA_VISIBLE_DEVICES and port); None: the next number, the target's
        GPUs, a free port."""
        tdir = self._trial_dir(cand, seq)
        engine = dataclasses.replace(self.target.engine, gpus=",".join(gpus)) if gpus else self.target.engine
        t0 = time.time()
        out = Trial(
            engine,
            cand,
            tdir,
            self._settings(port, cancel),
            spec=self.target.spec,
            version=self.target.version,
            workload=workload,
        ).run()
        t1 = time.time()
        self._verdict(out, tdir)
        return out, tdir, t0, t1

    def _trial_dir(self, cand: Candidate, seq: int | None) -> Path:
        """The point's folder (``seq`` None: the next number)."""
        if seq is None:
            self.seq += 1
            seq = self.seq
        else:
            self.seq = max(self.seq, seq)
        tdir = self.tune_dir / "trials" / f"{seq:03d}-{cand.key()[:8]}"
        n = 1
        while tdir.exists():  # the same point again (a port taken between pick and launch): keep both
            n += 1
            tdir = self.tune_dir / "trials" / f"{seq:03d}-{cand.key()[:8]}-retry{n}"
        return tdir

    def _settings(self, port: int | None = None, cancel: threading.Event | None = None) -> TrialSettings:
        probe = ProbeConfig(long_tokens=64, batch_size=4, reference=self.reference)
        return TrialSettings(
            timeout=self.timeout, hang_timeout=self.hang_timeout, probe=probe, port=port, cancel=cancel
        )

    def _verdict(self, out: Outcome, tdir: Path) -> None:
        for r in out.probes:
            if r.name == "reference":
                self.verdicts[str(tdir)] = ("agrees: " if r.passed else "disagrees: ") + r.detail

    def __call__(self, knobs: dict[str, str], best: float | None) -> Evaluation:
        return self._evaluate(knobs, best)[0]

    def job(self, seq: int, knobs: dict[str, str], best: float | None) -> Job:
        """A point as a job for an executor (bringup/trial/executor.py), with the GPUs its launch takes
        (tensor x pipeline x data parallel, from the engine's own flags) on ``machine_gpus``."""
        cand = self.base.with_changes(as_changes(knobs))
        return Job(
            seq,
            "search",
            cand,
            False,
            {"knobs": knobs, "best": best},
            need=self.target.engine.gpus_needed(cand, self.target.spec, self.machine_gpus),
        )

    def run_job(self, job: Job) -> TrialRun:
        """The executor's run function: the point's trial and workload on the job's GPUs and port;
        the evaluation rides along, and the trial's simulated seconds include the workload's."""
        ev, out, t0, t1 = self._evaluate(
            job.extra["knobs"], job.extra.get("best"), job.seq, job.gpus, job.port, job.cancel
        )
        return TrialRun(out, Path(ev.trial_dir), t0, t1, value=ev, simulated_s=ev.trial_s)

    def remote_job(self, job: Job) -> tuple[Any, Path]:
        """What a Ray node needs to run a point (bringup/trial/rayexec.py): its trial and its workload;
        and the folder its files land in here. The study, the journal and the evaluation stay here
        (``finish_job``)."""
        from bringup.trial.rayexec import RemoteTrial, settings_for_node

        t = self.target
        tdir = self._trial_dir(job.cand, job.seq)
        rt = RemoteTrial(
            t.engine,
            job.cand,
            tdir.name,
            settings_for_node(self._settings()),
            t.spec,
            t.version,
            real_gpus=t.world.gpus_here,
            workload=self._workload(job.extra.get("best")),
        )
        return rt, tdir

    def finish_job(self, job: Job, run: TrialRun) -> TrialRun:
        """A point that ran on a Ray node, landed here: its evaluation and journal row, as
        ``run_job`` makes them for a point that ran on this machine."""
        self._verdict(run.outcome, run.tdir)
        knobs = job.extra["knobs"]
        ev = self._judge(knobs, run.outcome, run.tdir, run.started, run.ended, job.seq, job.gpus, job.where)
        return dataclasses.replace(run, value=ev, simulated_s=ev.trial_s)

    def _workload(self, best: float | None) -> Workload:
        return Workload(
            self._scaled_cfg(self.bench_cfg.url), best, self.time_scale, self.objective, self.prune_factor
        )

    def _evaluate(
        self,
        knobs: dict[str, str],
        best: float | None,
        seq: int | None = None,
        gpus: list[str] | None = None,
        port: int | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[Evaluation, Outcome, float, float]:
        """The point's evaluation, and its trial's outcome and real start and end."""
        cand = self.base.with_changes(as_changes(knobs))
        out, tdir, t0, t1 = self.run_trial(cand, self._workload(best), "tune", seq, gpus, port, cancel)
        return self._judge(knobs, out, tdir, t0, t1, seq, gpus), out, t0, t1

    def _judge(
        self,
        knobs: dict[str, str],
        out: Outcome,
        tdir: Path,
        t0: float,
        t1: float,
        seq: int | None,
        gpus: list[str] | None,
        where: str = "",
    ) -> Evaluation:
        """What a point's trial says: its metrics (or why it is infeasible), into the journal."""
        cand = self.base.with_changes(as_changes(knobs))
        flat = out.bench or {}
        metrics = metrics_from_summary(flat, self.time_scale) if out.works and flat else {}
        cmd = cand.shell_command(self.target.engine.command_prefix(cand))
        if out.works and flat:
            # the workload's simulated seconds: its real ones over the scenario's time scale
            work = self.clock.of_real(float(flat.get("duration_s") or 0.0))
            why = (flat.get("stop_reason") or "") if flat.get("stopped_early") else ""
            ev = Evaluation(
                "pruned" if why else "ok",
                metrics,
                launch_s=t1 - t0,
                simulated_s=out.timings.simulated,
                trial_dir=str(tdir),
                command=cmd,
                reason=why,
                workload_s=work,
                gpus=list(gpus or []),
                where=where,
            )
        else:
            ev = Evaluation(
                "infeasible",
                {},
                out.failure_class or out.status,
                out.phase,
                out.key_evidence()[:300],
                out.signature,
                t1 - t0,
                out.timings.simulated,
                str(tdir),
                cmd,
                gpus=list(gpus or []),
                where=where,
            )
        extra: dict[str, Any] = {"knobs": knobs, "metrics": metrics, "status": ev.status}
        if gpus:
            extra["gpus"] = gpus
        if where:
            extra["where"] = where
        self._journal(seq if seq is not None else self.seq, cand, out, tdir, t0, t1, extra)
        return ev

    def _journal(
        self, seq: int, cand: Candidate, out: Outcome, tdir: Path, t0: float, t1: float, extra: dict[str, Any]
    ) -> None:
        """A point's trial into the journal (purpose "tune")."""
        self.journal.add_trial(
            TrialRecord(
                run_id=self.run_id,
                seq=seq,
                purpose="tune",
                candidate=cand,
                effective_key=cand.key(),
                outcome=out,
                trial_dir=str(tdir),
                extra=extra,
                started=t0,
                ended=t1,
                hardware_fp=self.hw_fp,
                model_id=self.model_id,
            )
        )

    def sweep(self, knobs: dict[str, str], concurrencies: list[int]) -> list[SweepPoint]:
        """Throughput against concurrency for one configuration (one launch)."""
        cand = self.base.with_changes(as_changes(knobs))
        rows: list[dict] = []

        def workload(url: str) -> dict:
            for c in concurrencies:
                cfg = self._scaled_cfg(url).model_copy(update={"concurrency": c, "request_rate": None})
                rows.append({"c": c, **bench(cfg).summary.flat()})
            return {"sweep": len(rows)}

        out, tdir, t0, t1 = self.run_trial(cand, workload, "sweep")
        pts = []
        for r in rows:
            m = metrics_from_summary(r, self.time_scale)
            pts.append(
                SweepPoint(
                    concurrency=r["c"],
                    output_tps=m["output_tps"],
                    rps=m["rps"],
                    goodput_rps=m.get("goodput_rps"),
                    ttft_p50_s=m.get("ttft_p50_s"),
                    ttft_p99_s=m.get("ttft_p99_s"),
                    itl_p99_s=m.get("itl_p99_s"),
                )
            )
        self._journal(
            self.seq, cand, out, tdir, t0, t1, {"knobs": knobs, "sweep": [p.model_dump() for p in pts]}
        )
        return pts


def alone(
    ev: LaunchEvaluator, make_executor: Callable[[], Any] | None
) -> tuple[Callable[[dict[str, str]], Evaluation], Callable[[], None]]:
    """Measure one configuration with nothing else running: the evaluator itself, or (a cluster)
    one job at a time through an executor of width 1. Returns the function and its closer."""
    if make_executor is None:
        return (lambda knobs: ev(knobs, None)), (lambda: None)
    ex = make_executor()

    def measure(knobs: dict[str, str]) -> Evaluation:
        job = ev.job(ev.seq + 1, knobs, None)
        ex.submit(job)
        d = ex.wait()
        while d.run is None:  # lost with its node: the machine's failure, not the point's; again
            ex.submit(d.job)
            d = ex.wait()
        return d.run.value

    return measure, ex.close


def beside(
    ev: LaunchEvaluator, make_executor: Callable[[], Any]
) -> Callable[[list[dict[str, str]]], list[Evaluation]]:
    """Measure several configurations at once, side by side, as the search ran its points."""

    def measure(group: list[dict[str, str]]) -> list[Evaluation]:
        ex = make_executor()
        try:
            jobs = [ev.job(ev.seq + 1 + i, knobs, None) for i, knobs in enumerate(group)]
            queue = list(jobs)
            got: dict[int, Evaluation] = {}
            while len(got) < len(jobs):
                while queue and len(ex.in_flight()) < ex.width and ex.fits(queue[0]):
                    ex.submit(queue.pop(0))
                d = ex.wait()
                if d.run is None:  # lost with its node: again
                    queue.insert(0, d.job)
                    continue
                got[d.job.seq] = d.run.value
            return [got[j.seq] for j in jobs]
        finally:
            ex.close()

    return measure
