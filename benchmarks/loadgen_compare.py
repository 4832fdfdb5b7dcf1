"""bringup bench against vllm bench serve on the same vLLM server: the pieces, and the script.

benchmarks/loadgen_vs_vllm.py runs them as a test on the vLLM CPU build (within 10%); this file
also runs them as a script on any machine, the H200's included (issue 38: within 3%), where
pytest is not installed:

    python benchmarks/loadgen_compare.py --model /tmp/m8b --input-len 128 --output-len 64 \
        --concurrency 64 --num-prompts 256 --rounds 4 --tolerance 0.03 --no-wait-quiet --json OUT.json

The tools alternate (bringup first in even rounds), each round on the same server, the same
workload (random prompts, ignore_eos, one warm-up request each) and the same seed; the server's
process group gets half the CPUs and the clients the other half; each tool's median over the
counted rounds is compared: throughputs, TTFT and ITL median and p99, TPOT median.
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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bringup.loadgen import BenchConfig, bench

INPUT_LEN, OUTPUT_LEN, CONCURRENCY = 64, 32, 8
NUM_PROMPTS = int(os.environ.get("LG_NUM_PROMPTS", "200"))
ROUNDS = int(os.environ.get("LG_ROUNDS", "6"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(
    model: Path, port: int, log_path: Path, server_args: list[str], timeout: float = 900
) -> Iterator[str]:
    """vLLM's OpenAI server on ``model`` in its own process group, until the block ends; its URL."""
    from bringup.trial.process import die_with_parent

    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--port", str(port),
             "--host", "127.0.0.1", *server_args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            # killed with its parent even when the parent cannot run this teardown (SIGTERM, SIGKILL)
            preexec_fn=die_with_parent,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    _PIDS[url] = proc.pid
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM not healthy after {timeout:.0f} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url
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
        _PIDS.pop(url, None)


_PIDS: dict[str, int] = {}  # url -> the server's pid (its process group), for split_cores


@dataclass(frozen=True)
class Load:
    """The workload both tools send: random prompts of ``input_len`` tokens, ``output_len`` output
    tokens (ignore_eos), ``concurrency`` in flight, ``num_prompts`` measured after one warm-up."""

    input_len: int = INPUT_LEN
    output_len: int = OUTPUT_LEN
    concurrency: int = CONCURRENCY
    num_prompts: int = NUM_PROMPTS


KEYS = (  # what is compared, as vllm bench serve names it
    "output_throughput",
    "request_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_tpot_ms",
)


def run_bringup(url: str, model: Path, load: Load = Load(), n: int | None = None) -> dict[str, float]:
    n = n or load.num_prompts
    res = bench(
        BenchConfig(
            url=url,
            model=str(model),
            input_len=load.input_len,
            output_len=load.output_len,
            num_prompts=n,
            concurrency=load.concurrency,
            warmup=1,
            seed=0,
        )
    )
    s = res.summary
    assert s.failed == 0 and s.completed == n
    assert all(r.input_tokens == load.input_len and r.output_tokens == load.output_len for r in res.requests)
    return {
        "output_throughput": s.output_throughput,
        "request_throughput": s.request_throughput,
        "median_ttft_ms": s.ttft_ms.p50 or 0.0,
        "p99_ttft_ms": s.ttft_ms.p99 or 0.0,
        "median_itl_ms": s.itl_ms.p50 or 0.0,
        "p99_itl_ms": s.itl_ms.p99 or 0.0,
        "median_tpot_ms": s.tpot_ms.p50 or 0.0,
    }


def run_vllm_bench(url: str, model: Path, load: Load = Load(), n: int | None = None) -> dict[str, float]:
    """vllm bench serve through its module (the `vllm` console script is broken on this build)."""
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    n = n or load.num_prompts
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(
        [
            "--backend",
            "vllm",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            str(model),
            "--tokenizer",
            str(model),
            "--dataset-name",
            "random",
            "--random-input-len",
            str(load.input_len),
            "--random-output-len",
            str(load.output_len),
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(load.concurrency),
            "--ignore-eos",
            "--seed",
            "0",
            "--disable-tqdm",
            "--num-warmups",
            "1",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,99",
        ]
    )  # fmt: skip  (bringup warms up with one request too)
    r = main(args)
    assert r["completed"] == n
    return {k: float(r[k]) for k in KEYS}


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


def streaming(r: dict[str, float]) -> bool:
    """The vLLM CPU server on 2 cores is bistable: tokens stream every ~1.3 ms, or (when its API
    process falls behind) whole answers arrive in one burst, with inter-token gaps near 0 and
    throughput halved, whichever tool is measuring. A median ITL under 0.2 ms marks the burst mode."""
    return r["median_itl_ms"] > 0.2


