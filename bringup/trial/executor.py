"""Where trials run: the narrow interface between a run's loop and the machines.

A run submits jobs (a candidate, launched as a screen or in full) and waits for the next one to
finish; the executor decides where each runs. `LocalExecutor` runs them on this machine, at
most ``width`` at once, each on its own GPUs and port (`bringup.trial.slots`); one at a time it is the
plain sequential loop. A Ray executor (`bringup.trial.rayexec`) runs them on a cluster behind the same
interface, so the strategy, the journal and the report never know where a trial ran.

The run's clock (`bringup.core.clock`, the engine's): on a real engine, seconds since the run
started; on a double that replays a slow machine, the simulated seconds that its launches stand
for. Trials that overlap in real time overlap on the simulated clock too: each starts at the
simulated time it was submitted and ends its launch's simulated seconds later; finished trials
are handed back in order of their end on the clock, so that what the strategy has seen at each
decision is what it would have seen on the real machine, whatever the real scheduling noise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bringup.core.candidate import Candidate
from bringup.core.clock import Clock, clock_for
from bringup.observe.outcome import Outcome
from bringup.observe.ports import server_port_race
from bringup.record.results import Purpose
from bringup.trial.slots import GpuSlots, PortPool

HELD_POLL_S = 2.0  # how often a run with nothing in flight reads a held GPU's memory again


@dataclass
class Job:
    """One trial to run: what the strategy decided, and where it runs once placed."""

    seq: int
    purpose: Purpose
    cand: Candidate  # as the strategy sees it
    screen: bool
    extra: dict[str, Any]
    need: int = 0  # GPUs
    gpus: list[str] = field(default_factory=list)  # placed: the trial's CUDA_VISIBLE_DEVICES
    port: int | None = None
    where: str = "local"  # the node a trial ran on (Ray), for the report
    sim_start: float = 0.0  # the run's clock when it was submitted
    cancel: threading.Event = field(default_factory=threading.Event)
    port_tries: int = 0
    # The run's clock when the run cancelled it (preempted by a likelier full launch); None: not.
    cancelled_at: float | None = None


@dataclass
class TrialRun:
    """What running a job gave: the outcome, its folder and its real start and end."""

    outcome: Outcome
    tdir: Path
    started: float
    ended: float
    # What the job's run function made of the trial beyond its outcome (a tuning point's
    # evaluation), for the loop that submitted it; the executor never reads it.
    value: Any = None
    # Simulated seconds the whole trial stands for when it is more than its launch (a tuning
    # point's workload runs after the server is ready); None: the launch's own.
    simulated_s: float | None = None


@dataclass
class Done:
    job: Job
    run: TrialRun | None  # None: the trial was lost (its node died), not failed
    clock: float  # the run's clock at its end
    lost_why: str = ""
    # Cancelled before it answered (preempted): its outcome is no evidence about its candidate.
    cancelled: bool = False


RunTrial = Callable[[Job], TrialRun]
Result = Any  # a TrialRun, an exception the run function raised, or (Ray) why the trial was lost


class FinishOrder:
    """The run's clock, and finished trials handed back in order of their end on it: shared by
    every executor, so that trials overlap on the simulated clock the same way wherever they ran."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._done: list[tuple[float, int, Job, Result]] = []

    def now(self) -> float:
        return self.clock.now()

    def add(self, job: Job, res: Result) -> None:
        """A trial that ended: on a double, at its start plus the simulated seconds it stands for
        (or when it was cancelled, if it was)."""
        sim = None
        if isinstance(res, TrialRun):
            sim = res.simulated_s if res.simulated_s is not None else res.outcome.timings.simulated
        self._done.append((self.clock.end(job.sim_start, sim, job.cancelled_at), job.seq, job, res))

    def cancel(self, job: Job) -> bool:
        """Cancel a job at the run's clock now; whether it counts as cancelled. A trial that has
        already ended by itself has answered, and is not cancelled: on a real engine, one that came
        back before the cancel; on a double, one whose simulated end is now (it ended at this very
        instant). Otherwise, on a double, the trial ends now on the simulated clock, whatever it
        did in real time (what it would have shown later is not known at this time)."""
        if job.cancelled_at is not None:
            return True
        now = self.now()
        ended = [e for e, _, j, _ in self._done if j is job]
        if ended and ended[0] <= now:  # on the wall clock, every trial back has ended by now
            return False
        job.cancelled_at = now
        self._done = [(now if j is job else e, q, j, r) for e, q, j, r in self._done]
        return True

    def pop(self) -> tuple[Job, Result]:
        """The earliest to end (the clock moves on to it)."""
        self._done.sort(key=lambda t: (t[0], t[1]))
        end, _, job, res = self._done.pop(0)
        self.clock.reach(end)
        return job, res

    def due(self, until: float | None) -> bool:
        """Does a finished trial come back by ``until`` (None: no wake-up)? If not, the clock moves
        on to it (a wake-up with nothing new: the run looks again at what is in flight)."""
        return self.clock.due(min((e for e, _, _, _ in self._done), default=float("inf")), until)

    def jobs(self) -> list[Job]:
        return [j for _, _, j, _ in self._done]

    def clear(self) -> None:
        self._done.clear()

    def __len__(self) -> int:
        return len(self._done)


