"""Issue 28, row 4: one writer per run. Two `run --resume` of one run at once both ran every
remaining trial (five recorded twice); now the second refuses, and the lock dies with its holder."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bringup.cli import app
from bringup.guard.runlock import RunLock, RunLocked
from tests.paths import ROOT

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"
HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from bringup.guard.runlock import RunLock\n"
    "RunLock(Path(sys.argv[1]), 'x').acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def _holder(run_dir: Path) -> subprocess.Popen:
    """Another process writing the run (it holds the lock as a running `bringup run` does)."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _trials(root: Path) -> int:
    db = sqlite3.connect(root / "journal.sqlite")
    try:
        return db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    finally:
        db.close()


def test_the_lock_refuses_a_second_holder_and_frees_on_release(tmp_path: Path) -> None:
    a = RunLock(tmp_path, "r1").acquire()
    with pytest.raises(RunLocked, match=rf"run r1 is in progress: process {os.getpid()} is writing it"):
        RunLock(tmp_path, "r1").acquire()
    a.release()
    RunLock(tmp_path, "r1").acquire().release()


@pytest.mark.slow
def test_a_second_resume_of_a_run_in_progress_refuses_and_records_nothing(tmp_path: Path) -> None:
    args = ["--runs-dir", str(tmp_path), "--scenario", str(SEED), "--time-scale", "0.002"]
    r = CliRunner().invoke(app, ["run", *args, "--max-launches", "1"])
    assert r.exit_code in (0, 1), r.output
    (run_dir,) = (tmp_path / "runs").iterdir()
    before = _trials(tmp_path)
    holder = _holder(run_dir)
    try:
        r = CliRunner().invoke(app, ["run", "--resume", "--runs-dir", str(tmp_path)])
        assert r.exit_code == 2, r.output
        text = " ".join(r.output.split())
        assert "is in progress" in text and f"process {holder.pid}" in text
        assert _trials(tmp_path) == before  # nothing recorded by the refused writer
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    # the holder died (kill -9): its lock went with it, and a resume goes on
    r = CliRunner().invoke(app, ["run", "--resume", "--runs-dir", str(tmp_path)])
    assert r.exit_code in (0, 1), r.output
    assert "in progress" not in r.output