def compare(
    url: str,
    model: Path,
    rounds: int = ROUNDS,
    max_rounds: int = 12,
    want: int = 4,
    load: Load = Load(),
    quiet_wait: bool = True,
    every: list[tuple[dict, dict]] | None = None,
) -> dict[str, dict[str, float]]:
    """Alternate the two tools (bringup first in even rounds). A round counts when both tools saw
    the server in the same (streaming) mode: comparing a round of one mode with a round of the
    other says nothing about the tools. Medians over the counted rounds; ``every`` gets each round's
    (bringup, vllm) figures, so that a reader sees each tool's own spread beside the ratio."""
    runs: dict[str, list[dict[str, float]]] = {"bringup": [], "vllm": []}
    every = [] if every is None else every
    print(f"\nload average before the rounds: {wait_for_quiet() if quiet_wait else os.getloadavg()[0]:.2f}")
    for k in range(max_rounds):
        order = ("bringup", "vllm") if k % 2 == 0 else ("vllm", "bringup")
        got = {
            tool: (run_bringup if tool == "bringup" else run_vllm_bench)(url, model, load) for tool in order
        }
        every.append((got["bringup"], got["vllm"]))
        if streaming(got["bringup"]) and streaming(got["vllm"]):
            runs["bringup"].append(got["bringup"])
            runs["vllm"].append(got["vllm"])
        if len(runs["bringup"]) >= want and k + 1 >= rounds:
            break
    print(f"load average after the rounds: {os.getloadavg()[0]:.2f}")
    print("rounds (bringup | vllm, out tok/s / median TTFT ms / median ITL ms):")
    for b, v in every:
        mark = "" if streaming(b) and streaming(v) else "   (a burst-mode round: not counted)"
        print(
            f"  {b['output_throughput']:.0f} / {b['median_ttft_ms']:.1f} / {b['median_itl_ms']:.2f} | "
            f"{v['output_throughput']:.0f} / {v['median_ttft_ms']:.1f} / {v['median_itl_ms']:.2f}{mark}"
        )
    assert len(runs["bringup"]) >= 3, "fewer than 3 rounds with both tools in the server's streaming mode"
    med = {tool: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for tool, rs in runs.items()}
    print(f"\n{'metric':<20}{'bringup':>12}{'vllm bench':>12}{'ratio':>8}")
    for key in med["bringup"]:
        b, v = med["bringup"][key], med["vllm"][key]
        print(f"{key:<20}{b:>12.2f}{v:>12.2f}{b / v if v else float('nan'):>8.3f}")
    med["rounds"] = {"counted": len(runs["bringup"]), "all": len(every)}
    return med


def split_cores(server_pid: int) -> set[int]:
    """Give the server (its API process, engine core and worker: our own process group) one set
    of CPUs and the clients the rest, so that neither client's own CPU use slows the server it
    measures. On 2 cores the clients otherwise share a core with vLLM's API process, and the
    heavier client measures a slower server (aiohttp vs httpx showed a 2x difference)."""
    import psutil

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return set(cpus)
    server_cpus, client_cpus = set(cpus[: len(cpus) // 2]), set(cpus[len(cpus) // 2 :])
    for p in [psutil.Process(server_pid), *psutil.Process(server_pid).children(recursive=True)]:
        try:
            p.cpu_affinity(sorted(server_cpus))
        except psutil.Error:
            continue
    return client_cpus


def main(argv: list[str] | None = None) -> int:
    """The comparison as a script, on any model and machine (the H200 step `lgcheck`): starts the
    server, alternates the tools, writes every round and the medians to --json; exit 1 when a
    compared figure is beyond --tolerance."""
    import argparse
    import json
    import shlex

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--server-args", default="", help="more vLLM flags, e.g. '--gpu-memory-utilization 0.3'")
    ap.add_argument("--input-len", type=int, default=INPUT_LEN)
    ap.add_argument("--output-len", type=int, default=OUTPUT_LEN)
    ap.add_argument("--concurrency", type=int, default=CONCURRENCY)
    ap.add_argument("--num-prompts", type=int, default=NUM_PROMPTS)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument(
        "--no-wait-quiet", action="store_true", help="do not wait for a low load average (a GPU machine)"
    )
    ap.add_argument("--log", type=Path, default=Path("lgcheck-vllm.log"))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    load = Load(a.input_len, a.output_len, a.concurrency, a.num_prompts)
    before = os.sched_getaffinity(0)
    with serve(a.model, _free_port(), a.log, shlex.split(a.server_args)) as url:
        os.sched_setaffinity(0, split_cores(_PIDS[url]))
        every: list[tuple[dict, dict]] = []
        try:
            run_bringup(url, a.model, load, n=min(16, a.num_prompts))  # the server settles first
            med = compare(
                url,
                a.model,
                a.rounds,
                max_rounds=2 * a.rounds,
                want=a.rounds,
                load=load,
                quiet_wait=not a.no_wait_quiet,
                every=every,
            )
        finally:
            os.sched_setaffinity(0, before)
    ratios = {k: med["bringup"][k] / med["vllm"][k] for k in KEYS if med["vllm"][k]}
    ok = all(abs(r - 1) <= a.tolerance for r in ratios.values())
    beyond = {k: r for k, r in ratios.items() if abs(r - 1) > a.tolerance}
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "load": load.__dict__,
                    "medians": med,
                    "ratios": ratios,
                    "rounds": [{"bringup": b, "vllm": v} for b, v in every],
                    "tolerance": a.tolerance,
                    "within": ok,
                },
                indent=1,
            )
        )
    print(
        (f"within {a.tolerance:.0%}" if ok else f"beyond {a.tolerance:.0%}")
        + ": "
        + ", ".join(f"{k} {r:.3f}" for k, r in (beyond or ratios).items())
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
