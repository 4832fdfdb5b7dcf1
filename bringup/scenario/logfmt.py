"""The simulated clock and the log writer.

Time in a scenario is simulated: each phase lasts its scenario seconds, and the server sleeps
that × --time-scale for real. Log timestamps follow the simulated clock (a 600 s weight load
shows ten minutes between `Load weight begin` and `Load weight end`), and `[scenario-clock]
t=<seconds>` lines report it so benchmarks can count what a launch would have cost.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

CLOCK_PREFIX = "[scenario-clock]"
CLOCK_RE = re.compile(r"\[scenario-clock\] t=([0-9]+(?:\.[0-9]+)?)")


def parse_clock(line: str) -> float | None:
    """Simulated seconds from a `[scenario-clock] t=...` line, else None."""
    m = CLOCK_RE.search(line)
    return float(m.group(1)) if m else None


class SimClock:
    """Simulated seconds since start. Phases add their duration; a request that starts at t0 and
    lasts d moves the clock to max(t, t0 + d), so concurrent requests overlap as a batch would."""

    def __init__(self, scale: float, wall0: float | None = None):
        self.scale = scale
        self.wall0 = time.time() if wall0 is None else wall0
        self.t = 0.0

    async def advance(self, seconds: float) -> None:
        if seconds > 0:
            await asyncio.sleep(seconds * self.scale)
            self.t += seconds

    async def sleep_for_request(self, seconds: float) -> None:
        """Real sleep for part of a request; the clock moves when the request ends (`finish`)."""
        if seconds > 0:
            await asyncio.sleep(seconds * self.scale)

    def finish(self, started_at: float, seconds: float) -> None:
        self.t = max(self.t, started_at + seconds)

    def now(self) -> _dt.datetime:
        return _dt.datetime.fromtimestamp(self.wall0 + self.t)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(\|upper|\|lower)?\}")


def _text(v: Any) -> str:
    return repr(v) if isinstance(v, (list, tuple, dict)) else str(v)


class LogWriter:
    """Writes engine-shaped log lines to one stream (stdout), one flush per line, so the trial
    runner sees them as they happen and in order."""

    def __init__(self, engine: str, clock: SimClock, stream: TextIO | None = None, pid: int | None = None):
        self.engine = engine
        self.clock = clock
        self.stream = stream or sys.stdout
        self.pid = pid or os.getpid()  # the API server / launcher process
        # Real engines run several processes, each tagged with its own pid: vLLM's
        # `(APIServer pid=N)`, `(EngineCore_DP0 pid=M)`, `(Worker_TP1 pid=K)`; SGLang's `[TP1]`.
        # The double is one process and gives each imitated process a stable pid of its own.
        self.core_pid = self.pid + 97
        self.worker_pid0 = self.pid + 131

    def worker_pid(self, rank: int) -> int:
        return self.worker_pid0 + rank

    # -- timestamps and prefixes as each engine prints them -----------------------------------
    def ts(self) -> str:
        now = self.clock.now()
        return (
            now.strftime("%Y-%m-%d %H:%M:%S") if self.engine == "sglang" else now.strftime("%m-%d %H:%M:%S")
        )

    def write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads the log any more; keep serving or dying quietly

    def sg(self, msg: str, tp: int | None = None) -> None:
        """SGLang: `[2026-11-29 13:22:01] msg` or `[2026-11-29 13:22:01 TP0] msg`."""
        tag = f" TP{tp}" if tp is not None else ""
        self.write(f"[{self.ts()}{tag}] {msg}")

    def vl(self, msg: str, src: str, proc: str = "EngineCore_DP0", level: str = "INFO") -> None:
        """vLLM: `(EngineCore_DP0 pid=N) INFO 11-29 13:22:01 [core.py:133] msg`."""
        self.write(f"({proc} pid={self.pid_of(proc)}) {level} {self.ts()} [{src}] {msg}")

    def pid_of(self, proc: str) -> int:
        if proc.startswith("EngineCore"):
            return self.core_pid
        if proc.startswith("Worker_TP"):
            return self.worker_pid(int(proc[len("Worker_TP") :] or 0))
        return self.pid

    def uvicorn(self, msg: str) -> None:
        """Uvicorn's own lines, inside each engine's prefix."""
        if self.engine == "sglang":
            self.write(f"[{self.ts()}] INFO:     {msg}")
        else:
            self.write(f"(APIServer pid={self.pid}) INFO:     {msg}")

    def clock_line(self, event: str) -> None:
        self.write(f"{CLOCK_PREFIX} t={self.clock.t:.3f} event={event}")

    # -- scenario-authored lines --------------------------------------------------------------
    def render(self, template: str, values: Mapping[str, Any]) -> str:
        """Fill {name} placeholders: {ts}, {pid}, and the effective config by dest name, optionally
        {name|upper} or {name|lower}; any other brace text (Python reprs in error messages) is
        left as written."""
        extra = {
            "ts": self.ts(),
            "pid": self.pid if self.engine == "sglang" else self.core_pid,
            "api_pid": self.pid,
            "core_pid": self.core_pid,
            "worker_pid": self.worker_pid0,
        }

        def sub(m: re.Match[str]) -> str:
            k, filt = m.group(1), m.group(2)
            if k in extra:
                text = str(extra[k])
            elif k in values:
                text = _text(values[k])
            else:
                return m.group(0)
            return text.upper() if filt == "|upper" else text.lower() if filt == "|lower" else text

        return _PLACEHOLDER.sub(sub, template)

    def lines(self, templates: list[str], values: Mapping[str, Any]) -> None:
        for t in templates:
            for line in self.render(t, values).split("\n"):
                self.write(line)


async def hang_forever(log: LogWriter, repeat: Any, values: Mapping[str, Any]) -> None:
    """Never return; with a `repeat` (schema.Repeat), print its lines every `repeat.every`
    simulated seconds, as a hung engine's watchdog does (vLLM shm_broadcast.py's warning)."""
    if repeat is None:
        await asyncio.Event().wait()
        return
    while True:
        await log.clock.advance(repeat.every)
        log.lines(repeat.lines, values)
