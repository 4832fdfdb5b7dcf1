"""Drive the load: warm-up, then closed-loop concurrency or open-loop (Poisson) arrivals,
with an early-stop hook; one `BenchResult` per point, and sweeps over points."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import numpy as np
from pydantic import BaseModel

from bringup.guard.bounded import CapHit, aread_body
from bringup.guard.secrets import auth_headers
from bringup.loadgen.client import Lanes, RequestRecord, build_body, send
from bringup.loadgen.config import SLO, BenchConfig, BenchError
from bringup.loadgen.metrics import BenchSummary, summarize
from bringup.loadgen.workload import Prompt, build_prompts

# A stop hook sees the summary of the requests finished so far. Return True (or a reason
# string) to stop: nothing new is sent, requests in flight are cancelled and recorded as such.
StopFn = Callable[[BenchSummary], "bool | str | None"]
OnRequest = Callable[[RequestRecord], None]
T = TypeVar("T")


class BenchResult(BaseModel):
    """One point of a benchmark. `result["output_throughput"]` reads `summary.flat()`."""

    config: BenchConfig
    model: str
    tokenizer: str
    started_at: str
    warmup_failed: int = 0
    summary: BenchSummary
    requests: list[RequestRecord]

    def row(self) -> dict[str, Any]:
        return self.summary.flat()

    def __getitem__(self, key: str) -> Any:
        return self.summary.flat()[key]


def slo_abort(
    slos: Sequence[SLO], factor: float = 2.0, min_requests: int = 8, max_failure_fraction: float = 0.5
) -> StopFn:
    """A stop hook for a tuner: once `min_requests` have finished, stop if any SLO's aggregate
    statistic already exceeds its target by `factor`, or if more than `max_failure_fraction`
    of the finished requests failed. Such a trial cannot end well; the rest is wasted time."""

    def check(s: BenchSummary) -> str | None:
        finished = s.completed + s.failed
        if finished < min_requests:
            return None
        if finished and s.failed / finished > max_failure_fraction:
            return f"{s.failed} of {finished} requests failed"
        for c in s.slo_checks:
            if c.measured_ms is not None and c.measured_ms > factor * c.target_ms:
                return f"{c.slo} {c.measured_ms:.1f} ms > {factor:g} x target {c.target_ms:g} ms"
        return None

    return check


def arrival_times(n: int, rate: float, burstiness: float, seed: int) -> np.ndarray:
    """Release offsets (s) of `n` requests: gaps from a gamma distribution with mean 1/rate
    (shape = burstiness; 1 = exponential gaps, i.e. a Poisson process). The first goes at 0."""
    if math.isinf(rate):
        return np.zeros(n)
    rng = np.random.default_rng(seed + 1)  # not the prompt generator's stream
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])


def _client(cfg: BenchConfig) -> httpx.AsyncClient:
    """For setup calls only (models, tokenizer); the measured requests go through `Lanes`."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(cfg.request_timeout_s, connect=10.0),
        trust_env=False,
        headers=auth_headers(cfg.api_key),
    )


async def get_bounded(client: httpx.AsyncClient, url: str) -> tuple[int, bytes]:
    """Status and body of a GET, the body read with a cap (bringup/guard/bounded.py)."""
    async with client.stream("GET", url, timeout=10.0) as r:
        return r.status_code, await aread_body(r.aiter_bytes(), f"GET {url}")


async def resolve_model(client: httpx.AsyncClient, cfg: BenchConfig) -> str:
    """Check the server answers, and pick the model (the first listed) when none is given. With
    the model given, /health is asked instead: a server whose /v1/models cannot list what it
    serves (`transformers serve` answers 500 with a traceback in its log) is not made to fail."""
    path = "/health" if cfg.model else "/v1/models"
    try:
        status, raw = await get_bounded(client, f"{cfg.url}{path}")
    except CapHit as e:
        raise BenchError(str(e)) from e
    except httpx.ConnectError as e:
        raise BenchError(f"cannot connect to {cfg.url}: nothing is listening there ({e})") from e
    except httpx.TimeoutException as e:
        raise BenchError(f"{cfg.url} did not answer {path} within 10 s") from e
    except httpx.HTTPError as e:
        raise BenchError(f"cannot reach {cfg.url}: {type(e).__name__}: {e}") from e
    if status == 401:
        raise BenchError(
            f"{cfg.url} answers 401 Unauthorized: it was started with an API key; pass the same key "
            "with --api-key (or VLLM_API_KEY)"
        )
    if cfg.model:
        return cfg.model
    try:
        if status != 200:
            raise ValueError(status)
        return str(json.loads(raw)["data"][0]["id"])
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise BenchError(f"{cfg.url}/v1/models lists no model (HTTP {status}); pass --model") from e


