"""A silent JIT build is slow, not hung: a compiler busy under the server holds the hang deadline off.

The fake engine below is the trial's `python`: it prints one line, then runs a CPU-bound child
named like a compiler (`ninja`) or not (`sleeper`) for longer than the hang deadline with nothing
in the log, then serves /health. vLLM 0.24.0 does the same on the H200 while FlashInfer's JIT
builds its sampler (../shared/FACTS.md: "init engine ... took 138 s", no line in between).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.trial.jitwatch import JitWatch
from bringup.trial.launch import Trial, TrialSettings
from tests.conftest import assert_nothing_left

FAKE = """#!/bin/bash
port=8000; while [ $# -gt 0 ]; do [ "$1" = --port ] && port=$2; shift; done
echo "INFO fake engine: building kernels"
"{dir}/{child}" {seconds}
mkdir -p "{dir}/www" && echo ok > "{dir}/www/health"
cd "{dir}/www" && exec python3 -m http.server --bind 127.0.0.1 "$port"
"""
BUSY = """#!/bin/bash
end=$((SECONDS + $1)); while [ $SECONDS -lt $end ]; do :; done
"""


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def fake_engine(tmp: Path, child: str, seconds: int) -> Engine:
    executable(tmp / child, BUSY)
    py = executable(tmp / "fakepython", FAKE.format(dir=tmp, child=child, seconds=seconds))
    return Engine("vllm", python=str(py))


def run_trial(tmp: Path, child: str) -> dict:
    eng = fake_engine(tmp, child, seconds=7)
    cand = Candidate.make("vllm", str(tmp / "model"))
    s = TrialSettings(timeout=60, hang_timeout=3.0)
    out = Trial(eng, cand, tmp / "trial", settings=s).run()
    assert_nothing_left(tmp / "trial")
    return out.model_dump()


@pytest.mark.slow
def test_a_busy_compiler_under_a_silent_server_is_not_a_hang(tmp_path):
    d = run_trial(tmp_path, "ninja")
    assert d["failure_class"] != "hang"
    assert d["timings"]["to_ready"] is not None and d["timings"]["to_ready"] > 6
    assert d["timings"]["jit_silent"] >= 3 and d["timings"]["jit_tools"] == ["ninja"]


@pytest.mark.slow
def test_a_busy_process_that_is_no_compiler_still_hangs(tmp_path):
    d = run_trial(tmp_path, "sleeper")
    assert (d["status"], d["failure_class"]) == ("timeout", "hang")
    assert d["timings"]["jit_silent"] is None and d["timings"]["jit_tools"] == []


@pytest.mark.slow
def test_the_watch_names_busy_compilers_only_while_they_burn_cpu(tmp_path):
    ninja = executable(tmp_path / "ninja", BUSY)
    idle = executable(tmp_path / "nvcc", "#!/bin/bash\nsleep 30\n")
    parent = subprocess.Popen(["bash", "-c", f"'{ninja}' 3 & '{idle}' & wait"], start_new_session=True)
    try:
        w = JitWatch(parent.pid)
        time.sleep(0.5)
        assert w.busy() == ["ninja", "nvcc"]  # first look: both are new
        time.sleep(1.0)
        assert w.busy() == ["ninja"]  # nvcc sleeps: no CPU since the last look
        assert w.seen == {"ninja", "nvcc"}
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()
