"""Real trials, end to end, on the vLLM CPU build (each launch is 30-60 s on 2 cores).

A working launch is the session's `vllm_served` (conftest.py), which the tests here and in
test_reference_engines.py and test_hardening_vllm.py read; the others launch what they test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import MEM, assert_nothing_left, bringup, group_alive
from tests.paths import ROOT

pytestmark = pytest.mark.engine


def _trial(model: Path, runs: Path, *flags: str, extra: tuple[str, ...] = ()):
    rc, data, out, err = bringup(
        "trial",
        "--engine",
        "vllm",
        "--model",
        str(model),
        "--runs-dir",
        str(runs),
        "--json",
        "--timeout",
        "300",
        "--hang-timeout",
        "120",
        *extra,
        "--",
        *flags,
    )
    return rc, data


def _explain(data: dict) -> dict:
    rc, ex, _, _ = bringup("explain", data["log_path"], "--json")
    return ex


def test_a_working_launch_passes_every_probe(vllm_served):
    """The session's served trial (conftest.py: the trained fp16-overflow model in its default
    dtype, FLASH_ATTN asked for, an API key): the whole ladder, known answers and reference
    included, passes on the real engine."""
    rc, o = vllm_served["rc"], vllm_served["outcome"]
    assert rc == 0, o
    assert o["status"] == "works" and o["failure_class"] is None
    names = [p["name"] for p in o["probes"]]
    assert names == [
        "health",
        "completion",
        "chat",
        "known-answers",
        "reference",
        "long-decode",
        "batch",
        "batch-invariance",
        "sampled",
        "sampled-reference",
        "long-prompt",
        "concurrency",
    ]
    probe = {p["name"]: p for p in o["probes"]}
    assert "within top-k/top-p" in probe["sampled"]["detail"] and "same seed" in probe["sampled"]["detail"]
    assert "agree with the reference's first-token distribution" in probe["sampled-reference"]["detail"]
    assert all(p["passed"] for p in o["probes"])
    assert o["timings"]["to_ready"] > 1 and o["timings"]["total"] >= o["timings"]["to_ready"]
    assert o["effective"]["gpu_memory_utilization"] == float(MEM)
    assert o["engine_version"] == "0.32.0"
    assert_nothing_left(Path(o["log_path"]).parent)
    assert _explain(o)["status"] == "works"


def test_flash_attn_on_cpu_works_and_reports_override(vllm_served):
    o = vllm_served["outcome"]
    assert vllm_served["rc"] == 0 and o["status"] == "works"
    ov = {x["flag"]: x for x in o["overrides"]}
    assert ov["--attention-backend"]["requested"] == "FLASH_ATTN"
    assert ov["--attention-backend"]["effective"] == "CPU_ATTN"
    assert (
        "Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU" in ov["--attention-backend"]["evidence"]
    )
    assert o["requested"]["--attention-backend"] == "FLASH_ATTN"


def test_memory_fraction_099_is_oom_before_ready(tiny_model, tmp_path):
    rc, o = _trial(tiny_model, tmp_path, "--gpu-memory-utilization", "0.99")
    assert rc == 1
    assert o["status"] == "fails" and o["failure_class"].startswith("oom-")
    assert o["phase"] in (
        "spawn",
        "parse-args",
        "distributed-init",
        "load-weights",
        "kv-alloc",
        "graph-capture",
        "warmup",
    )
    assert "is less than desired CPU memory utilization" in o["evidence"][0]
    assert not any("Engine core initialization failed" in e for e in o["evidence"])
    assert "--gpu-memory-utilization" in o["hint"]
    assert o["timings"]["to_ready"] is None and o["timings"]["fatal_to_teardown"] < 3
    assert_nothing_left(Path(o["log_path"]).parent)
    ex = _explain(o)
    assert (ex["failure_class"], ex["phase"]) == (o["failure_class"], o["phase"])


def test_a_caught_warning_does_not_end_a_starting_server_and_the_refused_request_is_the_evidence(
    tiny_model, tmp_path
):
    """`--skip-tokenizer-init`: the API server logs "Chat template warmup failed" and a traceback
    ending in "ValueError: Tokenizer not available when `skip_tokenizer_init=True`", every line at
    WARNING, and starts; the first completion is refused (HTTP 400, the same words), a chat request
    then dies on a bare AssertionError. The trial once killed the server at the WARNING traceback
    (fail fast on the generic exception signature), and read the "nanobind: leaked" lines the
    engine prints at exit as the failure. Now: the server starts, the failure is at the first
    request, and the engine's refusal, which names the setting, is the first evidence."""
    rc, o = _trial(tiny_model, tmp_path, "--gpu-memory-utilization", "0.3", "--skip-tokenizer-init")
    assert rc == 1 and o["status"] == "fails", o
    assert o["timings"]["to_ready"] is not None and o["phase"] == "first-request", o
    assert "skip_tokenizer_init" in o["evidence"][0] and "HTTP 400" in o["evidence"][0], o["evidence"]
    assert not any("nanobind" in e for e in o["evidence"]), o["evidence"]
    assert_nothing_left(Path(o["log_path"]).parent)


def test_invalid_choice_is_bad_flag_fast_without_launch(tiny_model, tmp_path):
    rc, o = _trial(tiny_model, tmp_path, "--kv-cache-dtype", "nonsense")
    assert rc == 1 and o["failure_class"] == "bad-flag" and o["phase"] == "parse-args"
    assert o["launched"] is False
    assert "invalid choice: 'nonsense'" in o["evidence"][0]


def test_invalid_choice_rejected_by_the_real_engine(tiny_model, tmp_path):
    """Without bringup's own check the engine's argparse rejects it, before any model load."""
    rc, o = _trial(tiny_model, tmp_path, "--kv-cache-dtype", "nonsense", extra=("--no-validate",))
    assert rc == 1 and o["failure_class"] == "bad-flag" and o["phase"] == "parse-args" and o["launched"]
    assert "api_server.py: error: argument --kv-cache-dtype: invalid choice: 'nonsense'" in o["evidence"][0]
    log = Path(o["log_path"]).read_text()
    assert "Starting to load model" not in log and "Loading weights" not in log
    assert_nothing_left(Path(o["log_path"]).parent)


def test_interrupting_bringup_tears_the_server_down(tiny_model, tmp_path):
    """SIGTERM to bringup while vLLM starts: the server's whole tree goes (SIGINT takes the same
    teardown path; its exit code 130 is tests/cli/test_faults.py::test_signal_exit_codes_follow_convention's
    and tests/trial/test_signals.py's, on the scenario engine)."""
    sig = signal.SIGTERM
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
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
            "--json",
            "--",
            "--gpu-memory-utilization",
            MEM,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        # Wait until the engine has workers (a real process tree), then interrupt bringup.
        deadline = time.monotonic() + 120
        pidfile = None
        while time.monotonic() < deadline:
            found = list(runs.glob("trials/*/server.pid"))
            if found:
                pidfile = found[0]
                log = pidfile.parent / "server.log"
                if log.exists() and "Initializing a V1 LLM engine" in log.read_text():
                    break
            time.sleep(0.2)
        assert pidfile is not None, "the trial never launched"
        pgid = int(pidfile.read_text().split()[0])
        time.sleep(2.0)  # let EngineCore spawn its worker
        assert len(group_alive(pgid)) >= 2
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 128 + sig  # 143
    assert_nothing_left(pidfile.parent)
    assert not (pidfile.parent / "outcome.json").exists() or json.loads(
        (pidfile.parent / "outcome.json").read_text()
    )
