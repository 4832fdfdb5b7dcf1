"""One streamed request, timed: the only code on the hot path.

Timing follows vllm bench serve (vllm/benchmarks/lib/endpoint_request_func.py) so the two
tools can be compared number for number:

- TTFT: from just before the request is sent to the arrival of the first SSE event that
  carries a choice (the first generated chunk).
- ITL: one gap per streamed chunk after the first, whatever the number of tokens the chunk
  carries. Servers that bundle several tokens per chunk (stream intervals, speculative
  decoding) show fewer, longer gaps; TPOT below still spreads time over every token.
- E2E: to the last chunk that carries a choice (the trailing usage event and [DONE] are not
  generation).
- Output tokens: the server's `usage.completion_tokens` (stream_options.include_usage); if the
  server sends no usage, the number of chunks (exact when each chunk is one token).
- TPOT: (E2E - TTFT) / (output tokens - 1), for requests with more than one output token.

One difference from vllm bench serve, for chat only: a first chunk that only announces the
assistant role (no content yet) is not counted as the first token, because some servers send
it before any token has been generated.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

import aiohttp
from pydantic import BaseModel, Field

from bringup.guard import ranges
from bringup.guard.bounded import EventBuffer
from bringup.loadgen.workload import Prompt


class RequestRecord(BaseModel):
    """What one request did. Times in seconds; `*_at_s` are relative to the start of the run."""

    index: int
    ok: bool = False
    cancelled: bool = False  # in flight when an early stop ended the run; not a failure
    error: str | None = None
    status: int | None = None
    arrival_at_s: float = 0.0  # when the load shape released it
    sent_at_s: float = 0.0  # when it went out (later than arrival when a concurrency cap made it wait)
    ttft_s: float | None = None
    e2e_s: float | None = None
    tpot_s: float | None = None
    itl_s: list[float] = Field(default_factory=list)
    chunks: int = 0
    input_tokens: int | None = None
    output_tokens: int = 0
    expected_output_tokens: int = 0
    output_tokens_source: Literal["usage", "chunks", "none"] = "none"
    text: str | None = None

    @property
    def queue_s(self) -> float:
        return self.sent_at_s - self.arrival_at_s


class Lanes:
    """The HTTP client of the measured requests: one aiohttp session, one keep-alive connection
    per request in flight.

    Why not httpx (which the rest of bringup uses): this client shares a small machine with the
    server it measures, so its CPU per request is stolen from the server. Against the vLLM CPU
    build on 2 cores at 8 concurrent streams, httpx (even with one-connection pools and
    single-write sends) took about twice the CPU per request of aiohttp and pushed the server
    into its slow "burst" mode: bringup measured ~1,200-2,400 output tok/s where vllm bench serve
    (aiohttp) measured ~4,000-4,600 on the same server (docs/loadgen.md). With aiohttp, the same
    client library as vllm bench serve, the two agree.
    """

    def __init__(self, timeout_s: float, headers: dict[str, str] | None = None) -> None:
        self._timeout_s = timeout_s
        self._headers = dict(headers or {})  # Authorization for a server started with --api-key
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # limit=0: no pool cap (the load shape caps what is in flight); trust_env=False: a
            # benchmark must not go through a proxy picked up from the environment.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                trust_env=False,
                headers=self._headers,
                auto_decompress=True,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def build_body(prompt: Prompt, model: str, endpoint: str, ignore_eos: bool, extra: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": prompt.output_len,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM and SGLang both accept it; lengths then match the ask
    body.update(extra)
    return json.dumps(body).encode()


try:  # orjson parses a stream chunk in about a third of the time; optional (vLLM brings it)
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads


class ImpossibleCounts(ValueError):
    """The server reported token counts that cannot be (bringup/guard/ranges.py `usage_problem`)."""


def _counts(usage: dict[str, Any], out: int | None, prompt: int | None) -> tuple[int | None, int | None]:
    """The completion and prompt token counts of a `usage` object (each kept as it was when absent);
    impossible ones fail the request: `bench` printed negative throughput from a server that
    reported negative counts, where `trial` already caught the same server (issue 40)."""
    if bad := ranges.usage_problem(usage):
        raise ImpossibleCounts(f"the server's token counts cannot be: {bad}")
    done, given = usage.get("completion_tokens"), usage.get("prompt_tokens")
    return (out if done is None else int(done)), (prompt if given is None else int(given))


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


async def send(
    lanes: Lanes,
    url: str,
    body: bytes,
    rec: RequestRecord,
    *,
    chat: bool,
    t0: float,
    timeout_s: float,
    keep_text: bool = False,
) -> RequestRecord:
    """POST `body` to `url`, stream the answer and fill `rec`. Never raises for a failed request
    (the error goes in the record); only cancellation propagates."""
    # Hot loop state lives in locals (not on the pydantic record): this client shares a small
    # machine with the server it measures, so every microsecond per chunk is stolen from it.
    text_parts: list[str] = []
    itl: list[float] = []
    chunks = 0
    ttft: float | None = None
    usage_out: int | None = None
    session = lanes.session()
    st = time.perf_counter()
    rec.sent_at_s = st - t0
    last = st
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                rec.status = resp.status
                if resp.status != 200:
                    detail = (await resp.content.read(300)).decode(errors="replace")
                    rec.error = f"HTTP {resp.status}: {' '.join(detail.split())}"
                    return rec
                events = EventBuffer(f"POST {url}")  # caps one event and the whole stream
                async for data in resp.content.iter_any():
                    now = time.perf_counter()
                    for event in events.feed(data):
                        for line in event.split(b"\n"):
                            if not line.startswith(b"data:"):
                                continue  # SSE comments (keep-alive pings), event names
                            payload = line[5:].strip()
                            if payload == b"[DONE]" or not payload:
                                continue
                            obj = _loads(payload)
                            if "error" in obj and not obj.get("choices"):
                                err = obj["error"]
                                raise RuntimeError(err.get("message", err) if isinstance(err, dict) else err)
                            if choices := obj.get("choices"):
                                c = choices[0]
                                if chat:
                                    delta = c.get("delta") or {}
                                    piece = delta.get("content") or delta.get("reasoning_content") or ""
                                    if (
                                        not piece
                                        and chunks == 0
                                        and "role" in delta
                                        and not c.get("finish_reason")
                                    ):
                                        continue  # role announcement, not a token
                                else:
                                    piece = c.get("text") or ""
                                if chunks == 0:
                                    ttft = now - st
                                else:
                                    itl.append(now - last)
                                last = now
                                chunks += 1
                                if keep_text:
                                    text_parts.append(piece)
                            if usage := obj.get("usage"):
                                usage_out, rec.input_tokens = _counts(usage, usage_out, rec.input_tokens)
        if chunks == 0:
            rec.error = "the stream carried no tokens"
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        rec.error = f"timed out after {timeout_s:g} s"
    except Exception as e:  # any failure of one request is data, not a crash
        rec.error = _one_line(e)
    finally:
        rec.chunks, rec.ttft_s, rec.itl_s = chunks, ttft, itl
        if chunks:
            rec.e2e_s = last - st
        if usage_out is not None:
            rec.output_tokens, rec.output_tokens_source = usage_out, "usage"
        elif chunks:
            rec.output_tokens, rec.output_tokens_source = chunks, "chunks"
        if ttft is not None and rec.e2e_s is not None and rec.output_tokens > 1:
            rec.tpot_s = (rec.e2e_s - ttft) / (rec.output_tokens - 1)
        if keep_text:
            rec.text = "".join(text_parts)
    rec.ok = rec.error is None
    return rec
