"""Trials on a Ray cluster, behind the same `Executor` interface as the local one.

Each job runs as one Ray task on a node whose hardware matches the run's: a worker node says
which machine it is with a custom resource named from bringup's hardware fingerprint
(`resource_name`), declared when it joins::

    ray start --address HEAD:6379 --resources '{"bringup-hw-<fp>": 1}'

(``bringup doctor`` prints the line for the machine it runs on). The task asks for the job's GPUs
(``num_gpus``; Ray sets the task's ``CUDA_VISIBLE_DEVICES``), or one CPU for a CPU engine. A double
(the scenario engine) replays a GPU machine on a machine without one: its need is expressed as
the custom resource ``bringup-gpu`` that the nodes replaying it declare.

The task runs the trial with the same code as a local run (`bringup.trial.launch.Trial`) in a scratch
folder on its node, and returns the outcome and the folder's files; the driver writes them into
the run folder, so the journal, the strategy and the report stay at the driver and never know
where a trial ran. While it runs, the task pushes its events (log lines, phases) to a small actor
on the driver's node, which the driver polls, so a trial's lines show as they come; the same
actor carries a cancel back to the task, which then tears its server down as a local trial does.

A node lost mid-trial (the node, its raylet or the worker died) loses the trial, not the
candidate: it comes back as ``Done(run=None, lost_why=...)`` and the run launches it again.
Tasks never retry on their own (``max_retries=0``): the run decides.

Ray is optional (``pip install 'bringup[ray]'``): it is imported only when a run asks for it.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.core.candidate import Candidate
from bringup.core.clock import Clock, clock_for
from bringup.engines.base import Engine
from bringup.guard import files
from bringup.help.text import HelpSpec
from bringup.observe.outcome import Outcome
from bringup.observe.ports import server_port_race
from bringup.trial.executor import Done, FinishOrder, Job, TrialRun
from bringup.trial.launch import TrialSettings
from bringup.trial.slots import parallel_width

AUTH_TOKEN = Path.home() / ".ray" / "auth_token"  # written by a local ray.init() in Ray 2.60
DOUBLE_GPU = "bringup-gpu"  # what a node replaying a GPU machine (scenario double) declares per GPU
FILE_CAP = 64 << 20  # bytes of one trial file sent back (a longer log keeps its tail)
POLL_S = 0.2  # how often the driver reads the events the tasks pushed
PUSH_S = 0.25  # how often a task pushes its events (and learns of a cancel)
CANCEL_GRACE_S = 20.0  # a cancelled trial's teardown, before its worker is killed


class RayMissing(RuntimeError):
    """--ray without Ray installed."""


class RayClusterError(RuntimeError):
    """The cluster cannot run this run's trials: what is wrong and what to do."""


def resource_name(hw_fp: str) -> str:
    """The Ray custom resource a node of this hardware declares: ``bringup-hw-`` and the hash part
    of bringup's hardware fingerprint (``scope:hash``; the scope only keeps journals apart)."""
    return f"bringup-hw-{hw_fp.rsplit(':', 1)[-1]}"


def worker_command(hw_fp: str, address: str = "HEAD:6379", gpus: int | None = None) -> str:
    """How a worker node of this hardware joins a cluster so that bringup's trials land on it
    (``hw_fp``: a fingerprint, or a ``bringup-hw-*`` resource name as is)."""
    extra = f', "{DOUBLE_GPU}": {gpus}' if gpus is not None else ""
    res = hw_fp if hw_fp.startswith("bringup-hw-") else resource_name(hw_fp)
    return f"ray start --address {address} --resources '{{\"{res}\": 1{extra}}}'"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayMissing("--ray needs Ray: pip install 'bringup[ray]'") from None
    return ray


