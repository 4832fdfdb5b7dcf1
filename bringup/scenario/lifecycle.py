"""The start-up walk: the phases a real engine goes through, in its order, with its log lines.

SGLang: config -> distributed init -> load weights -> KV cache -> kernel warm-up -> CUDA graphs -> capacity line ->
HTTP server -> its own warm-up request -> "fired up and ready". vLLM: API server header ->
engine config -> distributed init (NCCL, custom all-reduce) -> load weights -> KV cache ->
kernel warm-up -> CUDA graphs -> warm-up -> "init engine took" ->
HTTP server -> ready. A `fail` rule prints its lines part-way through its phase and exits; a
`hang` rule stops there (printing its `repeat` lines, if any, forever). A `graph-capture` failure with CUDA graphs off strikes at warmup (the
same kernel then first runs in the warm-up forward pass).
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable, Iterator

from bringup.scenario.config import ScenarioConfig, template_values
from bringup.scenario.enginelog import Dialect, dialect_for
from bringup.scenario.logfmt import LogWriter, SimClock, hang_forever
from bringup.scenario.runtime import SERVING_PHASES, Runtime, terminate
from bringup.scenario.schema import Fail, Hang, Scenario, ScenarioRule
from bringup.scenario.sizing import compute_sizing

PROGRESS_STEPS = 8  # progress lines per long phase, so a watcher sees steady progress
FAIL_AT = 0.35  # how far into its phase a failure strikes


class _Server:
    """uvicorn.Server without its own signal handling: this process handles SIGTERM/SIGINT itself."""

    @staticmethod
    def make(app, sock: socket.socket):
        import contextlib

        import uvicorn

        class Quiet(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
                yield

            def install_signal_handlers(self) -> None:  # older uvicorn
                pass

        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=1,
        )
        return Quiet(config)


class Startup:
    def __init__(
        self, sc: Scenario, cfg: ScenarioConfig, rule: ScenarioRule | None, clock: SimClock, log: LogWriter
    ):
        self.sc, self.cfg, self.rule, self.clock, self.log = sc, cfg, rule, clock, log
        self.size = compute_sizing(sc, cfg)
        self.d: Dialect = dialect_for(sc, cfg, self.size, log)
        self.values = {**template_values(cfg), **self.size.template_values()}
        action: Fail | Hang | None = None
        if rule is not None:
            action = rule.fail or rule.hang
        self.action = action if action is not None and action.phase not in SERVING_PHASES else None
        self.action_phase = self._phase_of(self.action)
        self.d.failing_phase = self.action_phase

    def _phase_of(self, action: Fail | Hang | None) -> str | None:
        if action is None:
            return None
        if action.phase == "graph-capture" and not self.cfg.cuda_graphs:
            return "warmup"
        return action.phase

    # -- helpers --------------------------------------------------------------------------------
    def warnings_at(self, at: str) -> None:
        for w in self.sc.warnings:
            if w.at == at and w.condition.holds(self.cfg.lookup):
                self.log.lines(w.log, self.values)

    async def _progress(
        self,
        seconds: float,
        upto: float,
        report: Callable[[int, int, float, float], None] | None,
        total_items: int,
    ) -> None:
        """Advance the clock through `upto` of a phase lasting `seconds`, with progress lines."""
        steps = PROGRESS_STEPS if report is not None and seconds >= 1 else 1
        last = 0
        for i in range(1, steps + 1):
            frac = i / steps
            if frac > upto + 1e-9:
                await self.clock.advance(seconds * (upto - (i - 1) / steps))
                return
            await self.clock.advance(seconds / steps)
            done = max(1, int(frac * total_items))
            if report is not None and done > last:  # like tqdm: a line when the count moves
                report(done, total_items, seconds * frac, seconds)
                last = done

    async def _strike(self, phase: str) -> None:
        """The rule's action in this phase: print its lines, then die or hang."""
        assert self.action is not None
        # The time is stamped before the last words: a reader stops the process at its first fatal
        # line, and a stamp after it may never be written (a loaded host). For a hang, it marks when
        # progress stopped: the launch costs that plus the watcher's deadline.
        self.log.clock_line("died" if isinstance(self.action, Fail) else "hung")
        self.log.lines(self.action.lines, self.values)
        if isinstance(self.action, Fail):
            self.d.startup_death(phase)
            code = self.action.exit_code if self.action.exit_code is not None else self.d.exit_code(phase)
            terminate(code)
        # hang: never ready; silent, or repeating its watchdog lines (output, not progress)
        await hang_forever(self.log, self.action.repeat, self.values)

    async def phase(
        self,
        name: str,
        seconds: float,
        begin: Callable[[], None] | None,
        report: Callable[[int, int, float, float], None] | None,
        end: Callable[[float], None] | None,
        items: int = 1,
    ) -> None:
        if begin:
            begin()
        self.warnings_at(name)
        if self.action_phase == name:
            await self._progress(seconds, FAIL_AT, report, items)
            await self._strike(name)
        await self._progress(seconds, 1.0, report, items)
        if end:
            end(seconds)
        self.log.clock_line(name)

    # -- the walk --------------------------------------------------------------------------------
    async def run(self) -> None:
        sc, t, d = self.sc, self.sc.timing, self.d
        frac = self.size.layer_fraction
        d.header()
        self.warnings_at("startup")
        self.log.lines(self.cfg.log_templates, self.values)
        self.warnings_at("config")
        if self.action_phase == "parse-args":
            await self._strike("parse-args")
        d.effective_config()
        await self.phase("start", t.start, d.start_begin, None, lambda s: d.start_end())
        await self.phase("distributed-init", t.distributed_init, d.dist_begin, None, lambda s: d.dist_end())
        load_s = (
            (t.load_weights_dummy if t.load_weights_dummy is not None else t.load_weights * 0.05)
            if self.cfg.dummy_weights
            else t.load_weights
        )
        shards = max(1, int(sc.model.weights_gib // 5 * frac) or 1)
        await self.phase("load-weights", load_s * frac, d.load_begin, d.load_progress, d.load_end, shards)
        await self.phase("kv-alloc", t.kv_alloc * frac, None, None, lambda s: d.kv_lines())
        await self.phase("kernel-warmup", t.kernel_warmup, d.kernel_warmup_begin, None, None)
        init_s = t.kv_alloc * frac + t.kernel_warmup
        if self.cfg.cuda_graphs:
            await self.phase(
                "graph-capture", t.graph_capture * frac, d.graph_begin, d.graph_progress, d.graph_end, 36
            )
            init_s += t.graph_capture * frac
        if sc.engine == "vllm":
            await self.phase("warmup", t.warmup, None, None, None)
            d.init_done(init_s + t.warmup)
        else:
            d.init_done(init_s)

    async def serve_forever(self, rt: Runtime) -> None:
        from bringup.scenario.http import build_app

        cfg, d = self.cfg, self.d
        sock = _bind(cfg.host, cfg.port)
        if sock is None:
            d.port_in_use()
            self.log.clock_line("died")
            terminate(1)
            return
        d.bound_port = sock.getsockname()[1]
        d.server_starting()
        server = _Server.make(build_app(rt), sock)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()  # re-raise what stopped uvicorn
                terminate(1)
            await asyncio.sleep(0.005)
        d.server_up()
        if self.sc.engine == "sglang":
            await self.phase("warmup", self.sc.timing.warmup, d.warmup_begin, None, lambda s: d.ready())
        rt.ready = True
        self.warnings_at("ready")
        self.log.clock_line("ready")
        await task


def _bind(host: str, port: int) -> socket.socket | None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno in (errno.EADDRINUSE, errno.EACCES):
            return None
        raise
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def run(sc: Scenario, cfg: ScenarioConfig, rule: ScenarioRule | None, time_scale: float) -> None:
    clock = SimClock(time_scale)
    log = LogWriter(sc.engine, clock)
    startup = Startup(sc, cfg, rule, clock, log)
    await startup.run()
    rt = Runtime(sc, cfg, rule, startup.d, log, clock)
    await startup.serve_forever(rt)
