"""Hardening on the real vLLM CPU build: an --api-key server works and leaves its key nowhere on
disk or screen, in either flag form (read from the session's shared launches, conftest.py);
kill -9 of bringup at every phase of a launch leaves no process of the trial alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import MEM, VLLM_KEY, bringup, group_alive
from tests.paths import ROOT

pytestmark = pytest.mark.engine


def _engine_core_started(pgid: int) -> bool:
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if os.getpgid(p.pid) == pgid and any(
                "spawn_main" in a or "EngineCore" in a for a in p.info["cmdline"] or []
            ):
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def _log_has(runs: Path, text: str) -> bool:
    return any(text in f.read_text(errors="replace") for f in runs.rglob("server.log"))


# Every phase of a real trial: just launched (the API server parses its arguments), EngineCore
# spawned (spawn_main, loading), and ready (the probes are running).
PHASES = {
    "launched": lambda runs, pgid: True,
    "engine-core": lambda runs, pgid: _engine_core_started(pgid),
    "ready": lambda runs, pgid: _log_has(runs, "Application startup complete"),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_kill9_at_every_phase_leaves_no_process(tiny_model, tmp_path, phase):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BRINGUP_STATE_DIR": str(tmp_path / "state")}
    runs = tmp_path / "runs"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bringup",
            "trial",
            "--engine",
            "vllm",
            "--model",
            str(tiny_model),
            "--runs-dir",
            str(runs),
            "--timeout",
            "600",
            "--",
            "--gpu-memory-utilization",
            MEM,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    pgid = None
    try:
        end = time.monotonic() + 180
        while time.monotonic() < end and pgid is None:
            f = list(runs.rglob("server.pid"))
            pgid = int(f[0].read_text().split()[0]) if f else None
            time.sleep(0.1)
        assert pgid is not None, "the trial never launched"
        end = time.monotonic() + 420  # a shared 2-core machine can take minutes to start vLLM
        while time.monotonic() < end and not PHASES[phase](runs, pgid):
            time.sleep(0.1)
        assert PHASES[phase](runs, pgid), f"never reached {phase}"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        end = time.monotonic() + 15
        while time.monotonic() < end and group_alive(pgid):
            time.sleep(0.2)
        assert group_alive(pgid) == [], f"survivors of group {pgid}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if pgid is not None:  # never leave our own trial behind, even when the test fails
            for pid in group_alive(pgid):
                os.kill(pid, signal.SIGKILL)


def test_api_key_in_either_form_leaves_it_nowhere_trial_and_run(vllm_served, vllm_multifault):
    """Issue 28: `--api-key=KEY` put the key in trials.effective_key (lower-cased) and `trial`
    printed it as an engine override. A server with a key works, and the key is nowhere, on screen
    or on disk (any case): `trial` with `--api-key KEY` (the session's served trial, conftest.py),
    `run` with `--api-key=KEY` (the session's multi-fault run: five launches, four of them failing
    at different stages, each with the key on its command line). The scenario engine checks every
    form on both commands: tests/guard/test_secrets.py."""
    o = vllm_served["outcome"]
    assert vllm_served["rc"] == 0 and o["status"] == "works", (o or {}).get("evidence")
    assert any(p.name == "server.log" for p in vllm_served["runs"].rglob("*"))
    assert not any(x["flag"] == "--api-key" for x in o["overrides"])  # never compared with the log
    d = vllm_multifault
    assert d["_rc"] == 0 and d["validated"], d["_stderr"][-2000:]
    assert len(d["attempts"]) >= 2  # failed launches and the working one, all with the key
    low = VLLM_KEY.lower().encode()
    assert (Path(d["_runs"]) / "journal.sqlite").is_file()  # trials.effective_key is read too
    for runs in (vllm_served["runs"], Path(d["_runs"])):
        for p in runs.rglob("*"):
            if p.is_file():
                assert low not in p.read_bytes().lower(), p
    texts = [vllm_served["stdout"], vllm_served["stderr"], d["_stdout"], d["_stderr"]]
    assert all(VLLM_KEY.lower() not in t.lower() for t in texts)


def test_a_key_from_the_environment_is_sent_by_the_probes_and_written_nowhere(tiny_model, tmp_path):
    """Issue 40, item 2: VLLM_API_KEY in the user's shell (vLLM's documented variable, never part of
    a candidate) makes the server require it; the probes read it where vLLM does and send it, so the
    trial works (before: failing in `ready` with HTTP 401), and the key reaches no file or screen."""
    key = "sk-VllmFromTheShellZq81Secret"
    where = ["--model", str(tiny_model), "--runs-dir", str(tmp_path), "--timeout", "600"]
    args = ["trial", "--engine", "vllm", *where, "--json", "--", "--gpu-memory-utilization", MEM]
    rc, o, out, err = bringup(*args, env={"VLLM_API_KEY": key})
    assert rc == 0 and o["status"] == "works", (o or {}).get("evidence") or err[-2000:]
    assert not any("401" in p["detail"] for p in o["probes"])
    for p in tmp_path.rglob("*"):
        if p.is_file():
            assert key.lower().encode() not in p.read_bytes().lower(), p
    assert key.lower() not in (out + err).lower()
