"""Faults injected into bringup (issue 14's table): each gives a clear answer, loses nothing
recorded, and leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, group_alive

SEED = ROOT / "bringup" / "data" / "scenarios" / "glm5-nvfp4-sm120.yaml"


def _wait(cond, limit: float) -> bool:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_exit_codes_follow_convention(tmp_path, sig, code):
    runs = tmp_path / "runs"
    p = subprocess.Popen([sys.executable, "-m", "bringup", "trial", "--scenario", str(SEED), "--time-scale", "0.5",
                          "--runs-dir", str(runs), "--", "--tp", "8"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "BRINGUP_STATE_DIR": str(tmp_path / "state")}, start_new_session=True)
    try:
        assert _wait(lambda: bool(list(runs.rglob("server.pid"))), 30)
        pgid = int(next(runs.rglob("server.pid")).read_text().split()[0])
        time.sleep(0.5)
        os.kill(p.pid, sig)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == code
    assert "interrupted" in (p.stderr.read() if p.stderr else "")
    assert group_alive(pgid) == []
