"""One writer per run: a lock on the run's folder that dies with the process holding it.

Two `bringup run --resume` of one run at once both ran every remaining trial (five trials
recorded twice, issue 28). The lock is `flock` on `<run dir>/.writer.lock`: the kernel drops it
when its holder exits, however it exits (kill -9 included), so a run left `running` by a dead
process is never locked out; the file only tells the next one who holds it. The descriptor is
not inherited by the servers bringup launches (Python's descriptors are close-on-exec), so a
leftover server never keeps a run locked.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from bringup.guard import files

LOCK_NAME = ".writer.lock"


class RunLocked(ValueError):
    """Another live process is writing this run."""


class RunLock:
    def __init__(self, run_dir: Path, run_id: str):
        self.path = Path(run_dir) / LOCK_NAME
        self.run_id = run_id
        self.fd: int | None = None

    def acquire(self) -> RunLock:
        fd = files.open_fd(self.path)  # never through a link planted in a killed run's folder
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunLocked(
                f"run {self.run_id} is in progress: process {holder} is writing it ({self.path}); "
                "wait for it to end or stop it, then resume (two writers would run its trials twice)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None
