"""Issue 28, row 7: SIGTERM and SIGHUP to `run`, `trial` and `tune` tear the servers down, mark the
run interrupted and exit 143 / 129; with the watchdog and bringup both killed -9 the server's
whole tree dies too (bringup/data/orphanguard: each process waits on a pidfd of its parent).

Before: a run launches its trials from worker threads, where installing a signal handler does
nothing, so SIGTERM killed `bringup run` by the default action (no teardown, no message, the run
left `running`); and a kill -9 of the watchdog then of bringup left EngineCore and its workers.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bringup.trial import watchdog
from tests.conftest import TUNE_SCENARIO, finish, group_alive, tune_args, wait_until
from tests.paths import ROOT
from tests.trial.test_orphans import HOLDER, SERVER

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BRINGUP_STATE_DIR": str(tmp_path / "state")}


def _start(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "bringup", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_env(tmp_path),
        start_new_session=True,
    )


def _server_group(runs: Path) -> int | None:
    pids = list(runs.rglob("server.pid"))
    return int(pids[0].read_text().split()[0]) if pids else None


def _run_status(runs: Path) -> str:
    db = sqlite3.connect(runs / "journal.sqlite")
    try:
        return db.execute("SELECT status FROM runs").fetchone()[0]
    finally:
        db.close()


def _signal_mid_trial(p: subprocess.Popen, runs: Path, sig: signal.Signals) -> tuple[int, str, int]:
    def mid_trial() -> None:
        assert wait_until(lambda: _server_group(runs) is not None, 60), "no trial launched"
        pgid = _server_group(runs)
        assert pgid is not None and wait_until(lambda: bool(group_alive(pgid)), 10)
        os.kill(p.pid, sig)

    err = finish(p, 60, mid_trial)
    return p.returncode, err, _server_group(runs) or 0


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_to_run_mid_trial_tears_down_and_marks_it_interrupted(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    runs = tmp_path / "runs"
    p = _start(tmp_path, "run", "--scenario", str(SEED), "--time-scale", "0.5", "--runs-dir", str(runs))
    rc, err, pgid = _signal_mid_trial(p, runs, sig)
    assert rc == code, err
    assert "interrupted" in err and "Traceback" not in err
    assert not group_alive(pgid)
    assert _run_status(runs) == "interrupted"


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_a_signal_to_trial_tears_its_server_down(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    runs = tmp_path / "runs"
    p = _start(
        tmp_path,
        "trial",
        "--scenario",
        str(SEED),
        "--time-scale",
        "0.5",
        "--runs-dir",
        str(runs),
        "--",
        "--tp",
        "8",
    )
    rc, err, pgid = _signal_mid_trial(p, runs, sig)
    assert rc == code, err
    assert "interrupted" in err and "Traceback" not in err
    assert not group_alive(pgid)


@pytest.mark.slow
def test_sighup_to_tune_tears_down(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    p = _start(tmp_path, *tune_args(runs, scenario=TUNE_SCENARIO))
    rc, err, pgid = _signal_mid_trial(p, runs, signal.SIGHUP)
    assert rc == 129, err
    assert "Traceback" not in err and not group_alive(pgid)


@pytest.mark.slow
def test_a_signal_before_any_launch_exits_with_its_code(tmp_path: Path) -> None:
    """At the very start (the target resolving, nothing launched yet): no traceback either."""
    runs = tmp_path / "runs"
    p = _start(tmp_path, "run", "--scenario", str(SEED), "--time-scale", "0.5", "--runs-dir", str(runs))

    def at_start() -> None:
        assert wait_until(lambda: (runs / "journal.sqlite").exists() or p.poll() is not None, 60)
        os.kill(p.pid, signal.SIGTERM)

    err = finish(p, 60, at_start)
    assert p.returncode == 143, err
    assert "Traceback" not in err


@pytest.mark.slow
def test_kill9_of_the_watchdog_then_of_bringup_leaves_no_worker(tmp_path: Path) -> None:
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(server), str(tmp_path / "server.log")],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        start_new_session=True,
    )
    tag = ""
    try:
        first = holder.stdout.readline().split() if holder.stdout else []
        assert first[:1] == ["pgid"], first
        pgid, tag = int(first[1]), first[3]
        assert wait_until(lambda: len(watchdog.tagged_pids(tag)) >= 3, 30), "the two workers never started"
        log = tmp_path / "server.log"
        # both workers running their loop (SIGTERM ignored), not still unpickling from the leader
        assert wait_until(lambda: log.exists() and log.read_text().count("core") >= 2, 30)
        workers = watchdog.tagged_pids(tag)
        dogs = [c.pid for c in psutil.Process(holder.pid).children() if tag in c.cmdline()]
        assert dogs, "no watchdog found"
        for d in dogs:
            os.kill(d, signal.SIGKILL)
        assert wait_until(
            lambda: not any(psutil.pid_exists(d) and psutil.Process(d).status() != "zombie" for d in dogs), 10
        )
        time.sleep(0.5)
        assert set(watchdog.tagged_pids(tag)) >= set(workers)  # the watchdog's death killed nothing
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=5)
        assert wait_until(lambda: not watchdog.tagged_pids(tag), 15), f"orphans: {watchdog.tagged_pids(tag)}"
        assert wait_until(lambda: not group_alive(pgid), 10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=5)
        for pid in watchdog.tagged_pids(tag) if tag else []:  # what a failure left: ours, by tag
            os.kill(pid, signal.SIGKILL)


def test_the_guard_is_first_on_the_server_pythonpath() -> None:
    from bringup.trial.process import ORPHAN_GUARD, with_orphan_guard

    env = with_orphan_guard({"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ORPHAN_GUARD), "/x"]
    assert (ORPHAN_GUARD / "sitecustomize.py").is_file()
    json.dumps(env)


def test_an_interrupt_in_a_host_process_stops_it_as_ctrl_c_does(monkeypatch):
    """While an in-process trial's handlers are in place, a host's SIGINT is still a
    KeyboardInterrupt to the host (pytest stops the session on it, as on Ctrl-C), carrying the
    shell's exit code; the host's own handlers are back once the scope ends. (Before, `Interrupted`
    was a plain BaseException: pytest counted it as the running test's failure and went on.)"""
    import os

    from bringup.trial import process

    torn: list[bool] = []
    monkeypatch.setattr(process, "teardown_all", lambda: torn.append(True))  # no live server of others
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with pytest.raises(KeyboardInterrupt) as e, process.handling_signals() as installed:
        assert installed
        os.kill(os.getpid(), signal.SIGINT)
    assert isinstance(e.value, process.Interrupted) and e.value.exit_code == 130 and torn
    assert {s: signal.getsignal(s) for s in saved} == saved


def test_a_launch_a_signal_cut_short_is_cancelled_not_failed() -> None:
    """The signal tears the server down from the main thread; the trial's own thread then sees its
    server gone. Its outcome is no failure of the launch's settings (a resumed run would read one),
    and the flag is cleared when bringup's outermost scope closes."""
    from bringup.observe.outcome import Outcome
    from bringup.trial import process
    from bringup.trial.launch import unless_interrupted

    gone = Outcome(status="fails", failure_class="unknown", evidence=["(the server exited)"])
    assert unless_interrupted(gone.model_copy()).status == "fails"
    with process.handling_signals():
        with pytest.raises(process.Interrupted):
            process._on_signal(signal.SIGTERM, None)
        out = unless_interrupted(gone.model_copy())
        assert (out.status, out.failure_class, out.implicates) == ("cancelled", None, [])
        assert unless_interrupted(Outcome(status="works")).status == "works"
    assert not process.interrupted()
