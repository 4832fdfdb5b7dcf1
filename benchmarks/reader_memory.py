"""Issue 28 measure: peak memory of every reader of server or file input on its worst input.

Server readers (probes' stream and JSON answers, the load generator's SSE events, bench's model
list) against an in-process server that answers one line of `--endless-mb` MiB without a newline
(tests/endless_server.py): peak is tracemalloc's (Python allocations while the read ran).
`bringup explain` on `--explain-mb` MiB of distinct 4,000-byte lines: its own process's maximum
resident set size (wait4), interpreter and imports included.

Run:  .venv/bin/python benchmarks/reader_memory.py [--endless-mb 256] [--explain-mb 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import httpx  # noqa: E402
from endless_server import endless_server  # noqa: E402

from bringup.verify.probes import ProbeConfig, ProbeRunner, _post  # noqa: E402

MiB = 1 << 20


def peak(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] / MiB, time.monotonic() - t0
    finally:
        tracemalloc.stop()


def server_readers(limit: int) -> list[tuple[str, str, float, float]]:
    from bringup.loadgen.client import Lanes, RequestRecord, send
    from bringup.loadgen.config import BenchConfig, BenchError
    from bringup.loadgen.runner import _client, resolve_model

    rows = []
    with endless_server(("/v1/completions", "/v1/chat/completions", "/v1/models"), limit) as srv:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        res, mb, s = peak(lambda: ProbeRunner(url, ProbeConfig(list_models=False, model_name="m")).run())
        rows.append(("probes: streamed completion", res[1].detail[:70], mb, s))

        def post() -> str:
            with httpx.Client(base_url=url, timeout=60) as c:
                try:
                    _post(c, "/v1/chat/completions", {})
                except Exception as e:
                    return str(e)
            return "no error"

        msg, mb, s = peak(post)
        rows.append(("probes: JSON answer", msg[:70], mb, s))

        async def one() -> str:
            lanes = Lanes(60)
            try:
                rec = await send(
                    lanes,
                    url + "/v1/completions",
                    b"{}",
                    RequestRecord(index=0),
                    chat=False,
                    t0=0,
                    timeout_s=60,
                )
                return rec.error or "no error"
            finally:
                await lanes.aclose()

        msg, mb, s = peak(lambda: asyncio.run(one()))
        rows.append(("bench/tune: one streamed request", msg[:70], mb, s))

        async def models() -> str:
            cfg = BenchConfig(url=url)
            async with _client(cfg) as c:
                try:
                    await resolve_model(c, cfg)
                except BenchError as e:
                    return str(e)
            return "no error"

        msg, mb, s = peak(lambda: asyncio.run(models()))
        rows.append(("bench/tune: /v1/models", msg[:70], mb, s))
    return rows


def explain_rss(size_mb: int) -> tuple[str, float, float]:
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "long.log"
        with open(log, "w") as f:
            n = size_mb * MiB // 4000
            for i in range(n):
                word = "".join(chr(97 + (i >> (4 * k)) % 16) for k in range(6))
                f.write(f"line {word} " + chr(65 + i % 26) * 3985 + "\n")
        t0 = time.monotonic()
        p = subprocess.Popen(
            [sys.executable, "-m", "bringup", "explain", str(log), "--json"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        _, _, ru = os.wait4(p.pid, 0)
        return f"{n:,} distinct lines", ru.ru_maxrss / 1024, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endless-mb", type=int, default=256)
    ap.add_argument("--explain-mb", type=int, default=1024)
    a = ap.parse_args()
    print(f"{'reader':36} {'peak MB':>8} {'seconds':>8}  outcome")
    for name, what, mb, s in server_readers(a.endless_mb * MiB):
        print(f"{name:36} {mb:8.1f} {s:8.1f}  {what}")
    what, mb, s = explain_rss(a.explain_mb)
    print(f"{'explain (RSS, whole process)':36} {mb:8.1f} {s:8.1f}  {a.explain_mb} MB, {what}")


if __name__ == "__main__":
    main()
