"""Driving a scenario server from Python (tests, demos): launch, read the log, tear down.

The server is launched exactly as bringup launches any engine: `bringup.trial.process.ServerProcess`
(an argv list, its own process group, its log streamed line by line), with the argv of
`bringup.scenario.serve_argv`. Leaving the context manager tears the process group down and
waits for it, so nothing is left behind.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from bringup.scenario import serve_argv
from bringup.scenario.logfmt import parse_clock
from bringup.trial.process import ServerProcess, free_port

__all__ = ["ScenarioProcess", "free_port"]


class ScenarioProcess:
    def __init__(
        self,
        scenario: str | Path,
        flags: list[str],
        time_scale: float = 0.002,
        env: dict[str, str] | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        add_host_port: bool = True,
    ):
        self.port = port or free_port()
        self.host = host
        net = ["--host", host, "--port", str(self.port)] if add_host_port else []
        self.argv = serve_argv(scenario, [*flags, *net], time_scale)
        self.env = {**os.environ, **(env or {})}
        self.server: ServerProcess | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="scenario-")
        self.started_at = 0.0

    @property
    def proc(self):  # the leader's Popen, for tests that signal or poll it
        assert self.server is not None, "start() first"
        return self.server.proc

    @property
    def lines(self) -> list[str]:
        return [ln.text for ln in self.server.all_lines] if self.server else []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def start(self) -> ScenarioProcess:
        self.started_at = time.monotonic()
        self.server = ServerProcess(self.argv, Path(self._tmp.name) / "server.log", env=self.env)
        return self

    def _ended(self) -> bool:
        assert self.server is not None
        return self.server.proc.poll() is not None and not self.server.reader_alive()

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        """The first log line matching `pattern` (a regex); raises TimeoutError with the log tail."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            lines = self.lines
            for line in lines[seen:]:
                if rx.search(line):
                    return line
            seen = len(lines)
            exited = self._ended()
            if time.monotonic() >= deadline or exited:
                if exited and len(self.lines) > seen:
                    continue  # the last lines arrived with the exit: read them first
                tail = "\n".join(self.lines[-30:])
                raise TimeoutError(f"no line matching {pattern!r} (exited: {exited}); log tail:\n{tail}")
            time.sleep(0.02)

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.server is not None
        rc = self.server.proc.wait(timeout)
        self.server.join_reader(5)
        return rc

    def clock(self) -> float | None:
        """The last simulated time the server reported."""
        values = [v for v in (parse_clock(ln) for ln in self.lines) if v is not None]
        return values[-1] if values else None

    def stop(self) -> None:
        """Tear the whole process group down (SIGTERM, then SIGKILL) and reap it."""
        if self.server is not None:
            self.server.terminate(grace=5.0)
        self._tmp.cleanup()

    def __enter__(self) -> ScenarioProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
