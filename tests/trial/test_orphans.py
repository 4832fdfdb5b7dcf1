"""No orphans: kill -9 of bringup at any moment leaves no process of the trial running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from bringup.trial import watchdog
from tests.conftest import group_alive, wait_until
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"

# A server shaped like vLLM's: the leader spawns (multiprocessing, spawn) a worker that ignores
# SIGTERM and would outlive its parent, as EngineCore does; one more worker leaves the group.
SERVER = textwrap.dedent("""
    import multiprocessing as mp, os, signal, sys, time
    def core(setsid):
        if setsid:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("core", os.getpid(), flush=True)
        while True:
            time.sleep(1)
    if __name__ == "__main__":
        ctx = mp.get_context("spawn")
        ctx.Process(target=core, args=(False,)).start()
        ctx.Process(target=core, args=(True,)).start()
        while True:
            time.sleep(1)
""")

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from bringup.trial.process import ServerProcess
    s = ServerProcess([sys.executable, sys.argv[1]], Path(sys.argv[2]))
    print("pgid", s.pgid, "tag", s.tag, flush=True)
    time.sleep(600)
""")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "BRINGUP_STATE_DIR": str(tmp_path / "state")}


def test_kill9_of_bringup_kills_spawned_workers_that_ignore_sigterm(tmp_path):
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(server), str(tmp_path / "server.log")],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
        start_new_session=True,
    )
    try:
        first = holder.stdout.readline().split() if holder.stdout else []
        assert first[:1] == ["pgid"], first
        pgid, tag = int(first[1]), first[3]
        assert wait_until(lambda: len(watchdog.tagged_pids(tag)) >= 3, 30), "the two workers never started"
        workers = watchdog.tagged_pids(tag)
        os.kill(holder.pid, signal.SIGKILL)  # no teardown, no atexit, no handler
        holder.wait(timeout=5)
        assert wait_until(lambda: not watchdog.tagged_pids(tag), 10), f"orphans: {watchdog.tagged_pids(tag)}"
        # The group empties a moment after the tagged workers are gone (the watchdog, last of it,
        # exits once its kills are done): seen leaving one pid behind on a loaded CI host.
        assert wait_until(lambda: not group_alive(pgid), 10), (
            f"survivors in group {pgid}: {group_alive(pgid)}"
        )
        assert not any(
            psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in workers
        )
    finally:
        with pytest.MonkeyPatch.context():
            if holder.poll() is None:
                os.kill(holder.pid, signal.SIGKILL)
                holder.wait(timeout=5)


def test_next_bringup_cleans_leftovers_of_a_dead_one(tmp_path, monkeypatch):
    monkeypatch.setenv("BRINGUP_STATE_DIR", str(tmp_path / "state"))
    tag = watchdog.new_tag()
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={**os.environ, watchdog.TAG_VAR: tag},
        start_new_session=True,
    )
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        assert wait_until(lambda: left.pid in watchdog.tagged_pids(tag), 5)
        rec = watchdog.record(tag, left.pid)
        assert rec is not None
        rec.write_text(rec.read_text().replace(f'"owner": {os.getpid()}', f'"owner": {dead.pid}'))
        # A record of a live owner (this process) is left alone.
        mine = watchdog.new_tag()
        watchdog.record(mine, 1)
        killed = watchdog.clean_leftovers()
        assert killed == [left.pid]
        left.wait(timeout=5)
        assert not rec.exists() and (tmp_path / "state" / "live" / f"{mine}.json").exists()
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()


@pytest.mark.slow
def test_kill9_of_bringup_trial_on_a_scenario_server_leaves_nothing(tmp_path):
    # A slow time scale: the server is still loading weights when bringup dies.
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bringup",
            "trial",
            "--scenario",
            str(SEED),
            "--time-scale",
            "0.5",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--",
            "--tp",
            "8",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=_env(tmp_path),
        start_new_session=True,
    )
    try:
        pidfiles = lambda: list((tmp_path / "runs").rglob("server.pid"))  # noqa: E731
        assert wait_until(lambda: bool(pidfiles()), 30), "the trial never launched"
        pgid = int(pidfiles()[0].read_text().split()[0])
        assert wait_until(lambda: bool(group_alive(pgid)), 10)
        time.sleep(1.0)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        assert wait_until(lambda: not group_alive(pgid), 10), (
            f"survivors in group {pgid}: {group_alive(pgid)}"
        )
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
