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
import ssl
import time
from typing import Any, Literal

import httpcore
import httpx
from pydantic import BaseModel, Field

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


class _CoalescingStream(httpcore.AsyncNetworkStream):
    """Holds writes until the next read and sends them as one segment.

    httpx (httpcore + h11) writes a request's headers and its body separately: two TCP
    segments, where vllm bench serve's aiohttp sends one. On a loaded 2-core machine that
    difference alone showed: the split requests ran 25-90% slower (the server handles the
    headers, then needs another turn of its event loop for the body)."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._pending: list[bytes] = []

    async def _flush(self, timeout: float | None) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            await self._inner.write(data, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._pending.append(buffer)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush(timeout)
        return await self._inner.read(max_bytes, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        await self._flush(timeout)
        return _CoalescingStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CoalescingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _CoalescingStream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _CoalescingStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class Lanes:
    """httpx clients of one connection each, lent one per request in flight.

    One shared httpx client would be simpler, but its connection pool (httpcore 1.0) scans
    every connection for every queued request on every request start and end: at 64 requests
    in flight that is ~15 ms of CPU per request, and the load generator, not the server,
    becomes the bottleneck (TTFT p50 of 230 ms against a server that answers in 0.3 ms).
    A lane's pool holds one connection, so each pool operation is O(1). Each lane also sends
    a request in one write (`_CoalescingStream`).
    """

    def __init__(self, timeout_s: float) -> None:
        self._idle: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []
        self._timeout = httpx.Timeout(timeout_s, connect=10.0)
        self._ssl = ssl.create_default_context()  # built once: per client it costs ~1 ms

    def _transport(self) -> httpx.AsyncHTTPTransport:
        t = httpx.AsyncHTTPTransport(verify=self._ssl, trust_env=False)
        # httpx has no public hook for httpcore's network backend; its transport keeps the
        # pool in `_pool` (httpx 0.23-0.28). Without it we only lose the single-write sends.
        if isinstance(getattr(t, "_pool", None), httpcore.AsyncConnectionPool):
            t._pool = httpcore.AsyncConnectionPool(
                ssl_context=self._ssl, max_connections=1, max_keepalive_connections=1, keepalive_expiry=60,
                network_backend=_CoalescingBackend())
        return t

    def acquire(self) -> httpx.AsyncClient:
        if self._idle:
            return self._idle.pop()
        # trust_env=False: a benchmark must not go through a proxy picked up from the environment.
        c = httpx.AsyncClient(timeout=self._timeout, transport=self._transport(), trust_env=False)
        self._all.append(c)
        return c

    def release(self, c: httpx.AsyncClient) -> None:
        self._idle.append(c)

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._all), return_exceptions=True)
        self._idle.clear()
        self._all.clear()


def build_body(prompt: Prompt, model: str, endpoint: str, ignore_eos: bool, extra: dict[str, Any]) -> bytes:
    body: dict[str, Any] = {"model": model, "max_tokens": prompt.output_len, "stream": True,
                            "stream_options": {"include_usage": True}}
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
    client = lanes.acquire()
    st = time.perf_counter()
    rec.sent_at_s = st - t0
    last = st
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", url, content=body,
                                     headers={"content-type": "application/json"}) as resp:
                rec.status = resp.status_code
                if resp.status_code != 200:
                    detail = (await resp.aread())[:300].decode(errors="replace")
                    rec.error = f"HTTP {resp.status_code}: {' '.join(detail.split())}"
                    return rec
                # raw bytes skip httpx's decoder layers; only a compressed stream needs them
                stream = resp.aiter_bytes() if "content-encoding" in resp.headers else resp.aiter_raw()
                buf = b""
                async for data in stream:
                    now = time.perf_counter()
                    buf = buf + data if buf else data
                    if b"\r\n" in buf:
                        buf = buf.replace(b"\r\n", b"\n")
                    while (cut := buf.find(b"\n\n")) >= 0:
                        event, buf = buf[:cut], buf[cut + 2:]
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
                                    if not piece and chunks == 0 and "role" in delta and not c.get("finish_reason"):
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
                                if usage.get("completion_tokens") is not None:
                                    usage_out = int(usage["completion_tokens"])
                                if usage.get("prompt_tokens") is not None:
                                    rec.input_tokens = int(usage["prompt_tokens"])
        if chunks == 0:
            rec.error = "the stream carried no tokens"
    except asyncio.CancelledError:
        raise
    except TimeoutError:
        rec.error = f"timed out after {timeout_s:g} s"
    except Exception as e:  # noqa: BLE001 - any failure of one request is data, not a crash
        rec.error = _one_line(e)
    finally:
        lanes.release(client)
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