class Executor(Protocol):
    """Runs jobs; the run's loop only submits, waits and asks what is in flight."""

    width: int  # trials at once, at most
    clock: Clock  # the run's clock (the engine's: wall, or a double's simulated seconds)

    def fits(self, job: Job, freeing: list[Job] | None = None) -> bool:
        """Could this job start now (a free slot and enough free GPUs), or once the jobs in
        ``freeing`` (in flight, cancelled) have given theirs back?"""
        ...

    def ever_fits(self, job: Job) -> bool:
        """Could it start at all on what this executor has?"""
        ...

    def submit(self, job: Job) -> None: ...

    def wait_for_held(self, seconds: float) -> list[str] | None:
        """Nothing is in flight and the next launch waits for GPUs whose memory is not back (a
        leftover, or a process this run did not start): look again for up to ``seconds``. The
        GPUs still held (empty: some came back, the launch may go on; None: none was held)."""
        ...

    def wait(self) -> Done:
        """The next job to finish (blocks)."""
        ...

    def wait_until(self, until: float | None) -> Done | None:
        """The next job to finish, or None if none has by ``until`` on the run's clock (None:
        wait as long as it takes): the run wakes up to look again at what is in flight."""
        ...

    def in_flight(self) -> list[Job]: ...

    def cancel(self, job: Job) -> None:
        """Stop a job in flight (its server torn down as on any other end); its Done comes back
        from wait() with ``cancelled`` set, at the time of the cancel on a simulated clock. A job
        that already ended by itself on a real engine comes back as it ended."""
        ...

    def now(self) -> float:
        """The run's clock: seconds (simulated for a double) since the run started."""
        ...

    def close(self) -> None:
        """Stop what is in flight (each trial tears its server down) and wait for it."""
        ...


