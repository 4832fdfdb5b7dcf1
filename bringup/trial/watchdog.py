"""No orphans, whatever kills bringup and whenever.

The parent-death signal (`process.die_with_parent`) reaches only the server's leader. vLLM's
EngineCore is a `multiprocessing` spawn child of that leader: when bringup is killed with
SIGKILL while EngineCore starts, the leader dies but EngineCore (and its resource tracker)
ignore SIGTERM and run on for minutes. Two mechanisms, each enough alone:

1. A watchdog: a tiny `python -c` process in its own session (so a terminal's Ctrl-C or a
   kill of bringup's group does not reach it) that waits on bringup's pidfd. When bringup dies
   it SIGKILLs the trial's process group, every descendant it saw (followed by parent links while
   bringup lived: a worker may leave the group and overwrite its environment with setproctitle, as
   vLLM's EngineCore does) and every process that carries the trial's tag, then exits; when the trial's
   processes are all gone (normal teardown) it exits by itself.
2. A ledger: each live trial is recorded under `<state>/live/<tag>.json` (bringup's pid, the
   group id). Before any launch, bringup reads the ledger and kills the processes of records
   whose owner is dead, so a resumed run never launches beside leftovers.

Processes are identified by a tag in their environment (`BRINGUP_TRIAL_TAG`, inherited by every
worker, whatever its process group), never by name: only what bringup started is ever killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from bringup.guard import files

TAG_VAR = "BRINGUP_TRIAL_TAG"

# Runs with no imports beyond the standard library and no bringup code: it must start fast and
# keep working when bringup's files change or its interpreter state is gone.
_WATCHDOG = r"""
import os, select, signal, sys, time
parent, pgid, tag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
needle = b"BRINGUP_TRIAL_TAG=" + tag + b"\0"
me = os.getpid()
def tagged():
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    out.append(int(d))
        except OSError:
            pass
    return out
def group_alive():
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
def stat(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        rest = f.read().rsplit(b")", 1)[1].split()
    return int(rest[1]), int(rest[2]), int(rest[19])  # ppid, pgid, start time
known = {}  # pid -> start time: our group and its descendants, seen while bringup lived
def watch():
    # A worker may leave the group (setsid) and overwrite its environment (setproctitle, as
    # vLLM's EngineCore does), so the tree is followed by parent links while bringup lives.
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            ppid, g, start = stat(int(d))
        except (OSError, IndexError, ValueError):
            continue
        if g == pgid or ppid in known:
            known.setdefault(int(d), start)
try:
    fd = os.pidfd_open(parent)
except (OSError, AttributeError):
    fd = None
while True:
    watch()
    if fd is not None:
        dead = bool(select.select([fd], [], [], 0.5)[0])
    else:
        time.sleep(0.5)
        try:
            os.kill(parent, 0)
            dead = False
        except ProcessLookupError:
            dead = True
    if dead:
        try:
            os.killpg(pgid, signal.SIGKILL)  # the group lives on while any member does: still ours
        except OSError:
            pass
        for p, start in known.items():
            try:
                if p != me and stat(p)[2] == start:
                    os.kill(p, signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                pass
        for _ in range(3):
            pids = tagged()
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.2)
        break
    if not group_alive() and not tagged() and not any(os.path.exists(f"/proc/{p}") for p in known):
        break
"""


def new_tag() -> str:
    return uuid.uuid4().hex[:16]


def state_dir() -> Path:
    """Where live trials are recorded: $BRINGUP_STATE_DIR, else $XDG_STATE_HOME/bringup."""
    base = os.environ.get("BRINGUP_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "bringup"
    )
    return Path(base)


def start(pgid: int, tag: str) -> subprocess.Popen[bytes] | None:
    """Start the watchdog for one trial's processes; None if it cannot start (the ledger still holds)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(pgid), tag],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return None


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """After a normal teardown: the watchdog has nothing left to guard."""
    if proc is None:
        return
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(timeout=2)


def tagged_pids(tag: str) -> list[int]:
    """Live processes (of this user) whose environment carries the tag."""
    needle = f"{TAG_VAR}={tag}\0".encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read() + b"\0"
            with open(f"/proc/{d}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                    continue
        except (OSError, IndexError):
            continue
        if needle in env:
            out.append(int(d))
    return out


def record(tag: str, pgid: int) -> Path | None:
    d = state_dir() / "live"
    try:
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{tag}.json"
        files.write_text(p, json.dumps({"tag": tag, "pgid": pgid, "owner": os.getpid()}))
        return p
    except OSError:
        return None


def forget(tag: str) -> None:
    with contextlib.suppress(OSError):
        (state_dir() / "live" / f"{tag}.json").unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def clean_leftovers() -> list[int]:
    """Kill what earlier bringups (now dead) left running; returns the pids killed."""
    d = state_dir() / "live"
    killed: list[int] = []
    if not d.is_dir():
        return killed
    for p in d.glob("*.json"):
        try:
            rec = json.loads(p.read_text())
            tag, owner = str(rec["tag"]), int(rec["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                p.unlink()
            continue
        if _alive(owner) and owner != os.getpid():
            continue  # another bringup's live trial: not ours to touch
        if owner == os.getpid():
            continue
        for pid in tagged_pids(tag):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        with contextlib.suppress(OSError):
            p.unlink()
    return killed
