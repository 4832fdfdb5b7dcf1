"""Serving state: pacing generation, and dying while serving the way the engine dies.

A scenario rule can make the engine die on its first request (`first-request`) or after some
output tokens of the first request that gets that far (`decode`). The failure lines go to the
log, the request is answered with HTTP 500 (vLLM: EngineDeadError) or dropped (SGLang: the
scheduler dies and launch_server kills its process tree), and the process exits shortly after.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn

from bringup.scenario.config import ScenarioConfig, template_values
from bringup.scenario.enginelog import Dialect
from bringup.scenario.generate import Generator, Sampling, TokenPlan, count_tokens
from bringup.scenario.logfmt import LogWriter, SimClock, hang_forever
from bringup.scenario.perf import Load, StepModel, perf_model_for
from bringup.scenario.scheduler import EngineLoop, Replica, ScheduledRequest, Step
from bringup.scenario.schema import BATCH_MODES, Fail, Hang, Scenario, ScenarioRule

BATCH_WINDOW_S = 0.1  # inconsistent mode: how long a request waits to see who shares its batch
ERROR_GRACE_S = 0.5  # vLLM: the API server answers 500s this long before it shuts down
DROP_DELAY_S = 0.05  # SGLang: the process tree is killed this soon after the scheduler dies
SERVING_PHASES = ("first-request", "decode")
# Called as each output token is made: its index and the request's plan (the stream reads the
# token, its logprobs, and, at the last one, the finish reason, as the engines send it).
OnToken = Callable[[int, TokenPlan], Awaitable[None]]


def terminate(code: int) -> NoReturn:
    """Leave now: flush the log, then exit with `code`, or die by signal -code (SGLang's SIGKILL)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:
        sig = -code
        if sig != signal.SIGKILL:  # SIGKILL cannot be handled; others may have our handler installed
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(code)


class EngineDead(Exception):
    """The engine died while this request was in flight; `drop` says how the request ends."""

    def __init__(self, drop: bool):
        super().__init__("EngineCore encountered an issue. See stack trace (above) for the root cause.")
        self.drop = drop


@dataclass
class Request:
    prompt: str
    sampling: Sampling
    default_max: int | None
    prompt_tokens: int | None = None  # a token-id prompt's length (None: count the text's tokens)


class Runtime:
    def __init__(
        self,
        sc: Scenario,
        cfg: ScenarioConfig,
        rule: ScenarioRule | None,
        dialect: Dialect,
        log: LogWriter,
        clock: SimClock,
    ):
        self.sc, self.cfg, self.rule, self.dialect, self.log, self.clock = sc, cfg, rule, dialect, log, clock
        self.mode = rule.serve.mode if rule is not None and rule.serve is not None else "ok"
        over = rule.serve.over if rule is not None and rule.serve is not None else None
        self.generator = Generator(self.mode, sc.answers, over)
        self.perf = perf_model_for(sc, cfg)
        self._engine: EngineLoop | None = None  # a `performance:` scenario: the batching engine
        self.fail: Fail | None = (
            rule.fail if rule and rule.fail and rule.fail.phase in SERVING_PHASES else None
        )
        self.hang: Hang | None = (
            rule.hang if rule and rule.hang and rule.hang.phase in SERVING_PHASES else None
        )
        self.ready = False
        self.dead = False
        self.drop = dialect.death_request == "drop"
        self.inflight = 0
        self.requests = 0
        self._peaks: dict[int, int] = {}  # request -> the largest batch it has shared so far

    # -- dying and hanging while serving -----------------------------------------------------
    def _trigger_at(self, action: Fail | Hang | None) -> int | None:
        """Output tokens produced before the action strikes (0: at prefill), or None."""
        if action is None:
            return None
        if action.phase == "first-request":
            return 0
        return action.after_tokens if action.after_tokens is not None else 1

    async def _die(self, started: float, spent: float) -> None:
        fail = self.fail
        assert fail is not None
        if self.dead:
            raise EngineDead(self.drop)
        self.dead = True
        self.clock.finish(started, spent)  # the time this request ran counts up to the crash
        self.drop = (fail.request or self.dialect.death_request) == "drop"
        self.log.clock_line("died")  # stamped before the last words (see lifecycle._strike)
        self.log.lines(fail.lines, template_values(self.cfg))
        self.dialect.serving_death()
        code = fail.exit_code if fail.exit_code is not None else self.dialect.exit_code(fail.phase)
        loop = asyncio.get_running_loop()
        if self.drop:
            loop.call_later(DROP_DELAY_S, terminate, code)
        else:
            loop.call_later(ERROR_GRACE_S, self._shutdown, code)
        raise EngineDead(self.drop)

    def _shutdown(self, code: int) -> None:
        self.dialect.shutdown()
        terminate(code)

    async def _hang(self) -> None:
        if self.hang is not None and (self.hang.lines or self.hang.repeat is not None):
            values = template_values(self.cfg)
            self.log.lines(self.hang.lines, values)
            if self.hang.repeat is not None:  # one watchdog for the engine, not one per request
                self._watchdog = asyncio.ensure_future(hang_forever(self.log, self.hang.repeat, values))
            self.hang = Hang(phase=self.hang.phase, lines=[], after_tokens=self.hang.after_tokens)
        await asyncio.Event().wait()  # never set: the request (and progress) stops here

    async def _check(self, produced: int, started: float, spent: float) -> None:
        if self.dead:  # another request killed the engine: this one goes down with it
            raise EngineDead(self.drop)
        if self.fail is not None and self._trigger_at(self.fail) == produced:
            await self._die(started, spent)
        if self.hang is not None and self._trigger_at(self.hang) == produced:
            await self._hang()

    # -- generating ---------------------------------------------------------------------------
    def engine(self) -> EngineLoop:
        """The batching engine of a `performance:` scenario (made in the server's event loop)."""
        if self._engine is None:
            assert isinstance(self.perf, StepModel)
            self._engine = EngineLoop(
                self.perf,
                self.clock.scale,
                self.clock.t,
                on_step=self._step_log,
                on_idle=lambda busy: self.log.write(busy.line()),
            )
        return self._engine

    def _step_log(self, rep: Replica, step: Step) -> None:
        """SGLang prints a decode line every 40 decode steps (--decode-log-interval)."""
        if step.decode and rep.steps % 40 == 0:
            self.dialect.request_decode(len(rep.decoding), rep.ctx, step.decode / max(step.duration, 1e-9))

    async def _batched(
        self,
        job: ScheduledRequest,
        current: Callable[[], TokenPlan],
        started: float,
        on_token: OnToken | None,
    ) -> None:
        """Hand out the tokens as the engine's steps make them (see scheduler.py)."""
        assert job.changed is not None
        paced = on_token is not None or self.fail is not None or self.hang is not None
        for i in range(job.output_tokens if paced else 0):
            await self._check(i, started, max(job.last_at - started, 0.0))
            while job.emitted <= i:
                job.changed.clear()
                await job.changed.wait()
            if on_token is not None:
                await on_token(i, current())
        while job.emitted < job.output_tokens:  # not paced: one wake-up per step, no per-token work
            job.changed.clear()
            await job.changed.wait()

    def _join_batch(self, rid: int) -> None:
        """Every request in flight has now shared a batch this big (inconsistent mode reads it)."""
        self._peaks[rid] = self.inflight
        for k in self._peaks:
            self._peaks[k] = max(self._peaks[k], self.inflight)

    async def generate(self, req: Request, on_token: OnToken | None = None) -> TokenPlan:
        """Plan the output, then pace it: prefill, then one decode step per token. Raises EngineDead."""
        if self.dead:
            if self.drop:
                await asyncio.Event().wait()
            raise EngineDead(False)
        self.inflight += 1
        self.requests += 1
        rid = self.requests
        self._join_batch(rid)
        started = self.clock.t
        spent = 0.0
        plans: dict[int, TokenPlan] = {}

        def current() -> TokenPlan:
            # Only `inconsistent` output depends on the batch: the largest one this request shared.
            b = self._peaks[rid] if self.mode in BATCH_MODES else 1
            if b not in plans:
                plans[b] = self.generator.plan(
                    req.prompt, req.sampling, batch_size=b, default_max=req.default_max
                )
            return plans[b]

        try:
            if self.mode in BATCH_MODES:
                # Let requests sent together find each other, as a scheduler fills one batch.
                await asyncio.sleep(BATCH_WINDOW_S)
            n_tokens = len(current().tokens)  # the same for any batch: only the words change
            prompt_tokens = req.prompt_tokens or count_tokens(req.prompt)
            self.dialect.request_prefill(prompt_tokens, self.inflight)
            if isinstance(self.perf, StepModel):
                job = self.engine().submit(prompt_tokens, n_tokens)
                started = job.arrival
                try:
                    await self._batched(job, current, started, on_token)
                finally:
                    spent = max(job.last_at - started, 0.0)
                    if not job.done:
                        self.engine().abort(job)  # the client went away, or the request died
                if self.dead:
                    raise EngineDead(self.drop)
                return current()
            await self._check(0, started, spent)
            spent += self.perf.prefill_seconds(Load(self.inflight, prompt_tokens))
            await self.clock.sleep_for_request(spent)
            paced = on_token is not None or self.fail is not None or self.hang is not None
            if not paced:  # one sleep for the whole decode: same time, far fewer wake-ups
                step = self.perf.decode_step_seconds(Load(self.inflight))
                await self.clock.sleep_for_request(step * n_tokens)
                spent += step * n_tokens
            for i in range(n_tokens):
                if paced:
                    if i:
                        await self._check(i, started, spent)
                    step = self.perf.decode_step_seconds(Load(self.inflight))
                    await self.clock.sleep_for_request(step)
                    spent += step
                    if on_token is not None:
                        await on_token(i, current())
                if (i + 1) % 40 == 0:
                    rate = 1.0 / max(self.perf.decode_step_seconds(Load(self.inflight)), 1e-6)
                    self.dialect.request_decode(self.inflight, prompt_tokens + i + 1, rate * self.inflight)
            if self.dead:
                raise EngineDead(self.drop)
            return current()
        finally:
            self.inflight -= 1
            self._peaks.pop(rid, None)
            self.clock.finish(started, spent)
            if not self.dead:
                self.log.clock_line("request")
