"""Driving a scenario server from Python (tests, demos): launch, read the log, tear down.

The server runs as `python -m bringup.scenario serve ...` from an argv list in its own process
group; its merged stdout/stderr is collected line by line by a reader thread. Leaving the
context manager kills the process group and waits for it, so nothing is left behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from bringup.scenario.logfmt import parse_clock


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScenarioProcess:
    def __init__(self, scenario: str | Path, flags: list[str], time_scale: float = 0.002,
                 env: dict[str, str] | None = None, port: int | None = None, host: str = "127.0.0.1",
                 add_host_port: bool = True):
        self.port = port or free_port()
        self.host = host
        net = ["--host", host, "--port", str(self.port)] if add_host_port else []
        self.argv = [sys.executable, "-m", "bringup.scenario", "serve", "--scenario", str(scenario),
                     "--time-scale", repr(float(time_scale)), "--", *flags, *net]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None
        self.started_at = 0.0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def start(self) -> ScenarioProcess:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     bufsize=1, start_new_session=True, env=self.env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float = 30.0) -> str:
        """The first log line matching `pattern` (a regex); raises TimeoutError with the log tail."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if rx.search(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                exited = self.proc is not None and self.proc.poll() is not None and not (
                    self._reader and self._reader.is_alive())
                if left <= 0 or exited:
                    tail = "\n".join(self.lines[-30:])
                    raise TimeoutError(f"no line matching {pattern!r} (exited: {exited}); log tail:\n{tail}")
                self._cond.wait(min(left, 0.1))

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(5)
        return rc

    def clock(self) -> float | None:
        """The last simulated time the server reported."""
        values = [v for v in (parse_clock(ln) for ln in list(self.lines)) if v is not None]
        return values[-1] if values else None

    def stop(self) -> None:
        """Kill the whole process group (SIGTERM, then SIGKILL) and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:
            try:  # the leader is gone; make sure no straggler kept the group alive
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._reader is not None:
            self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ScenarioProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