async def prepare(cfg: BenchConfig) -> tuple[str, list[Prompt], str]:
    """Model name, prompts and tokenizer name for `cfg` (shared by every point of a sweep)."""
    async with _client(cfg) as client:
        model = await resolve_model(client, cfg)
        prompts, tok = await build_prompts(cfg, client, model)
    return model, prompts, tok


def _shape(cfg: BenchConfig) -> dict[str, Any]:
    rate = None if cfg.concurrency is not None else (cfg.request_rate or math.inf)
    return {"concurrency": cfg.concurrency, "request_rate": rate, "max_concurrency": cfg.max_concurrency}


async def _run_point(
    cfg: BenchConfig,
    model: str,
    prompts: Sequence[Prompt],
    tokenizer: str,
    *,
    warmup: int,
    stop_when: StopFn | None,
    on_request: OnRequest | None,
) -> BenchResult:
    chat = cfg.endpoint == "chat"
    url = f"{cfg.url}/v1/{'chat/completions' if chat else 'completions'}"
    bodies = [build_body(p, model, cfg.endpoint, cfg.ignore_eos, cfg.extra_body) for p in prompts]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    n = len(prompts)
    lanes = Lanes(cfg.request_timeout_s, auth_headers(cfg.api_key))
    # Freeze the heap as vllm bench serve does: in a big process (the tuner's, or one that has
    # imported torch) a full collection walks millions of objects and stalls the client for
    # 100+ ms mid-run, which shows up as server latency. Unfrozen again at the end.
    gc.collect()
    gc.freeze()
    try:
        # Warm-up: same prompts, same endpoint, not recorded (first requests pay for lazy init,
        # connection setup and cold caches).
        warm_width = max(1, min(warmup, cfg.concurrency or cfg.max_concurrency or warmup))
        warm_sem = asyncio.Semaphore(warm_width)

        async def warm(i: int) -> bool:
            async with warm_sem:
                rec = RequestRecord(index=-1 - i)
                await send(
                    lanes,
                    url,
                    bodies[i % n],
                    rec,
                    chat=chat,
                    t0=time.perf_counter(),
                    timeout_s=cfg.request_timeout_s,
                )
                return rec.ok

        warmup_failed = sum(not ok for ok in await asyncio.gather(*(warm(i) for i in range(warmup))))

        records: list[RequestRecord] = []
        finished: list[RequestRecord] = []
        stop = asyncio.Event()
        stop_reason: list[str] = []
        stopped_at: list[float] = []
        t0 = time.perf_counter()

        async def one(i: int, arrival: float) -> None:
            rec = RequestRecord(
                index=i,
                arrival_at_s=arrival,
                expected_output_tokens=prompts[i].output_len,
                input_tokens=prompts[i].input_tokens,
            )
            records.append(rec)
            try:
                await send(
                    lanes,
                    url,
                    bodies[i],
                    rec,
                    chat=chat,
                    t0=t0,
                    timeout_s=cfg.request_timeout_s,
                    keep_text=cfg.keep_text,
                )
            except asyncio.CancelledError:
                rec.cancelled, rec.ok, rec.error = True, False, "cancelled by early stop"
                raise
            finished.append(rec)
            if on_request is not None:
                on_request(rec)
            if stop_when is not None and not stop.is_set():
                partial = summarize(
                    finished, time.perf_counter() - t0, cfg.slos, cfg.point_label(), **_shape(cfg)
                )
                verdict = stop_when(partial)
                if verdict:
                    stop_reason.append(verdict if isinstance(verdict, str) else "stop_when returned True")
                    stopped_at.append(time.perf_counter())
                    stop.set()

        tasks: list[asyncio.Task[None]] = []
        if cfg.concurrency is not None:
            order = iter(range(n))

            async def worker() -> None:
                for i in order:  # a shared iterator: each prompt goes to exactly one worker
                    if stop.is_set():
                        return
                    await one(i, time.perf_counter() - t0)

            tasks = [asyncio.create_task(worker()) for _ in range(min(cfg.concurrency, n))]
            main: asyncio.Future[Any] = asyncio.gather(*tasks)
        else:
            times = arrival_times(n, cfg.request_rate or math.inf, cfg.burstiness, cfg.seed)
            cap = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None

            async def gated(i: int, arrival: float) -> None:
                if cap is None:
                    return await one(i, arrival)
                async with cap:
                    if not stop.is_set():
                        await one(i, arrival)

            async def dispatch() -> None:
                # Absolute schedule: a late wake-up does not push every later request back.
                for i in range(n):
                    # a loop, not one sleep: uvloop rounds timers to whole ms and may wake early
                    while (delay := t0 + times[i] - time.perf_counter()) > 0:
                        await asyncio.sleep(delay)
                    if stop.is_set():
                        break
                    tasks.append(asyncio.create_task(gated(i, float(times[i]))))
                await asyncio.gather(*tasks)

            main = asyncio.ensure_future(dispatch())

        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait([main, stopper], return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            main.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(main, *tasks, return_exceptions=True)
        stopper.cancel()
        end = stopped_at[0] if stopped_at else time.perf_counter()
    finally:
        await lanes.aclose()
        gc.unfreeze()

    records.sort(key=lambda r: r.index)
    summary = summarize(records, end - t0, cfg.slos, cfg.point_label(), **_shape(cfg))
    summary.stopped_early = bool(stop_reason)
    summary.stop_reason = stop_reason[0] if stop_reason else None
    return BenchResult(
        config=cfg,
        model=model,
        tokenizer=tokenizer,
        started_at=started_at,
        warmup_failed=warmup_failed,
        summary=summary,
        requests=records,
    )


def _stop_hook(cfg: BenchConfig, stop_when: StopFn | None) -> StopFn | None:
    if cfg.abort_factor is None or not cfg.slos:
        return stop_when
    builtin = slo_abort(cfg.slos, cfg.abort_factor, cfg.abort_min_requests)
    if stop_when is None:
        return builtin
    return lambda s: stop_when(s) or builtin(s)


async def run_bench(
    cfg: BenchConfig,
    *,
    stop_when: StopFn | None = None,
    on_request: OnRequest | None = None,
    prompts: Sequence[Prompt] | None = None,
) -> BenchResult:
    """Benchmark one load point. `prompts` skips workload generation (the tuner can build them
    once with `prepare` and reuse them for every trial)."""
    if cfg.sweep_concurrency or cfg.sweep_rate:
        raise ValueError("this config is a sweep: call run_sweep")
    if prompts is None:
        model, prompts, tok = await prepare(cfg)
    else:
        async with _client(cfg) as client:
            model = await resolve_model(client, cfg)
        tok = "given"
    return await _run_point(
        cfg,
        model,
        prompts,
        tok,
        warmup=cfg.warmup,
        stop_when=_stop_hook(cfg, stop_when),
        on_request=on_request,
    )


async def run_sweep(
    cfg: BenchConfig,
    *,
    stop_when: StopFn | None = None,
    on_request: OnRequest | None = None,
    on_point: Callable[[BenchResult], None] | None = None,
) -> list[BenchResult]:
    """One result per point of `cfg.points()`, same prompts for every point; the warm-up runs
    before the first point only (the server is warm after that)."""
    model, prompts, tok = await prepare(cfg)
    results = []
    for k, point in enumerate(cfg.points()):
        res = await _run_point(
            point,
            model,
            prompts,
            tok,
            warmup=cfg.warmup if k == 0 else 0,
            stop_when=_stop_hook(point, stop_when),
            on_request=on_request,
        )
        results.append(res)
        if on_point is not None:
            on_point(res)
    return results


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, on uvloop when it is installed (vLLM and SGLang bring it): the client then
    spends ~25% less CPU per request, so it stays out of the measurement longer."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def bench(cfg: BenchConfig, **kwargs: Any) -> BenchResult:
    """Synchronous `run_bench` (not from inside a running event loop)."""
    return run_loop(run_bench(cfg, **kwargs))


def sweep(cfg: BenchConfig, **kwargs: Any) -> list[BenchResult]:
    """Synchronous `run_sweep`."""
    return run_loop(run_sweep(cfg, **kwargs))
