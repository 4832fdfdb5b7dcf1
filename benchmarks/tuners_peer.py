"""The engines' own tuners, as a user of each would run them (benchmarks/tuners_side_by_side.py).

- vLLM: `vllm bench sweep serve` over the grid (one server per point, `--num-runs` runs of `vllm
  bench serve` on it, the prefix cache reset between runs). vLLM 0.24.0 (the H200's) has it but no
  --continue-on-error: a point whose server dies ends the sweep, so, as a user would, the point
  is written down as failed and the sweep is resumed (--resume) without it.
- SGLang: its `bench_serving` over the same grid, the loop written here (SGLang has no sweep
  command): one `python -m sglang.launch_server` per point, `--runs` runs, `--flush-cache` before each.

Each measures with its own load generator and keeps every request (vLLM `--save-detailed`,
SGLang `--output-details`), so the pick is made under the same SLO and rule as bringup's
(tuners_decide.py). A server is launched with the argv and environment of bringup's own adapter
(`Engine.launch_argv`, `launch_env`), so the three sides run the very same command for a point.
`Server` is also how the final round launches its configurations.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bringup.core.candidate import Candidate
from bringup.engines.base import Engine
from bringup.trial.process import ServerProcess

HERE = Path(__file__).resolve().parent
VLLM_CLI = HERE / "vllm_cli.py"


@dataclass
class Workload:
    """What every side runs: closed loop at ``concurrency``, ``num_prompts`` requests, lengths
    fixed or uniform in [L(1-r), L(1+r)] (vLLM's random dataset), ignore_eos, one warm-up request."""

    input_len: int
    output_len: int
    range_ratio: float
    num_prompts: int
    concurrency: int
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ServerDied(RuntimeError):
    pass


@contextmanager
def server(
    engine: Engine, cand: Candidate, port: int, log: Path, ready_timeout: float = 900
) -> Iterator[str]:
    """A server for ``cand`` up until the block ends; its URL. Launched and torn down by bringup's
    own `ServerProcess` (its process group, the orphan watchdog, SIGTERM then SIGKILL, the port
    checked free), as a trial is."""
    sp = ServerProcess(engine.launch_argv(cand, "127.0.0.1", port), log, env=engine.launch_env(cand))
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(sp, url + engine.info.ready_paths[0], ready_timeout, log)
        yield url
    finally:
        sp.terminate(grace=30.0, port=port)


def wait_ready(sp: ServerProcess, url: str, timeout: float, log: Path) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if sp.poll() is not None:
            sp.join_reader(2.0)
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise ServerDied(f"exited with {sp.poll()}: {' | '.join(tail)[-400:]}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise ServerDied(f"not ready within {timeout:.0f} s")


# -- vLLM: vllm bench sweep serve -----------------------------------------------------------------
def sweep_params(points: list[dict[str, str | bool]], names: list[str]) -> list[dict[str, Any]]:
    """The grid as `--serve-params` records: named, flags without their dashes (the sweep writes
    ``--max-num-seqs 64``, and ``--no-x`` for a switch set to false)."""
    return [
        {"_benchmark_name": n, **{f.lstrip("-"): v for f, v in p.items()}}
        for n, p in zip(names, points, strict=True)
    ]


def vllm_bench_argv(python: str, url: str, model: str, w: Workload) -> list[str]:
    """`vllm bench serve` on the workload: random prompts, closed loop at the concurrency (all
    requests at once, at most C in flight), every request kept for the goodput."""
    return [
        python, str(VLLM_CLI), "bench", "serve", "--backend", "vllm", "--base-url", url,
        "--endpoint", "/v1/completions", "--model", model, "--tokenizer", model,
        "--dataset-name", "random", "--random-input-len", str(w.input_len),
        "--random-output-len", str(w.output_len), "--random-range-ratio", str(w.range_ratio),
        "--num-prompts", str(w.num_prompts), "--max-concurrency", str(w.concurrency),
        "--request-rate", "inf", "--ignore-eos", "--seed", str(w.seed), "--num-warmups", "1",
        "--save-detailed", "--disable-tqdm", "--metric-percentiles", "50,90,99",
    ]  # fmt: skip


@dataclass
class Peer:
    """An engine's own tuner: where it launches (the engine, the base configuration, the port), its
    runs per launch, and ``pythonpath``: what its benchmark needs beyond the engine, put first on
    PYTHONPATH (vllm bench sweep serve writes its summary with pandas, vLLM's `bench` extra)."""

    engine: Engine
    base: Candidate
    port: int
    runs: int
    ready_timeout: int = 900
    pythonpath: str = ""

    tool = ""

    def run(
        self, points: list[dict[str, str | bool]], names: list[str], w: Workload, out: Path
    ) -> list[PointRun]:
        """Every point launched and measured; one result per point, in order."""
        raise NotImplementedError

    def env(self, cand: Candidate) -> dict[str, str]:
        env = self.engine.launch_env(cand)
        if self.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([self.pythonpath, env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            )
        return env


@dataclass
class PointRun:
    """What a peer measured on one point: its runs' raw results, or why it failed, and its time."""

    name: str
    results: list[dict[str, Any]]
    seconds: float
    failed: str = ""


class VllmSweep(Peer):
    tool = "vllm bench sweep serve"

    def commands(self, w: Workload, params: Path, out: Path, resume: bool) -> list[str]:
        py, url = self.engine.python, f"http://127.0.0.1:{self.port}"
        serve = self.engine.launch_argv(self.base, "127.0.0.1", self.port)
        return [
            py, str(VLLM_CLI), "bench", "sweep", "serve",
            "--serve-cmd", shlex.join(serve),
            "--bench-cmd", shlex.join(vllm_bench_argv(py, url, self.base.model, w)),
            "--after-bench-cmd", shlex.join([py, str(VLLM_CLI), "reset-caches", url]),
            "--serve-params", str(params), "--num-runs", str(self.runs), "--show-stdout",
            "--server-ready-timeout", str(self.ready_timeout), "-o", str(out), "-e", "sweep",
            *(["--resume"] if resume else []),
        ]  # fmt: skip

    def run(
        self, points: list[dict[str, str | bool]], names: list[str], w: Workload, out: Path
    ) -> list[PointRun]:
        """The sweep over every point; a point whose server dies is written down and the sweep
        resumed without it (vLLM 0.24.0 has no --continue-on-error)."""
        out.mkdir(parents=True, exist_ok=True)
        todo = dict(zip(names, points, strict=True))
        failed: dict[str, str] = {}
        # a sweep stopped before (a deadline) goes on from where it was, as --resume does, with the
        # seconds its points took then
        resume = (out / "sweep").exists()
        kept = out / "seconds.json"
        times: dict[str, float] = json.loads(kept.read_text()) if resume and kept.exists() else {}
        while todo:
            params = out / "serve-params.json"
            params.write_text(json.dumps(sweep_params(list(todo.values()), list(todo)), indent=1))
            rc, seen, last = self._once(self.commands(w, params, out, resume), out / "sweep.log", times)
            kept.write_text(json.dumps(times))
            done = {n for n in todo if (out / "sweep" / f"SERVE--{n}" / "summary.json").exists()}
            if done == set(todo):  # (the sweep's own summary.csv after the points needs pandas: vllm[bench])
                break
            stuck = next((n for n in seen if n in todo and n not in done), None) or next(
                n for n in todo if n not in done
            )
            failed[stuck] = last or f"the sweep exited with {rc}"
            todo = {n: p for n, p in todo.items() if n not in done and n != stuck}
            resume = True
        return [self._point(n, out, times.get(n, 0.0), failed.get(n, "")) for n in names]

    def _once(self, argv: list[str], log: Path, times: dict[str, float]) -> tuple[int, list[str], str]:
        """One sweep process; the points it started, in order, each one's seconds from its
        server's start to its end, and the sweep's last error line."""
        env = self.env(self.base)
        seen: list[str] = []
        last, start = "", 0.0
        with log.open("a") as f:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                f.write(line)
                f.flush()
                now = time.monotonic()
                if line.startswith("[BEGIN SERVER]"):
                    start = now
                elif (m := re.search(r"'_benchmark_name': '([^']+)'", line)) and line.startswith(
                    "Server overrides"
                ):
                    seen.append(m.group(1))
                elif line.startswith("[END SERVER]") and seen:
                    times[seen[-1]] = now - start
                elif re.search(r"(Error|Exception|crashed)", line):
                    last = line.strip()[-300:]
            rc = proc.wait()
        if seen and seen[-1] not in times:
            times[seen[-1]] = time.monotonic() - start
        return rc, seen, last

    def _point(self, name: str, out: Path, seconds: float, failed: str) -> PointRun:
        d = out / "sweep" / f"SERVE--{name}"
        results = [json.loads(p.read_text()) for p in sorted(d.glob("run=*.json"))] if d.is_dir() else []
        return PointRun(name, results, seconds, failed if not results else "")


# -- SGLang: bench_serving over the grid ---------------------------------------------------------
def sglang_bench_argv(python: str, port: int, model: str, w: Workload, out: Path) -> list[str]:
    """`python -m sglang.bench_serving` on the workload. Its random lengths are uniform in
    [L x ratio, L] (sglang/benchmark/datasets/common.py compute_random_lens), vLLM's and bringup's
    in [L(1-r), L(1+r)]: the same range is asked as L' = L(1+r), ratio (1-r)/(1+r). `random-ids`
    draws the prompt ids itself (`random` would download ShareGPT: no network on the H200)."""

    def lens(n: int) -> tuple[str, str]:
        if w.range_ratio <= 0:
            return str(n), "1.0"
        return str(int(n * (1 + w.range_ratio))), f"{(1 - w.range_ratio) / (1 + w.range_ratio):.6f}"

    li, ratio = lens(w.input_len)
    lo, _ = lens(w.output_len)
    return [
        python, "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
        "--port", str(port), "--model", model, "--tokenizer", model, "--dataset-name", "random-ids",
        "--random-input-len", li, "--random-output-len", lo, "--random-range-ratio", ratio,
        "--num-prompts", str(w.num_prompts), "--max-concurrency", str(w.concurrency),
        "--request-rate", "inf", "--seed", str(w.seed), "--warmup-requests", "1", "--flush-cache",
        "--output-file", str(out), "--output-details", "--disable-tqdm",
    ]  # fmt: skip


class SglangGrid(Peer):
    tool = "sglang.bench_serving over the grid"

    def run(
        self, points: list[dict[str, str | bool]], names: list[str], w: Workload, out: Path
    ) -> list[PointRun]:
        out.mkdir(parents=True, exist_ok=True)
        return [self._one(n, p, w, out / n) for n, p in zip(names, points, strict=True)]

    def _one(self, name: str, point: dict[str, str | bool], w: Workload, d: Path) -> PointRun:
        d.mkdir(parents=True, exist_ok=True)
        cand = self.base.with_changes(dict(point))
        t0 = time.monotonic()
        results: list[dict[str, Any]] = []
        try:
            with server(self.engine, cand, self.port, d / "server.log", self.ready_timeout):
                for r in range(self.runs):
                    f = d / f"run={r}.jsonl"
                    argv = sglang_bench_argv(self.engine.python, self.port, cand.model, w, f)
                    with (d / "bench.log").open("a") as log:
                        subprocess.run(
                            argv,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            env=self.env(cand),
                            check=False,
                        )
                    if f.exists() and f.read_text().strip():
                        results.append(json.loads(f.read_text().strip().splitlines()[-1]))
        except ServerDied as e:
            return PointRun(name, results, time.monotonic() - t0, str(e))
        return PointRun(
            name, results, time.monotonic() - t0, "" if results else "no run wrote a result (bench.log)"
        )


PEERS: dict[str, Callable[..., Peer]] = {"vllm": VllmSweep, "sglang": SglangGrid}
