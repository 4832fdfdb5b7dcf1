"""bringup bench against the real vLLM CPU build, next to vllm bench serve on the same server.

Both tools send the same workload (random prompts of 64 tokens, 32 output tokens, ignore_eos,
concurrency 8); their output throughput and median TTFT must agree within 10%. The machine
is small and noisy, so the tools run alternately, several rounds, and medians are compared.
Run: .venv/bin/pytest -m engine tests/test_loadgen_vllm.py -s   (prints the table)
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bringup.loadgen import BenchConfig, bench

pytestmark = pytest.mark.engine

INPUT_LEN, OUTPUT_LEN, CONCURRENCY = 64, 32, 8
NUM_PROMPTS = int(os.environ.get("LG_NUM_PROMPTS", "200"))
ROUNDS = int(os.environ.get("LG_ROUNDS", "6"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from bringup.testmodel import TestModelSpec, write_test_model

    tmp = tmp_path_factory.mktemp("lg-vllm")
    model = write_test_model(tmp / "model", TestModelSpec())
    port = _free_port()
    log_path = tmp / "vllm.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
             "--port", str(port), "--host", "127.0.0.1", "--gpu-memory-utilization", "0.3"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM not healthy after 240 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url, model
    finally:
        # The server has worker processes: end the whole group, politely first.
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        proc.wait(timeout=10)


def run_bringup(url: str, model: Path, n: int = NUM_PROMPTS) -> dict[str, float]:
    res = bench(BenchConfig(url=url, model=str(model), input_len=INPUT_LEN, output_len=OUTPUT_LEN,
                            num_prompts=n, concurrency=CONCURRENCY, warmup=1, seed=0))
    s = res.summary
    assert s.failed == 0 and s.completed == n
    assert all(r.input_tokens == INPUT_LEN and r.output_tokens == OUTPUT_LEN for r in res.requests)
    return {"output_throughput": s.output_throughput, "median_ttft_ms": s.ttft_ms.p50 or 0.0,
            "median_tpot_ms": s.tpot_ms.p50 or 0.0, "median_itl_ms": s.itl_ms.p50 or 0.0,
            "request_throughput": s.request_throughput}


def run_vllm_bench(url: str, model: Path, n: int = NUM_PROMPTS) -> dict[str, float]:
    """vllm bench serve through its module (the `vllm` console script is broken on this build)."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args([
        "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions", "--model", str(model),
        "--tokenizer", str(model), "--dataset-name", "random", "--random-input-len", str(INPUT_LEN),
        "--random-output-len", str(OUTPUT_LEN), "--num-prompts", str(n), "--max-concurrency",
        str(CONCURRENCY), "--ignore-eos", "--seed", "0", "--disable-tqdm",
        "--num-warmups", "1"])  # bringup warms up with one request too
    r = main(args)
    assert r["completed"] == n
    return {k: float(r[k]) for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms",
                                     "median_itl_ms", "request_throughput")}


def wait_for_quiet(limit: float = 0.8, timeout_s: float = 120) -> float:
    """Wait (bounded) until the 1-minute load average is below `limit`; returns it.

    With 2 cores the vLLM CPU server is bimodal: when its API process keeps up, tokens stream
    every ~1.3 ms; when it falls behind (any other busy process will do it), whole answers
    arrive in one burst and throughput halves, whichever tool is measuring. Comparing a round
    of one mode with a round of the other says nothing about the tools."""
    deadline = time.monotonic() + timeout_s
    while (load := os.getloadavg()[0]) > limit and time.monotonic() < deadline:
        time.sleep(5)
    return load


def compare(url: str, model: Path, rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """Alternate the two tools (bringup first in even rounds) and take each tool's medians."""
    runs: dict[str, list[dict[str, float]]] = {"bringup": [], "vllm": []}
    print(f"\nload average before the rounds: {wait_for_quiet():.2f}")
    for k in range(rounds):
        order = ("bringup", "vllm") if k % 2 == 0 else ("vllm", "bringup")
        for tool in order:
            runs[tool].append((run_bringup if tool == "bringup" else run_vllm_bench)(url, model))
    med = {tool: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for tool, rs in runs.items()}
    print(f"load average after the rounds: {os.getloadavg()[0]:.2f}")
    print(f"\n{'metric':<20}{'bringup':>12}{'vllm bench':>12}{'ratio':>8}   per round (bringup | vllm)")
    for key in med["bringup"]:
        b, v = med["bringup"][key], med["vllm"][key]
        rb = " ".join(f"{r[key]:.1f}" for r in runs["bringup"])
        rv = " ".join(f"{r[key]:.1f}" for r in runs["vllm"])
        print(f"{key:<20}{b:>12.1f}{v:>12.1f}{b / v:>8.3f}   {rb} | {rv}")
    return med


def off_engine_cores(url: str) -> set[int]:
    """The CPUs vLLM's worker is not bound to (it pins itself to its OMP cores): the clients run
    there, so neither tool steals the engine's core and slows what it measures."""
    import psutil

    mine = os.sched_getaffinity(0)
    bound: set[int] = set()
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            if p.info["name"] == "VLLM::Worker" or "VLLM::Worker" in " ".join(p.info["cmdline"] or []):
                aff = set(p.cpu_affinity())
                if aff != set(range(os.cpu_count() or 1)):
                    bound |= aff
        except psutil.Error:
            continue
    return (mine - bound) or mine


def test_bringup_agrees_with_vllm_bench_serve(vllm_server: tuple[str, Path]) -> None:
    url, model = vllm_server
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, off_engine_cores(url))
    try:
        run_bringup(url, model, n=16)  # let the server settle before anything is compared
        med = compare(url, model)
    finally:
        os.sched_setaffinity(0, before)
    for key in ("output_throughput", "median_ttft_ms"):
        b, v = med["bringup"][key], med["vllm"][key]
        assert abs(b / v - 1) <= 0.10, f"{key}: bringup {b:.1f} vs vllm bench serve {v:.1f}"
