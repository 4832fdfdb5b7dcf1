"""Serve one configuration and bench it at several concurrencies (the H200 scripts' bench step).

`bringup run` tears its validated server down; the bench needs one up. This launches the run's
validated candidate (or flags given here) through bringup's own engine adapter, so the argv and
environment are the ones a trial used, waits for the adapter's ready path, runs `bringup bench`
once per concurrency (each with enough prompts to fill it), then tears the process group down and
times how long the GPU takes to give its memory back (NVML). Everything lands in --out:
summary.json, server.log and each bench's own bench.json.

    python3 tests/data/gpu/serve_bench.py --engine vllm --model /tmp/m8b --run-json run.json --out DIR
    python3 tests/data/gpu/serve_bench.py --engine transformers --model /tmp/m8b --flags "--continuous-batching" --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bringup.core.candidate import Candidate, parse_flags
from bringup.engines.base import get_engine


def gpu_used_mib() -> float | None:
    """Memory in use on GPU 0, MiB (None without NVML)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return float(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used) / 2**20
    except Exception:  # noqa: BLE001 - no NVML: no memory figures, the bench still runs
        return None


def candidate(args: argparse.Namespace) -> Candidate:
    """The run's validated candidate, or one made from --flags."""
    if args.run_json:
        run = json.loads(Path(args.run_json).read_text())
        if not run.get("final_candidate"):
            raise SystemExit(f"{args.run_json}: no validated configuration (status {run.get('status')})")
        return Candidate.from_json(run["final_candidate"])
    return Candidate.make(args.engine, args.model, parse_flags(args.flags or ""))


def wait_ready(proc: subprocess.Popen, url: str, timeout: float) -> float | None:
    """Seconds to ready, or None (the server died or the timeout passed)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            return None
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return None


def teardown(proc: subprocess.Popen, idle_mib: float | None) -> dict[str, Any]:
    """SIGTERM the server's group, SIGKILL after 30 s; then the seconds until the GPU is back."""
    t0 = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
    exited = time.monotonic() - t0
    back = None
    if idle_mib is not None:
        while time.monotonic() - t0 < 90:
            used = gpu_used_mib()
            if used is not None and used <= idle_mib + 256:
                back = time.monotonic() - t0
                break
            time.sleep(0.1)
    return {"group_exited_s": round(exited, 2), "gpu_memory_back_s": back and round(back, 2)}


def bench(args: argparse.Namespace, url: str, model: str, conc: int, n: int, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bringup", "bench", "--url", url, "--model", model]
    argv += ["--concurrency", str(conc), "--num-prompts", str(n), "--input-len", str(args.input_len)]
    argv += ["--output-len", str(args.output_len), "--json", "--no-progress", "--out", str(out)]
    argv += [] if args.ignore_eos else ["--no-ignore-eos"]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=args.bench_timeout)
    row: dict[str, Any] = {"concurrency": conc, "num_prompts": n, "rc": p.returncode}
    row["wall_s"] = round(time.monotonic() - t0, 2)
    try:
        row["result"] = json.loads(p.stdout)
    except json.JSONDecodeError:
        row["stdout_tail"], row["stderr_tail"] = p.stdout[-2000:], p.stderr[-2000:]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--run-json", help="`bringup run --json` output: serve its validated candidate")
    ap.add_argument("--flags", help="engine flags, without --run-json")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--port", type=int, default=8321)
    ap.add_argument("--plan", default="1:16,8:64,64:256", help="CONCURRENCY:PROMPTS,...")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--ignore-eos", action="store_true", help="ask for fixed-length outputs")
    ap.add_argument("--ready-timeout", type=float, default=600)
    ap.add_argument("--bench-timeout", type=float, default=300)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    engine = get_engine(args.engine, python=sys.executable)
    cand = candidate(args)
    argv = engine.launch_argv(cand, "127.0.0.1", args.port)
    summary: dict[str, Any] = {"engine": args.engine, "argv": argv, "version": engine.version()}
    idle = gpu_used_mib()
    summary["gpu_idle_mib"] = idle
    log = (args.out / "server.log").open("w")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=engine.launch_env(cand), start_new_session=True
    )
    url = f"http://127.0.0.1:{args.port}"
    try:
        ready = wait_ready(proc, url + engine.info.ready_paths[0], args.ready_timeout)
        summary["ready_s"] = ready and round(ready, 1)
        summary["gpu_serving_mib"] = gpu_used_mib()
        rows = []
        if ready is not None:
            for item in args.plan.split(","):
                conc, n = (int(x) for x in item.split(":"))
                rows.append(bench(args, url, cand.model, conc, n, args.out / f"c{conc}"))
                print(f"c={conc}: rc {rows[-1]['rc']} in {rows[-1]['wall_s']} s", flush=True)
        summary["bench"] = rows
    finally:
        summary["teardown"] = teardown(proc, idle)
        summary["total_s"] = round(time.monotonic() - t0, 1)
        log.close()
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("ready_s", "teardown", "total_s")}))
    return 0 if summary.get("ready_s") is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