@dataclass
class RemoteTrial:
    """What a node needs to run one trial: no journal, no run, no thread events."""

    engine: Engine
    cand: Candidate  # as launched (a screen's changes applied)
    name: str  # the trial folder's name in the run folder
    settings: TrialSettings  # cancel is None: a cancel comes through the event sink
    spec: HelpSpec | None
    version: str | None
    real_gpus: bool  # the need is real GPUs (Ray assigns them), not a double's resource
    # Run against the server once its probes pass (a tuning point's load), as a local trial's;
    # it must pickle (no journal, no evaluator): bringup/tuning/evaluator.py Workload.
    workload: Callable[[str], dict] | None = None


# -- the node's side -------------------------------------------------------------------------------
class _Sink:
    """On the driver's node: events the tasks push, and which of them the driver cancelled."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, str]] = []
        self.where: dict[int, str] = {}
        self.cancelled: set[int] = set()

    def push(self, seq: int, where: str, events: list[tuple[str, str]]) -> bool:
        self.where[seq] = where
        self.events.extend((seq, k, t) for k, t in events)
        return seq in self.cancelled

    def drain(self) -> tuple[list[tuple[int, str, str]], dict[int, str]]:
        ev, self.events = self.events, []
        return ev, dict(self.where)

    def cancel(self, seqs: list[int]) -> None:
        self.cancelled.update(seqs)


def _node_label() -> str:
    import ray

    return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"


def run_remote(rt: RemoteTrial, seq: int, sink: Any) -> dict[str, Any]:
    """The Ray task: the trial with the local code, in a scratch folder; its outcome and files back."""
    import ray

    from bringup.trial.launch import Trial

    where = _node_label()
    gpu_ids = [str(g) for g in ray.get_gpu_ids()] if rt.real_gpus else []
    engine = dataclasses.replace(rt.engine, gpus=",".join(gpu_ids)) if gpu_ids else rt.engine
    cancel = threading.Event()
    buf: list[tuple[str, str]] = []
    lock, stop = threading.Lock(), threading.Event()

    def on_event(kind: str, text: str) -> None:
        with lock:
            buf.append((kind, text))

    def push() -> None:
        with lock:
            batch = buf[:]
            buf.clear()
        try:
            if ray.get(sink.push.remote(seq, where, batch), timeout=30):
                cancel.set()
        except Exception:  # noqa: BLE001 - the driver's side gone: the trial still ends and tears down
            pass

    def pusher() -> None:
        while not stop.wait(PUSH_S):
            push()

    push()  # the driver learns where it runs before the first line
    t = threading.Thread(target=pusher, name=f"push-{seq}", daemon=True)
    t.start()
    scratch = Path(tempfile.mkdtemp(prefix="bringup-ray-"))
    tdir = scratch / rt.name
    try:
        started = time.time()
        settings = dataclasses.replace(rt.settings, cancel=cancel)
        out = Trial(
            engine,
            rt.cand,
            tdir,
            settings,
            spec=rt.spec,
            version=rt.version,
            on_event=on_event,
            workload=rt.workload,
        ).run()
        ended = time.time()
        stop.set()
        t.join(timeout=5)
        push()
        files: dict[str, bytes] = {}
        for p in sorted(tdir.rglob("*")):
            if p.is_file():
                data = p.read_bytes()
                files[str(p.relative_to(tdir))] = data[-FILE_CAP:] if len(data) > FILE_CAP else data
        return {
            "outcome": out.model_dump_json(),
            "files": files,
            "dir": str(tdir),
            "where": where,
            "gpus": gpu_ids,
            "started": started,
            "ended": ended,
        }
    finally:
        stop.set()
        shutil.rmtree(scratch, ignore_errors=True)


# -- the driver's side -----------------------------------------------------------------------------
@dataclass
class _Node:
    node_id: str
    gpus: float  # GPUs (or a double's bringup-gpu) it offers to trials
    alive: bool


class RayExecutor:
    """Trials on the cluster's nodes of this run's hardware, ``width`` at once at most."""

    def __init__(
        self,
        remote_for: Callable[[Job], tuple[RemoteTrial, Path]],
        hw_fp: str,
        address: str = "auto",
        simulated: bool = False,
        width: int | None = None,
        on_event: Callable[[str, str], None] | None = None,
        local_gpus: int = 0,
        finish: Callable[[Job, TrialRun], TrialRun] | None = None,
        resource: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``resource``: the node type to pin the trials to (a ``bringup-hw-*`` name, see
        bringup/session/nodetypes.py); None: the one named from ``hw_fp``, this run's hardware.
        ``simulated``: the trials run on a double, whose nodes offer ``bringup-gpu`` for GPUs.
        ``clock``: the run's (the engine's); without one, ``simulated`` says which kind."""
        self.ray = ray = import_ray()
        self.remote_for = remote_for
        # What the driver makes of a landed trial before it is handed back (a tuning point's
        # evaluation and journal row, as the local run function does on this machine).
        self.finish = finish
        self.hw_fp = hw_fp
        self.resource = resource or resource_name(hw_fp)
        whose = f"this machine's hardware, {hw_fp}" if resource is None else "the node type asked for"
        self.simulated = simulated
        self.gpu_key = DOUBLE_GPU if simulated else "GPU"
        self.clock = clock or clock_for(simulated)
        self.on_event = on_event or (lambda kind, text: None)
        self._own = False
        if not ray.is_initialized():
            self._own = True
            self._init(address, local_gpus)
        nodes = self.nodes()
        if not nodes:
            declared = sorted(
                {
                    k
                    for n in ray.nodes()
                    if n.get("Alive")
                    for k in n.get("Resources", {})
                    if k.startswith("bringup-hw-")
                }
            )
            if self._own:  # a driver left connected to a cluster dies with it later
                ray.shutdown()
            raise RayClusterError(
                f"no live Ray node declares {self.resource} ({whose}); the cluster has "
                f"{', '.join(declared) or 'no bringup node'}. Start a worker of this hardware with: "
                f"{worker_command(self.resource)}"
            )
        self.total_gpus = int(sum(n.gpus for n in nodes))
        self.width = max(1, width if width is not None else (self.total_gpus or len(nodes)))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        self._sink = (
            ray.remote(_Sink)
            .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
            .remote()
        )
        self._task = ray.remote(run_remote)
        self._running: dict[Any, tuple[Job, Path, RemoteTrial]] = {}
        self._finished = FinishOrder(self.clock)
        self._checked = time.monotonic()
        # Ray's driver prints what the cluster reports ("(raylet) The node with node id ... has
        # been marked dead") on sys.stdout, from a thread of its own, whatever log_to_driver says;
        # stdout is where `--json` writes its one object. While trials run, those lines go to stderr.
        self._stdout, sys.stdout = sys.stdout, sys.stderr

    def _init(self, address: str, local_gpus: int) -> None:
        ray = self.ray
        quiet = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address != "auto":
            ray.init(address=address, **quiet)
            return
        try:
            ray.init(address="auto", **quiet)  # a cluster already running here
        except ConnectionError:
            # None: a one-node cluster of this machine, declaring its own hardware.
            res = {self.resource: 1.0}
            if self.simulated and local_gpus:
                res[DOUBLE_GPU] = float(local_gpus)
            token_was_there = AUTH_TOKEN.exists()
            ray.init(num_cpus=max(2, local_gpus), resources=res, object_store_memory=200_000_000, **quiet)
            # Ray 2.60 leaves ~/.ray/auth_token behind a local instance, and clusters started later
            # with `ray start` then refuse every driver (InvalidAuthToken; docs/facts.md). bringup
            # removes the file it made when it shuts its instance down.
            self._token_made = not token_was_there and AUTH_TOKEN.exists()

    def nodes(self) -> list[_Node]:
        """Live nodes of this run's hardware."""
        out = []
        for n in self.ray.nodes():
            res = n.get("Resources", {})
            if n.get("Alive") and res.get(self.resource, 0) > 0:
                out.append(_Node(n["NodeID"], float(res.get(self.gpu_key, 0)), True))
        return out

    # -- placing -------------------------------------------------------------------------------
    def _gpus_in_flight(self) -> int:
        return sum(j.need for j in self.in_flight())

    def fits(self, job: Job, freeing: list[Job] | None = None) -> bool:
        freeing = freeing or []
        if len(self.in_flight()) - len(freeing) >= self.width:
            return False
        held = self._gpus_in_flight() - sum(j.need for j in freeing)
        return job.need == 0 or job.need <= self.total_gpus - held

    def wait_for_held(self, seconds: float) -> list[str] | None:
        """Ray places trials by its own GPU accounting: no GPU is held back from it here."""
        return None

    def ever_fits(self, job: Job) -> bool:
        """A trial runs on one node: it must fit the largest one."""
        return job.need == 0 or any(n.gpus >= job.need for n in self.nodes())

    def submit(self, job: Job) -> None:
        rt, tdir = self.remote_for(job)
        job.sim_start = self.now()
        job.where = "ray:pending"
        self._start(job, tdir, rt)

    def _start(self, job: Job, tdir: Path, rt: RemoteTrial) -> None:
        res: dict[str, float] = {self.resource: 0.001}
        opts: dict[str, Any] = {"max_retries": 0, "num_cpus": 1 if job.need == 0 else 0}
        if job.need and rt.real_gpus:
            opts["num_gpus"] = job.need
        elif job.need:
            res[DOUBLE_GPU] = float(job.need)
        ref = self._task.options(resources=res, **opts).remote(rt, job.seq, self._sink)
        self._running[ref] = (job, tdir, rt)

    def in_flight(self) -> list[Job]:
        return [*(j for j, _, _ in self._running.values()), *self._finished.jobs()]

    def cancel(self, job: Job) -> None:
        """The task learns of it through the sink and tears its server down as on close()."""
        if self._finished.cancel(job) and any(j is job for j, _, _ in self._running.values()):
            self.ray.get(self._sink.cancel.remote([job.seq]), timeout=10)

    def now(self) -> float:
        return self._finished.now()

    # -- waiting -------------------------------------------------------------------------------
    def _poll_events(self) -> None:
        events, where = self.ray.get(self._sink.drain.remote())
        for job, _, _ in self._running.values():
            if job.seq in where:
                job.where = where[job.seq]
        for _, kind, text in events:
            self.on_event(kind, text)
        if not events:
            # A "tick" while a remote trial is silent (serving, a stall probe's wait): an observer
            # that stops the run (the driver's Ctrl-C over node types) is heard within POLL_S, not
            # only at the trial's next line; seen: a type's run still `running` after the driver
            # exited, its trial silent through the driver's 60 s wait.
            self.on_event("tick", "")

    def _collect(self, ref: Any) -> None:
        job, tdir, rt = self._running.pop(ref)
        res: TrialRun | BaseException | str
        try:
            got = self.ray.get(ref)
            res = self._land(got, tdir)
            job.where, job.gpus = got["where"], list(got["gpus"])
        except self.ray.exceptions.RayTaskError as e:
            # The trial's own code raised: a bug, as it would be locally (unless Ray cancelled it).
            cause = getattr(e, "cause", None)
            res = _lost_why(cause) if isinstance(cause, self.ray.exceptions.RayError) else (cause or e)
        except self.ray.exceptions.RayError as e:  # node, raylet or worker died; object lost; cancelled
            res = _lost_why(e)
        if (
            isinstance(res, TrialRun)
            and server_port_race(res.outcome)
            and job.port_tries < 3
            and job.cancelled_at is None
        ):
            job.port_tries += 1  # the node's race for a port, not the candidate's: again
            self._start(job, tdir, rt)
            return
        if isinstance(res, TrialRun) and self.finish is not None:
            res = self.finish(job, res)
        self._finished.add(job, res)

    def _land(self, got: dict[str, Any], tdir: Path) -> TrialRun:
        """The node's trial folder into the run folder, its paths made the driver's."""
        tdir.mkdir(parents=True, exist_ok=True)
        for rel, data in got["files"].items():
            p = tdir / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            files.write_bytes(p, data)
        text = got["outcome"].replace(got["dir"], str(tdir))
        out = Outcome.model_validate_json(text)
        files.write_text(tdir / "outcome.json", out.model_dump_json(indent=2))
        return TrialRun(out, tdir, got["started"], got["ended"])

    def _check_nodes(self) -> None:
        """Every few seconds: a run whose nodes all left would wait forever for a task Ray cannot place."""
        if time.monotonic() - self._checked < 5:
            return
        self._checked = time.monotonic()
        if not self.nodes():
            raise RayClusterError(
                f"no live Ray node declares {self.resource} any more; trials cannot run. "
                f"Start one with: {worker_command(self.resource)}"
            )

    def wait(self) -> Done:
        d = self.wait_until(None)
        assert d is not None  # without a wake-up time, wait() returns a finished trial
        return d

    def wait_until(self, until: float | None) -> Done | None:
        if not self._running and not self._finished:
            raise RuntimeError("nothing in flight")
        while self._running and not self.clock.knows_next_end(len(self._finished)):
            if self.clock.woken(until):
                return None  # woken at ``until`` with nothing finished
            ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
            self._poll_events()
            for ref in ready:
                self._collect(ref)
            if not ready:
                self._check_nodes()
        self._poll_events()
        if not self._finished.due(until):
            return None
        job, res = self._finished.pop()
        if isinstance(res, str):
            return Done(job, None, self.now(), lost_why=res, cancelled=job.cancelled_at is not None)
        if isinstance(res, BaseException):
            raise res
        return Done(job, res, self.now(), cancelled=job.cancelled_at is not None)

    def close(self) -> None:
        """Cancel what is in flight: each task tears its server down (as a local trial does); a task
        still running after the grace is killed with its worker, and its server with it (the
        server dies with its parent: PR_SET_PDEATHSIG, bringup/trial/process.py)."""
        ray = self.ray
        if self._running:
            left = list(self._running)
            if CANCEL_GRACE_S > 0:  # no grace: killed at once
                try:
                    ray.get(
                        self._sink.cancel.remote([j.seq for j, _, _ in self._running.values()]), timeout=10
                    )
                    _, left = ray.wait(left, num_returns=len(left), timeout=CANCEL_GRACE_S)
                except ray.exceptions.RayError:  # the sink is gone (the driver's node): kill them
                    pass
            for ref in left:
                try:
                    ray.cancel(ref, force=True)
                except ray.exceptions.RayError:  # its node is gone, and its server with it
                    pass
            self._running.clear()
        self._finished.clear()
        try:
            ray.kill(self._sink)
        except Exception:  # noqa: BLE001 - already gone with the cluster
            pass
        if self._own:
            ray.shutdown()
        if getattr(self, "_token_made", False):
            AUTH_TOKEN.unlink(missing_ok=True)
            self._token_made = False
        if sys.stdout is sys.stderr:
            sys.stdout = self._stdout


