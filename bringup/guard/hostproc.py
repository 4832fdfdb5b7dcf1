"""A library call of bringup leaves the host process as it found it (issue 39).

bringup runs inside other people's processes: a test session, a notebook, a service that calls
`Trial.run`, `Run.execute` or `Tuning` in a loop. What such a call changes for the whole process
outlives it and lands in the host's code: signal handlers (bringup/trial/process.py keeps those in
a scope of their own), environment variables (importing torch for the in-process reference sets
``TORCHINDUCTOR_CACHE_DIR``), the working directory, torch's thread counts, the logging
configuration (Optuna's verbosity, set for a tuning, stayed set), ``sys.stdout`` and
``sys.stderr`` (the Ray executor points stdout at stderr while trials run).

`kept()` snapshots all of these when the outermost bringup call starts and puts back whatever
differs when it returns, however it returns; nested calls (a run's trials, a tuning's points) and
calls from other threads while one is open share the outermost one's snapshot. Loggers that did
not exist before the call (a library imported during it configures its own) are that library's
and stay as it set them. What was put back is said on the debug log (``bringup.guard.hostproc``).

Limits: changes the host itself makes from another thread while a bringup call is open are put
back too (the snapshot cannot tell whose they are); a C extension's own process state is not seen.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_LoggerState = tuple[int, tuple[logging.Handler, ...], bool, bool, tuple[Any, ...]]


@dataclass
class HostState:
    """What one process shares between everything that runs in it, as bringup may touch it."""

    env: dict[str, str]
    cwd: str | None
    stdout: Any
    stderr: Any
    loggers: dict[str, _LoggerState]  # "" is the root logger
    logging_disable: int
    torch_threads: tuple[int, int] | None  # (intra-op, inter-op), when torch is imported


def _logger_state(lg: logging.Logger) -> _LoggerState:
    return (lg.level, tuple(lg.handlers), lg.propagate, lg.disabled, tuple(lg.filters))


def _loggers() -> dict[str, logging.Logger]:
    out = {"": logging.getLogger()}
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            out[name] = lg
    return out


def _torch_threads() -> tuple[int, int] | None:
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    return (torch.get_num_threads(), torch.get_num_interop_threads())


def snapshot() -> HostState:
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the host's folder was removed under it: nothing to go back to
        cwd = None
    return HostState(
        env=dict(os.environ),
        cwd=cwd,
        stdout=sys.stdout,
        stderr=sys.stderr,
        loggers={name: _logger_state(lg) for name, lg in _loggers().items()},
        logging_disable=logging.root.manager.disable,
        torch_threads=_torch_threads(),
    )


def _restore_env(env: dict[str, str]) -> list[str]:
    changed = []
    for name in [n for n in os.environ if n not in env]:
        os.environ.pop(name, None)
        changed.append(f"environment: {name} removed")
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
            changed.append(f"environment: {name} put back")
    return changed


def _restore_logging(s: HostState) -> list[str]:
    changed = []
    now = _loggers()
    for name, state in s.loggers.items():
        lg = now.get(name)
        if lg is None or _logger_state(lg) == state:
            continue
        lg.level, handlers, lg.propagate, lg.disabled, filters = state
        lg.handlers[:] = list(handlers)
        lg.filters[:] = list(filters)
        changed.append(f"logger {name or 'root'} put back")
    if logging.root.manager.disable != s.logging_disable:
        logging.disable(s.logging_disable)
        changed.append("logging.disable put back")
    return changed


def _restore_torch(threads: tuple[int, int] | None) -> list[str]:
    now = _torch_threads()
    if threads is None or now is None or now == threads:
        return []
    import torch

    torch.set_num_threads(threads[0])
    if now[1] != threads[1]:
        with contextlib.suppress(RuntimeError):  # settable once, before any inter-op work
            torch.set_num_interop_threads(threads[1])
    return [f"torch threads put back to {threads[0]}"]


def restore(s: HostState) -> list[str]:
    """Put back what differs from `s`; what was put back, one line each."""
    changed = _restore_env(s.env)
    if s.cwd is not None:
        with contextlib.suppress(OSError):
            if os.getcwd() != s.cwd:
                os.chdir(s.cwd)
                changed.append(f"working directory put back to {s.cwd}")
    for name, was in (("stdout", s.stdout), ("stderr", s.stderr)):
        if getattr(sys, name) is not was:
            setattr(sys, name, was)
            changed.append(f"sys.{name} put back")
    changed += _restore_logging(s)
    changed += _restore_torch(s.torch_threads)
    return changed


_lock = threading.Lock()
_depth = 0
_outer: HostState | None = None


@contextlib.contextmanager
def kept() -> Iterator[None]:
    """The host's process state as it was when the outermost bringup call began, put back when that
    call ends (returned, raised or interrupted)."""
    global _depth, _outer
    with _lock:
        if _depth == 0:
            _outer = snapshot()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            state, last = _outer, _depth == 0
            if last:
                _outer = None
        if last and state is not None:
            for line in restore(state):
                log.debug("a bringup call changed the host process: %s", line)


F = TypeVar("F", bound=Callable[..., Any])


def guest(fn: F) -> F:
    """A library entry point that leaves the host's process state as it found it (`kept`)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with kept():
            return fn(*args, **kwargs)

    return call  # type: ignore[return-value]
