"""How fast can the load generator push requests? bringup bench next to vllm bench serve.

A fake OpenAI server that answers at once (tests/fake_openai_server.py: uvloop, no delays,
OUTPUT_LEN streamed tokens per request) runs pinned to CPU 1; each load generator runs in its
own process pinned to CPU 0. Two measurements per tool:

- closed loop: N requests always in flight (bringup --concurrency N; vllm bench serve
  --request-rate inf --max-concurrency N); the achieved requests/s is the most this client
  can drive on one core, and the client's CPU time per request is its overhead.
- open loop: a Poisson rate R is offered; "kept" when the achieved rate is within 5% of R.

The server's CPU use is shown too: near 100% means the server, not the client, was the limit.

Run: .venv/bin/python benchmarks/loadgen_overhead.py            (about 3 minutes)
     .venv/bin/python benchmarks/loadgen_overhead.py --concurrencies '' --rates 3000,4000  (some points)
     .venv/bin/python benchmarks/loadgen_overhead.py --quick    (fewer points)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAKE = ROOT / "tests" / "fake_openai_server.py"
INPUT_LEN = 8
OUTPUT_LEN = int(os.environ.get("LG_OUTPUT_LEN", "4"))  # streamed tokens per request
CLIENT_CPU, SERVER_CPU = 0, 1


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# ---- workers: one measurement each, in a fresh process pinned to CLIENT_CPU ----------------------


def worker_bringup(url: str, n: int, concurrency: int | None, rate: float | None) -> dict[str, float]:
    from bringup.loadgen import BenchConfig, prepare, run_bench
    from bringup.loadgen.runner import run_loop

    cfg = BenchConfig(
        url=url,
        model="fake-model",
        tokenizer="words",
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        num_prompts=n,
        concurrency=concurrency,
        request_rate=rate,
        warmup=min(concurrency or 8, 32),
    )

    async def go() -> tuple[Any, float, float]:
        _, prompts, _ = await prepare(cfg)
        c0, t0 = time.process_time(), time.perf_counter()  # the benchmark phase only
        res = await run_bench(cfg, prompts=prompts)
        return res.summary, time.process_time() - c0, time.perf_counter() - t0

    s, cpu, wall = run_loop(go())
    return {
        "req_s": s.request_throughput,
        "failed": s.failed,
        "cpu_s": cpu,
        "wall_s": wall,
        "ttft_p50_ms": s.ttft_ms.p50 or 0.0,
    }


def worker_vllm(url: str, n: int, concurrency: int | None, rate: float | None, tok: str) -> dict[str, float]:
    import contextlib
    import io

    import vllm.benchmarks.serve as vs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    vs.add_cli_args(parser)
    argv = [
        "--backend",
        "vllm",
        "--base-url",
        url,
        "--model",
        "fake-model",
        "--tokenizer",
        tok,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(INPUT_LEN),
        "--random-output-len",
        str(OUTPUT_LEN),
        "--num-prompts",
        str(n),
        "--ignore-eos",
        "--disable-tqdm",
        "--num-warmups",
        str(min(concurrency or 8, 32)),
        "--request-rate",
        "inf" if rate is None else str(rate),
    ]
    if concurrency:
        argv += ["--max-concurrency", str(concurrency)]
    args = parser.parse_args(argv)
    phase: dict[str, float] = {}
    inner = vs.benchmark

    async def timed(*a: Any, **kw: Any) -> Any:  # the benchmark phase only, as for bringup
        c0, t0 = time.process_time(), time.perf_counter()
        try:
            return await inner(*a, **kw)
        finally:
            phase.update(cpu_s=time.process_time() - c0, wall_s=time.perf_counter() - t0)

    vs.benchmark = timed
    with contextlib.redirect_stdout(io.StringIO()):
        r = vs.main(args)
    return {
        "req_s": float(r["request_throughput"]),
        "failed": n - int(r["completed"]),
        "cpu_s": phase["cpu_s"],
        "wall_s": phase["wall_s"],
        "ttft_p50_ms": float(r["median_ttft_ms"]),
    }


# ---- orchestration -------------------------------------------------------------------------------


def measure(
    tool: str, url: str, tok: str, server_pid: int, n: int, concurrency: int | None, rate: float | None
) -> dict[str, float]:
    argv = [sys.executable, __file__, "--worker", tool, "--url", url, "--tok", tok, "-n", str(n)]
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if rate:
        argv += ["--rate", str(rate)]
    s0 = _cpu_seconds(server_pid)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(f"{tool} worker failed:\n{p.stderr[-2000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    # server CPU over the worker's whole life (import, warm-up included): an upper bound on load
    out["server_cpu_s"] = _cpu_seconds(server_pid) - s0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=["bringup", "vllm"])
    ap.add_argument("--url")
    ap.add_argument("--tok")
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int)
    ap.add_argument("--rate", type=float)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--concurrencies", help="closed-loop points, comma-separated ('' for none)")
    ap.add_argument("--rates", help="offered Poisson rates, comma-separated ('' for none)")
    a = ap.parse_args()

    if a.worker:
        os.sched_setaffinity(0, {CLIENT_CPU})
        fn = worker_bringup if a.worker == "bringup" else worker_vllm
        extra = (a.tok,) if a.worker == "vllm" else ()
        print(json.dumps(fn(a.url, a.n, a.concurrency, a.rate, *extra)))  # type: ignore[operator]
        return

    from bringup.testmodel.tiny import TestModelSpec, write_test_model

    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two CPUs: one for the server, one for the client")
    tmp = Path(tempfile.mkdtemp(prefix="lg-overhead-"))
    tok = str(write_test_model(tmp / "model", TestModelSpec()))  # vllm bench serve wants a tokenizer
    server = subprocess.Popen(
        [sys.executable, str(FAKE), "--port", "0", "--uvloop", "--no-log", "--no-tokenize"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        os.sched_setaffinity(server.pid, {SERVER_CPU})
        line = server.stdout.readline() if server.stdout else ""
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        concs = [1, 8, 64] if a.quick else [1, 4, 16, 64, 128]
        rates = [500, 1000] if a.quick else [250, 500, 1000, 1500, 2000, 3000, 4000, 6000]
        if a.concurrencies is not None:
            concs = [int(x) for x in a.concurrencies.split(",") if x]
        if a.rates is not None:
            rates = [int(x) for x in a.rates.split(",") if x]
        n = 1000 if a.quick else 2000
        print(
            f"fake server {url} on CPU {SERVER_CPU}; clients on CPU {CLIENT_CPU}; "
            f"{INPUT_LEN} input words, {OUTPUT_LEN} streamed tokens per request, {n} requests per point\n"
        )
        hdr = f"{'mode':<16}{'tool':<10}{'req/s':>9}{'client CPU/req':>16}{'server CPU':>12}{'TTFT p50':>10}{'failed':>8}"
        print(hdr)
        print("-" * len(hdr))
        peaks: dict[str, float] = {}
        for label, conc, rate in [(f"concurrency {c}", c, None) for c in concs] + [
            (f"rate {r}/s", None, float(r)) for r in rates
        ]:
            for tool in ("bringup", "vllm"):
                pts = n if conc else min(n, int(rate * 4))
                m = measure(tool, url, tok, server.pid, pts, conc, rate)
                kept = "" if conc else ("  kept" if m["req_s"] >= 0.95 * rate else "  NOT kept")
                if conc:
                    peaks[tool] = max(peaks.get(tool, 0.0), m["req_s"])
                print(
                    f"{label:<16}{tool:<10}{m['req_s']:>9.0f}{1e3 * m['cpu_s'] / pts:>13.2f} ms"
                    f"{100 * m['server_cpu_s'] / m['wall_s']:>11.0f}%{m['ttft_p50_ms']:>8.2f}ms"
                    f"{int(m['failed']):>8}{kept}",
                    flush=True,
                )
        print(
            "\npeak closed-loop request rate on one client core: "
            + ", ".join(f"{t} {v:.0f} req/s" for t, v in peaks.items())
        )
    finally:
        server.kill()
        server.wait(timeout=10)
        if server.stdout:
            server.stdout.close()


if __name__ == "__main__":
    main()
