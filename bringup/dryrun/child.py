"""A persistent child process that answers JSON requests over a pipe, one line each.

The engine is imported once (tens of seconds cold) and then answers each candidate in well under
a second. The child runs in its own session (its own process group) and reads its requests from
stdin: when bringup dies, stdin reaches EOF and the child exits with it; ``close`` kills its
group and waits. Anything that goes wrong (it does not start, it dies, it does not answer in
time) is a reason, never an exception for the run.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from typing import Any, ClassVar


class Child:
    live: ClassVar[list[Child]] = []

    def __init__(self, argv: list[str], ready_timeout: float = 300.0, env: dict[str, str] | None = None):
        self.argv = argv
        self.ready_timeout = ready_timeout
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.hello: dict[str, Any] | None = None
        self.error: str | None = None
        self.started_s: float | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="bringup-dryrun-", suffix=".log", delete=False)
        self._next = 0

    @property
    def log_path(self) -> str:
        return self._log.name

    def start(self) -> None:
        """Spawn it (non-blocking); ``ready`` waits for its hello line."""
        if self.proc is not None or self.error:
            return
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
                start_new_session=True,
                env={**os.environ, **(self.env or {})},
            )
        except OSError as e:
            self.error = f"cannot start {self.argv[0]}: {e}"
            return
        self.started_s = time.time()
        Child.live.append(self)

    def ready(self) -> bool:
        """Its hello line arrived and said ready (waits for it the first time)."""
        if self.hello is None and self.error is None:
            self.start()
            line = self._readline(self.ready_timeout)
            if line is None:
                self.error = (
                    self.error or f"no answer within {self.ready_timeout:.0f} s (log: {self.log_path})"
                )
                self.close()
                return False
            try:
                self.hello = json.loads(line)
            except ValueError:
                self.error = f"unreadable hello {line[:200]!r} (log: {self.log_path})"
                self.close()
                return False
            if not self.hello.get("ready"):
                self.error = str(self.hello.get("error") or "not ready")
                self.close()
        return self.error is None and bool(self.hello and self.hello.get("ready"))

    def ask(self, request: dict[str, Any], timeout: float = 120.0) -> dict[str, Any] | None:
        """One answer, or None (``error`` says why)."""
        if not self.ready() or self.proc is None or self.proc.stdin is None:
            return None
        self._next += 1
        request = {**request, "id": self._next}
        try:
            self.proc.stdin.write(json.dumps(request, default=str) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self.error = f"the child went away: {e} (log: {self.log_path})"
            self.close()
            return None
        line = self._readline(timeout)
        if line is None:
            self.error = self.error or f"no answer within {timeout:.0f} s (log: {self.log_path})"
            self.close()
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def _readline(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.time() + timeout
        while time.time() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], min(1.0, max(0.0, deadline - time.time())))
            if r:
                line = self.proc.stdout.readline()
                if not line:
                    self.error = (
                        f"the child exited ({self.proc.poll()}); log: {self.log_path}: {self._tail()}"
                    )
                    return None
                return line
            if self.proc.poll() is not None:
                self.error = (
                    f"the child exited ({self.proc.returncode}); log: {self.log_path}: {self._tail()}"
                )
                return None
        return None

    def _tail(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return " | ".join(f.read()[-600:].splitlines()[-3:])
        except OSError:
            return ""

    def close(self) -> None:
        """Kill its process group and wait for it."""
        p, self.proc = self.proc, None
        if p is None:
            return
        if self in Child.live:
            Child.live.remove(self)
        try:
            if p.stdin:
                p.stdin.close()
        except OSError:
            pass
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=5)
            except (ProcessLookupError, PermissionError):
                pass
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        if p.stdout:
            p.stdout.close()