def cluster_executor(
    remote_for: Callable[[Job], tuple[RemoteTrial, Path]],
    hw_fp: str,
    address: str,
    parallel: str,
    local_gpus: int,
    simulated: bool,
    on_event: Callable[[str, str], None] | None = None,
    finish: Callable[[Job, TrialRun], TrialRun] | None = None,
    resource: str | None = None,
    clock: Clock | None = None,
) -> RayExecutor:
    """``--ray ADDRESS`` with ``--parallel``, as `run` and `tune` both take them: ``auto`` is as
    many trials at once as the cluster's nodes of this hardware have GPUs, a number caps it.
    ``resource``: a node type to pin the trials to (bringup/session/nodetypes.py), else this hardware's."""
    return RayExecutor(
        remote_for,
        hw_fp,
        address=address or "auto",
        simulated=simulated,
        width=None if parallel == "auto" else parallel_width(parallel, local_gpus),
        on_event=on_event,
        local_gpus=local_gpus,
        finish=finish,
        resource=resource,
        clock=clock,
    )


def _lost_why(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:300]


def settings_for_node(settings: TrialSettings) -> TrialSettings:
    """A trial's settings as shipped: no thread event (a cancel comes through the sink), no port
    (the node picks a free one of its own), no GPU watch of the driver's."""
    return dataclasses.replace(settings, cancel=None, port=None, gpu_watch=None)