class LocalExecutor:
    """Trials on this machine, ``width`` at once, on disjoint GPUs and ports."""

    def __init__(
        self,
        run_trial: RunTrial,
        slots: GpuSlots,
        width: int = 1,
        simulated: bool = False,
        ports: PortPool | None = None,
        gpu_free: Callable[[list[str]], bool] | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: the run's (the engine's); without one, ``simulated`` says which kind."""
        self.run_trial = run_trial
        self.slots = slots
        self.width = max(1, width)
        self.clock = clock or clock_for(simulated)
        self.ports = ports or PortPool()
        self.gpu_free = gpu_free  # a fresh reading: is a held GPU's memory back? (None: never recheck)
        self._pool = ThreadPoolExecutor(max_workers=self.width, thread_name_prefix="trial")
        self._running: dict[Future[TrialRun], Job] = {}
        self._finished = FinishOrder(self.clock)

    # -- placing -------------------------------------------------------------------------------
    def _slots_free(self) -> int:
        return self.width - len(self._running) - len(self._finished)

    def fits(self, job: Job, freeing: list[Job] | None = None) -> bool:
        freeing = freeing or []
        if self._slots_free() + len(freeing) <= 0:
            return False
        if not self.slots.fits(job.need) and self.slots.held:
            self._unhold_back()
        if not freeing:
            return self.slots.fits(job.need)
        return job.need == 0 or len(self.slots.free()) + sum(len(j.gpus) for j in freeing) >= job.need

    def ever_fits(self, job: Job) -> bool:
        return job.need == 0 or self.slots.ever_fits(job.need)

    def wait_for_held(self, seconds: float) -> list[str] | None:
        """On the H200 a server that another program started during a launch took 128 GB of the
        GPU; the launch's teardown then found the memory not back and the run, with nothing in
        flight and its next launch waiting for that GPU, stopped with no reason given. Memory
        comes back when its holder exits: wait for it (wall time; a double's simulated GPUs are
        never read again), then say which GPUs are still held."""
        if not self.slots.held:
            return None
        deadline = time.monotonic() + (0.0 if self.gpu_free is None or self.clock.simulated else seconds)
        while not self._unhold_back():
            if time.monotonic() >= deadline:
                return sorted(self.slots.held)
            time.sleep(HELD_POLL_S)
        return []

    def _unhold_back(self) -> list[str]:
        """The held GPUs a fresh reading shows back, released for launches again (none without a
        way to read them)."""
        if self.gpu_free is None:
            return []
        back = [g for g in sorted(self.slots.held) if self.gpu_free([g])]
        self.slots.unhold(back)
        return back

    def submit(self, job: Job) -> None:
        job.gpus = self.slots.acquire(job.need) if job.need else []
        job.port = self.ports.take()
        job.sim_start = self.now()
        self._running[self._pool.submit(self.run_trial, job)] = job

    def in_flight(self) -> list[Job]:
        return [*self._running.values(), *self._finished.jobs()]

    def cancel(self, job: Job) -> None:
        # The trial tears its server down (its process group) and waits for it, then the GPU
        # watch's reading after teardown decides whether its GPUs are free (wait() below).
        if self._finished.cancel(job):
            job.cancel.set()

    def now(self) -> float:
        return self._finished.now()

    # -- waiting -------------------------------------------------------------------------------
    def _collect(self, futures: set[Future[TrialRun]]) -> None:
        for fut in futures:
            job = self._running.pop(fut)
            err = fut.exception()
            self._finished.add(job, err if err is not None else fut.result())

    def wait(self) -> Done:
        d = self.wait_until(None)
        assert d is not None  # without a wake-up time, wait() returns a finished trial
        return d

    def wait_until(self, until: float | None) -> Done | None:
        if not self._running and not self._finished:
            raise RuntimeError("nothing in flight")
        while self._running and not self.clock.knows_next_end(len(self._finished)):
            done = wait(list(self._running), self.clock.wait_s(until), return_when=FIRST_COMPLETED).done
            if not done:
                return None  # woken at ``until`` with nothing finished
            self._collect(set(done))
        if not self._finished.due(until):
            return None
        job, res = self._finished.pop()
        if job.port is not None:
            self.ports.give(job.port)
        cancelled = job.cancelled_at is not None
        if (
            isinstance(res, TrialRun)
            and server_port_race(res.outcome)
            and job.port_tries < 3
            and not cancelled
        ):
            # Someone else took the port between the pick and the launch: the machine's race, not
            # the candidate's failure. Again on another port, on the same GPUs.
            job.port_tries += 1
            job.port = self.ports.take()
            self._running[self._pool.submit(self.run_trial, job)] = job
            return self.wait_until(until)
        if isinstance(res, BaseException):
            self.slots.release(job.gpus)
            raise res
        held = job.gpus if res.outcome.failure_class == "gpu-memory-held" or _left_memory(res.outcome) else []
        self.slots.release(job.gpus, held=held)
        return Done(job, res, self.now(), cancelled=cancelled)

    def close(self) -> None:
        for job in self.in_flight():
            job.cancel.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for job in list(self._running.values()):
            self.slots.release(job.gpus)
        self._running.clear()


def _left_memory(out: Outcome) -> bool:
    """The trial's teardown left GPU memory held (its record says so)."""
    return bool(out.gpu.get("held")) if isinstance(out.gpu, dict) else False
