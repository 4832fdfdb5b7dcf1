"""The imitated engine's scheduler: continuous batching with chunked prefill, in steps.

One `Replica` is one engine instance (TP ranks act as one; DP makes several). Each step it:

1. admits waiting requests first come, first served, while fewer than max-running-requests are
   running and the KV pool has room for the whole request (prompt + output tokens reserved up
   front, so nothing is ever retracted); the first request that does not fit blocks the ones
   behind it;
2. runs one decode token for every request past its prefill, plus up to `chunk` prompt tokens of
   the admitted requests still prefilling (oldest first; a long prompt spans several steps);
3. ends after `StepModel.step_seconds` simulated seconds: a request whose prompt is done gets its
   first token at the end of that step, every decoding request one more token; a request with
   all its tokens leaves and frees its KV.

`Replica` is pure (no clock, no I/O): the offline evaluator (`perfsim.py`) drives it with a
virtual clock, and `EngineLoop` below drives it in the server's event loop in real time
(simulated seconds x time scale). One scheduler, two clocks: the numbers cannot drift apart.
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from bringup.scenario.perf import StepModel

MAX_LAG_REAL_S = 0.25  # a step loop this late (real seconds) restarts its schedule from now
# The line a replica's step loop logs when it goes idle: how well it kept its real-time schedule.
PERF_PREFIX = "[scenario-perf]"
PERF_RE = re.compile(
    r"\[scenario-perf\] replica=(\d+) steps=(\d+) busy_s=([0-9.]+) late_max_ms=([0-9.]+) "
    r"late_mean_ms=([0-9.]+) restarts=(\d+)"
)


@dataclass(eq=False)
class ScheduledRequest:
    """One request inside the engine. Times are simulated seconds."""

    prompt_tokens: int
    output_tokens: int  # at least 1
    arrival: float = 0.0
    index: int = 0  # the caller's number for it
    replica: int = 0
    need: int = 0  # KV tokens reserved while it runs
    prefilled: int = 0
    first_step: int = -1  # the replica step that produced its first token
    done: bool = False
    aborted: bool = False
    # server side: tokens delivered so far, the simulated time of the last one, and a wake-up
    emitted: int = 0
    last_at: float = 0.0
    changed: asyncio.Event | None = None

    def cached_after(self, step: int) -> int:
        """KV tokens it holds once `step` has run (it decodes from first_step + 1 on)."""
        return self.prompt_tokens + (step - self.first_step) + 1 if self.first_step >= 0 else 0


@dataclass
class Step:
    duration: float  # simulated seconds
    decode: int  # requests decoding in it
    prefill: int  # prompt tokens in it
    pieces: list[tuple[ScheduledRequest, int]]  # (job, prompt tokens of it prefilled in this step)
    decoders: list[ScheduledRequest] | None = (
        None  # who decodes in it (only when asked: the server notifies them)
    )


@dataclass
class Replica:
    model: StepModel
    index: int = 0
    waiting: deque[ScheduledRequest] = field(default_factory=deque)
    prefilling: deque[ScheduledRequest] = field(default_factory=deque)
    decoding: dict[ScheduledRequest, None] = field(default_factory=dict)  # ordered set
    kv_free: int = 0
    ctx: int = 0  # KV tokens the decoding requests read in the next step
    steps: int = 0  # steps run so far
    finish_at: dict[int, list[ScheduledRequest]] = field(
        default_factory=dict
    )  # step -> jobs whose last token it makes
    aborts: list[ScheduledRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kv_free = self.model.kv_capacity
        self.rng = self.model.noise(self.index)

    @property
    def idle(self) -> bool:
        return not (self.waiting or self.prefilling or self.decoding)

    @property
    def running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    def add(self, job: ScheduledRequest) -> None:
        job.replica = self.index
        self.waiting.append(job)

    def _admit(self) -> None:
        m = self.model
        while self.waiting and self.running < m.max_running:
            job = self.waiting[0]
            # A request bigger than the whole pool still runs once the pool is empty (an engine
            # would truncate or reject it; the scenario server's context check comes first).
            need = min(job.prompt_tokens + job.output_tokens, m.kv_capacity)
            if need > self.kv_free:
                break  # FCFS: the head of the queue waits for room, and so does everyone behind it
            self.waiting.popleft()
            job.need = need
            self.kv_free -= need
            self.prefilling.append(job)

    def plan(self, collect: bool = False) -> Step:
        """The next step: admit, pick the prompt chunks, price it (drawing its noise)."""
        self._admit()
        budget = self.model.chunk
        pieces: list[tuple[ScheduledRequest, int]] = []
        for job in self.prefilling:
            if budget <= 0:
                break
            take = min(budget, job.prompt_tokens - job.prefilled)
            pieces.append((job, take))
            budget -= take
        prefill = sum(t for _, t in pieces)
        decode = len(self.decoding)
        z = self.rng.gauss(0.0, 1.0)
        duration = self.model.step_seconds(decode, prefill, self.ctx, z)
        return Step(duration, decode, prefill, pieces, list(self.decoding) if collect else None)

    def commit(self, step: Step) -> tuple[list[ScheduledRequest], list[ScheduledRequest]]:
        """Apply a planned step. Returns (jobs that got their first token, jobs that finished)."""
        s = self.steps
        self.ctx += len(self.decoding)  # every decoder cached one more token
        finished = self.finish_at.pop(s, [])
        for job in finished:
            del self.decoding[job]
            self.ctx -= job.prompt_tokens + job.output_tokens
        started: list[ScheduledRequest] = []
        for job, take in step.pieces:
            job.prefilled += take
            if job.prefilled < job.prompt_tokens:
                continue  # only the last piece can be partial
            self.prefilling.popleft()
            job.first_step = s
            started.append(job)
            if job.output_tokens > 1:
                self.decoding[job] = None
                self.ctx += job.prompt_tokens + 1
                self.finish_at.setdefault(s + job.output_tokens - 1, []).append(job)
            else:
                finished.append(job)
        for job in finished:
            job.done = True
            self.kv_free += job.need
        self.steps = s + 1
        if self.aborts:
            self._apply_aborts()
        return started, finished

    def abort(self, job: ScheduledRequest) -> None:
        """Drop a request (its client went away); applied at the next step boundary."""
        if not job.done and not job.aborted:
            job.aborted = True
            self.aborts.append(job)

    def _apply_aborts(self) -> None:
        for job in self.aborts:
            if job.done:
                continue
            job.done = True
            if job in self.decoding:
                del self.decoding[job]
                self.ctx -= job.cached_after(self.steps - 1)
                last = job.first_step + job.output_tokens - 1
                self.finish_at[last].remove(job)
                if not self.finish_at[last]:
                    del self.finish_at[last]
                self.kv_free += job.need
            elif job in self.prefilling:
                self.prefilling.remove(job)
                self.kv_free += job.need
            elif job in self.waiting:
                self.waiting.remove(job)
        self.aborts.clear()


def pick_replica(replicas: list[Replica], counter: int, method: str) -> Replica:
    """Where the `counter`-th request goes (data parallelism): round robin, or the replica with
    the fewest requests (total_requests) or tokens (total_tokens) in it, the first on a tie."""
    if len(replicas) == 1:
        return replicas[0]
    if method == "total_requests":
        return min(replicas, key=lambda r: len(r.waiting) + r.running)
    if method == "total_tokens":
        return min(
            replicas,
            key=lambda r: (
                r.model.kv_capacity - r.kv_free + sum(j.prompt_tokens + j.output_tokens for j in r.waiting)
            ),
        )
    return replicas[counter % len(replicas)]


@dataclass
class Busy:
    """How well one replica's step loop kept its real-time schedule over one busy period (from
    the first request after idle to idle again). Late steps mean the process did not get the CPU
    in time: what a client measured then is slower than the model says."""

    replica: int
    real_s: float  # the period's start (loop time), then its length in real seconds
    steps: int = 0
    late_max_s: float = 0.0  # the latest a step's tokens went out after their deadline (real s)
    late_sum_s: float = 0.0
    restarts: int = 0  # times the loop fell more than MAX_LAG_REAL_S behind and restarted

    def late(self, seconds: float) -> None:
        self.steps += 1
        if seconds > 0:
            self.late_max_s = max(self.late_max_s, seconds)
            self.late_sum_s += seconds

    def line(self) -> str:
        mean = self.late_sum_s / self.steps if self.steps else 0.0
        return (
            f"{PERF_PREFIX} replica={self.replica} steps={self.steps} busy_s={self.real_s:.3f} "
            f"late_max_ms={self.late_max_s * 1e3:.1f} late_mean_ms={mean * 1e3:.2f} restarts={self.restarts}"
        )


class EngineLoop:
    """The replicas' step loops in the server's event loop: each step sleeps its simulated time
    x scale, on an absolute schedule (the time spent handing tokens out does not stretch steps),
    then hands every request its token. Requests go to replicas by `pick_replica`."""

    def __init__(
        self,
        model: StepModel,
        scale: float,
        sim_now: float = 0.0,
        on_step: Callable[[Replica, Step], None] | None = None,
        on_idle: Callable[[Busy], None] | None = None,
    ):
        self.model = model
        self.scale = scale
        self.replicas = [Replica(model, r) for r in range(model.dp)]
        self._loop = asyncio.get_running_loop()
        self._real0 = self._loop.time()
        self._sim0 = sim_now
        self._tasks: list[asyncio.Task[None] | None] = [None] * model.dp
        self._next = 0
        self.on_step = on_step
        self.on_idle = on_idle

    def sim_now(self) -> float:
        return self._sim0 + (self._loop.time() - self._real0) / self.scale

    def submit(self, prompt_tokens: int, output_tokens: int) -> ScheduledRequest:
        job = ScheduledRequest(
            max(prompt_tokens, 1), max(output_tokens, 1), arrival=self.sim_now(), changed=asyncio.Event()
        )
        rep = pick_replica(self.replicas, self._next, self.model.dispatch)
        self._next += 1
        rep.add(job)
        task = self._tasks[rep.index]
        if task is None or task.done():
            self._tasks[rep.index] = asyncio.create_task(self._run(rep))
        return job

    def abort(self, job: ScheduledRequest) -> None:
        self.replicas[job.replica].abort(job)

    @staticmethod
    def _emit(job: ScheduledRequest, at: float) -> None:
        if job.aborted:
            return
        job.emitted += 1
        job.last_at = at
        assert job.changed is not None
        job.changed.set()

    async def _run(self, rep: Replica) -> None:
        lag = MAX_LAG_REAL_S / self.scale
        t = self.sim_now()
        busy = Busy(rep.index, self._loop.time())
        while not rep.idle:
            step = rep.plan(collect=True)
            end = t + step.duration
            deadline = self._real0 + (end - self._sim0) * self.scale
            delay = deadline - self._loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            busy.late(self._loop.time() - deadline)
            started, _ = rep.commit(step)
            for job in step.decoders or ():
                self._emit(job, end)
            for job in started:
                self._emit(job, end)
            if self.on_step is not None:
                self.on_step(rep, step)
            # Keep the schedule absolute unless this loop fell far behind (then restart from now).
            now = self.sim_now()
            if now - end < lag:
                t = end
            else:
                t = now
                busy.restarts += 1
        busy.real_s = self._loop.time() - busy.real_s
        if self.on_idle is not None:
            self.on_idle(busy)
