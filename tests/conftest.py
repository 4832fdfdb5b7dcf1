"""Shared fixtures: tiny models, running the bringup CLI, checking that nothing is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from bringup.testmodel.tiny import TestModelSpec, write_test_model
from bringup.trial.process import port_is_free
from tests.paths import ROOT

# On the CPU build --gpu-memory-utilization is a fraction of host memory; 0.3 fits a 24 GiB box.
MEM = os.environ.get("BRINGUP_TEST_MEM", "0.3")


# -- no state shared between tests (issue 28) ----------------------------------------------------
@pytest.fixture(autouse=True, scope="module")
def _own_home_for_ray(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A Ray test module runs in a HOME of its own: Ray keeps state in ~/.ray (an auth token a
    cluster of one test wrote refused every later one with InvalidAuthToken on a fresh clone)."""
    if "ray" not in request.module.__name__.rsplit(".", 1)[-1]:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(tmp_path_factory.mktemp("ray-home")))
        mp.delenv("RAY_ADDRESS", raising=False)
        yield


@pytest.fixture(autouse=True)
def _own_secrets_and_signals():
    """Each test starts with the secrets registered and the signal handlers this process had
    before it: a command run in-process (CliRunner) registers its secrets. bringup's
    SIGTERM/SIGINT/SIGHUP handlers last only as long as the command or library call that installed
    them (issue 39): one still installed after a test is that test's error."""
    from bringup.guard import secrets
    from bringup.trial import process

    with secrets._lock:
        values, helps = dict(secrets._values), set(secrets._help_flags)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    with secrets._lock:
        secrets._values.clear()
        secrets._values.update(values)
        secrets._help_flags.clear()
        secrets._help_flags.update(helps)
    left = [signal.Signals(s).name for s in handlers if signal.getsignal(s) is process._on_signal]
    for sig, h in handlers.items():
        if h is not None:
            signal.signal(sig, h)
    assert not left, f"bringup's handler for {', '.join(left)} outlived the call that installed it"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return write_test_model(tmp_path_factory.mktemp("models") / "tiny64")


@pytest.fixture(scope="session")
def tiny_model_hd16(tmp_path_factory) -> Path:
    return write_test_model(tmp_path_factory.mktemp("models") / "tiny16", TestModelSpec(head_dim=16))


@pytest.fixture(scope="session")
def known_model(tmp_path_factory) -> Path:
    """The `known` preset: trained on CPU (a minute or more on 2 cores), so trained once a session
    and only read by the tests that use it (tests/testmodel/test_testmodel_presets.py, the real engines')."""
    from bringup.testmodel.tiny import write_preset

    return write_preset(tmp_path_factory.mktemp("models") / "known", "known")


@pytest.fixture(scope="session")
def overflow_model(known_model, tmp_path_factory) -> Path:
    """The `fp16-overflow` preset, made as write_preset makes it (the known model, then its MLPs
    rescaled), from the session's known model instead of a second training."""
    import shutil

    from bringup.testmodel.train import scale_for_fp16_overflow

    out = tmp_path_factory.mktemp("models") / "fp16-overflow"
    shutil.copytree(known_model, out)
    assert scale_for_fp16_overflow(out) >= 8
    return out


# -- real vLLM CPU launches that several tests read (each launch is 30-60 s on 2 cores) ------------
# A key that must be found nowhere, on screen or on disk (tests/guard/test_hardening_vllm.py).
VLLM_KEY = "sk-VllmEitherFormZq81Secret"


@pytest.fixture(scope="session")
def vllm_served(overflow_model, tmp_path_factory) -> dict:
    """One `bringup trial` on the real vLLM CPU build that serves, read by every test that needs
    a working launch and only reads what it left: the fp16-overflow model (trained, with known
    answers) in its default dtype, FLASH_ATTN asked for (CPU_ATTN is what runs: an override), and
    `--api-key KEY` (the probes send it). Returns the trial's outcome and what the command printed."""
    runs = tmp_path_factory.mktemp("vllm-served")
    rc, o, out, err = bringup(
        "trial",
        "--engine",
        "vllm",
        "--model",
        str(overflow_model),
        "--runs-dir",
        str(runs),
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        "--",
        "--gpu-memory-utilization",
        MEM,
        "--attention-backend",
        "FLASH_ATTN",
        "--api-key",
        VLLM_KEY,
    )
    return {"rc": rc, "outcome": o, "stdout": out, "stderr": err, "runs": runs}


@pytest.fixture(scope="session")
def vllm_multifault(tiny_model, tmp_path_factory) -> dict:
    """One `bringup run` on the real vLLM CPU build from a baseline with four mistakes
    (tests/session/test_multifault_vllm.py) and `--api-key=KEY`, which is none: five launches, read by the
    multi-fault tests and the key test. findings.json's fields, and _rc, _stdout, _stderr, _runs."""
    from tests.multifault_util import VLLM_MISTAKES, baseline_of, run_bringup

    runs = tmp_path_factory.mktemp("vllm-multifault")
    return run_bringup(
        "vllm", tiny_model, baseline_of(VLLM_MISTAKES, f"--api-key={VLLM_KEY}"), runs, len(VLLM_MISTAKES) + 1
    )


def bringup(*args: str, timeout: float = 600, check_json: bool = True, env: dict | None = None):
    """Run the bringup CLI as a user would; returns (returncode, parsed JSON or None, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    data = None
    if check_json and "--json" in args:
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            pytest.fail(
                f"not JSON (rc {proc.returncode}):\nstdout={proc.stdout[-2000:]}\nstderr={proc.stderr[-3000:]}"
            )
    return proc.returncode, data, proc.stdout, proc.stderr


TUNE_SCENARIO = ROOT / "bringup" / "data" / "scenarios" / "tune-llama31-70b-fp8-h200-sglang.yaml"


def tune_args(runs: Path, *extra: str, scenario: Path = TUNE_SCENARIO) -> list[str]:
    """`bringup tune --json` on the tuning scenario, small: its two memory knobs from a baseline
    that runs out of memory in graph capture, and a short workload (``extra``: budget, sweep ...)."""
    return [
        "tune",
        "--scenario",
        str(scenario),
        "--config",
        "--mem-fraction-static 0.92 --cuda-graph-max-bs 256",
        "--knobs",
        "mem-fraction-static,cuda-graph-max-bs",
        "--concurrency",
        "16",
        "--num-prompts",
        "24",
        "--input-len",
        "256",
        "--output-len",
        "32",
        "--runs-dir",
        str(runs),
        "--json",
        *extra,
    ]


def group_alive(pgid: int) -> list[int]:
    """Live (non-zombie) processes in a process group."""
    alive = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return alive


def assert_nothing_left(trial_dir: Path) -> None:
    """The server's process group is empty and its port accepts a new bind."""
    pid, port = (trial_dir / "server.pid").read_text().split()
    assert group_alive(int(pid)) == [], f"server group {pid} still has processes"
    assert port_is_free(int(port)), f"port {port} is still held"


def finish(p: subprocess.Popen, timeout: float, before=None) -> str:
    """Run `before` (a signal to send, a wait), then let the process end within `timeout`; its
    stderr. Killed (by pid: ours) if it does not, or if `before` fails."""
    try:
        if before is not None:
            before()
        _, err = p.communicate(timeout=timeout)
        return err or ""
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_until(cond, limit: float) -> bool:
    """Poll `cond` every 0.1 s for up to `limit` seconds; its last answer."""
    import time

    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()
