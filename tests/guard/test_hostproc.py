"""Issue 39, item 2: a library call of bringup leaves no process-wide state behind.

One test per kind of state (signal handlers, environment, working directory, torch threads,
logging, sys.stdout/stderr): a bringup call that changes it, and the host finding it as it was.
The real calls that changed state before (a trial's signal handlers, the in-process reference's
TORCHINDUCTOR_CACHE_DIR, a tuning's Optuna verbosity) are run in a fresh interpreter by
tests/trial/test_host_process.py; here each kind is held by the guard itself, fast.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from bringup.guard import hostproc
from bringup.trial import process


@hostproc.guest
def _call(change) -> None:
    change()


def test_environment_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_HOST_KEEPS", "mine")
    monkeypatch.delenv("BRINGUP_HOST_NEW", raising=False)

    def change() -> None:
        os.environ["BRINGUP_HOST_KEEPS"] = "bringup's"
        os.environ["BRINGUP_HOST_NEW"] = "1"

    _call(change)
    assert os.environ["BRINGUP_HOST_KEEPS"] == "mine" and "BRINGUP_HOST_NEW" not in os.environ


def test_working_directory_is_put_back(tmp_path: Path) -> None:
    here = os.getcwd()
    _call(lambda: os.chdir(tmp_path))
    assert os.getcwd() == here


def test_logging_configuration_is_put_back() -> None:
    lg = logging.getLogger("bringup-host-test")
    lg.setLevel(logging.DEBUG)
    root_level, root_handlers = logging.getLogger().level, list(logging.getLogger().handlers)

    def change() -> None:
        lg.setLevel(logging.ERROR)
        lg.addHandler(logging.NullHandler())
        logging.basicConfig(level=logging.CRITICAL, force=True)
        logging.disable(logging.WARNING)

    try:
        _call(change)
        assert lg.level == logging.DEBUG and lg.handlers == []
        assert logging.getLogger().level == root_level and logging.getLogger().handlers == root_handlers
        assert logging.root.manager.disable == logging.NOTSET
    finally:
        logging.disable(logging.NOTSET)


def test_optuna_verbosity_is_put_back_by_the_tuner() -> None:
    """The tuner silences Optuna's per-trial lines while it runs; before, it set the process's
    Optuna verbosity to WARNING for good (a host's own studies lost their INFO lines)."""
    import optuna

    from bringup.tuning.tuner import _optuna_quiet

    optuna.logging.set_verbosity(optuna.logging.DEBUG)
    try:
        with _optuna_quiet():
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG
    finally:
        optuna.logging.set_verbosity(optuna.logging.INFO)


def test_stdout_and_stderr_are_put_back() -> None:
    out, err = sys.stdout, sys.stderr

    def change() -> None:
        sys.stdout, sys.stderr = sys.stderr, sys.stdout  # as the Ray executor points stdout at stderr

    _call(change)
    assert sys.stdout is out and sys.stderr is err


class _Torch:
    """torch's thread settings as the guard sees them (the fast tier does not import torch; the real
    one is checked in a fresh interpreter by tests/trial/test_host_process.py)."""

    def __init__(self) -> None:
        self.threads, self.interop = 4, 2

    def get_num_threads(self) -> int:
        return self.threads

    def set_num_threads(self, n: int) -> None:
        self.threads = n

    def get_num_interop_threads(self) -> int:
        return self.interop

    def set_num_interop_threads(self, n: int) -> None:
        self.interop = n


def test_torch_threads_are_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """As testmodel/train.py sets one thread for training (and puts it back itself)."""
    torch = _Torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    _call(lambda: torch.set_num_threads(1))
    assert torch.get_num_threads() == 4


def test_nested_calls_and_other_threads_share_the_outermost_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's trials run in worker threads inside the run's own call: the state is put back
    once, when the outermost call ends, not under the run's feet when a trial returns."""
    monkeypatch.delenv("BRINGUP_NESTED", raising=False)
    seen: list[str | None] = []

    def inner() -> None:
        os.environ["BRINGUP_NESTED"] = "set by the run"
        t = threading.Thread(target=lambda: _call(lambda: None))  # a trial, off the main thread
        t.start()
        t.join()
        _call(lambda: None)  # a nested call on this thread
        seen.append(os.environ.get("BRINGUP_NESTED"))

    _call(inner)
    assert seen == ["set by the run"] and "BRINGUP_NESTED" not in os.environ


def _host_handler(signum: int, frame: object) -> None:
    _host_handler.got.append(signum)  # type: ignore[attr-defined]


_host_handler.got = []  # type: ignore[attr-defined]


def test_signal_handlers_are_the_hosts_again_after_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: installed by the first trial, bringup's handlers stayed for good, and the host's own
    SIGINT handler never ran again."""
    monkeypatch.setattr(process, "teardown_all", lambda: None)
    old = signal.signal(signal.SIGINT, _host_handler)
    try:
        with process.handling_signals() as installed, process.handling_signals():
            assert installed and signal.getsignal(signal.SIGINT) is process._on_signal
        assert signal.getsignal(signal.SIGINT) is _host_handler
        assert signal.getsignal(signal.SIGTERM) is not process._on_signal
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_signal_during_the_call_runs_the_hosts_handler_after_the_teardown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    monkeypatch.setattr(process, "teardown_all", lambda: order.append("teardown"))

    def host(signum: int, frame: object) -> None:
        order.append("host")

    old = signal.signal(signal.SIGTERM, host)
    try:
        with pytest.raises(process.Interrupted) as e, process.handling_signals():
            os.kill(os.getpid(), signal.SIGTERM)
        assert order == ["teardown", "host"] and e.value.exit_code == 143
        assert signal.getsignal(signal.SIGTERM) is host
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_signal_the_host_ignores_stays_ignored() -> None:
    """`nohup` ignores SIGHUP: bringup must not put a handler over it (a hang-up would stop it)."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with process.handling_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is process._on_signal
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_the_library_entry_points_are_guests() -> None:
    """Every entry point a library user calls keeps the host's state (a new one must be marked)."""
    from bringup.session.run import Run
    from bringup.session.tuning import Tuning
    from bringup.testmodel.tiny import write_preset, write_test_model
    from bringup.trial.launch import Trial
    from bringup.verify.reference import compute_reference, reference_for

    calls = [
        Trial.run,
        Run.execute,
        Tuning.execute,
        Tuning.prepare,
        Tuning.search,
        Tuning.finish,
        compute_reference,
        reference_for,
        write_test_model,
        write_preset,
    ]
    assert [c.__qualname__ for c in calls if not hasattr(c, "__wrapped__")] == []
