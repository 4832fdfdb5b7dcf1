"""Read what a server sends in bounded memory: caps on one line and on one answer in total.

A server under test is not trusted: one that streams a line that never ends (no newline, no SSE
event boundary) made the probes and `bringup tune` grow about 300 MB/s until the hang deadline
(issue 28: 15.9 GB peak). httpx's `Response.json()`/`.text`/`iter_lines()` and aiohttp's
`read()` all buffer without limit, so every read from a server goes through here instead, and a
cap that is hit is an error that says so (`CapHit`), never a silent truncation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

MAX_LINE = 1 << 20  # one line / one SSE event: 1 MiB (a real chunk is a few hundred bytes)
MAX_BODY = 16 << 20  # one JSON answer (models, tokenize, a 256-token completion with logprobs)
MAX_STREAM = 256 << 20  # one streamed answer in total (events are consumed as they come)


class CapHit(ValueError):
    """A server sent more than a cap allows; the read stopped there (a ValueError: whatever
    handles a malformed answer handles this one too)."""

    def __init__(self, what: str, cap: int, kind: str = "in one line"):
        self.what, self.cap, self.kind = what, cap, kind
        super().__init__(f"{what}: cap hit: more than {cap:,} bytes {kind}; the read stopped there")


def _join(parts: list[bytes]) -> bytes:
    return b"".join(parts)


def read_body(chunks: Iterable[bytes], what: str, cap: int = MAX_BODY) -> bytes:
    """The whole body, or CapHit once it passes `cap` bytes."""
    parts: list[bytes] = []
    n = 0
    for c in chunks:
        n += len(c)
        if n > cap:
            raise CapHit(what, cap, "in one answer")
        parts.append(c)
    return _join(parts)


async def aread_body(chunks: AsyncIterator[bytes], what: str, cap: int = MAX_BODY) -> bytes:
    parts: list[bytes] = []
    n = 0
    async for c in chunks:
        n += len(c)
        if n > cap:
            raise CapHit(what, cap, "in one answer")
        parts.append(c)
    return _join(parts)


def iter_lines(
    chunks: Iterable[bytes], what: str, max_line: int = MAX_LINE, max_total: int = MAX_STREAM
) -> Iterator[bytes]:
    """Lines (without their end) of a byte stream, each at most `max_line` bytes and all of them
    at most `max_total`: CapHit past either."""
    buf = b""
    total = 0
    for c in chunks:
        total += len(c)
        if total > max_total:
            raise CapHit(what, max_total, "in one stream")
        buf = buf + c if buf else c
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        while (cut := buf.find(b"\n")) >= 0:
            yield buf[:cut]
            buf = buf[cut + 1 :]
        if len(buf) > max_line:
            raise CapHit(what, max_line)
    if buf:
        yield buf


class EventBuffer:
    """SSE events (the bytes between blank lines) from an async stream's chunks, with the same
    caps as `iter_lines`: for the load generator's hot loop, which feeds it chunk by chunk."""

    def __init__(self, what: str, max_event: int = MAX_LINE, max_total: int = MAX_STREAM):
        self.what, self.max_event, self.max_total = what, max_event, max_total
        self.buf = b""
        self.total = 0

    def feed(self, data: bytes) -> list[bytes]:
        self.total += len(data)
        if self.total > self.max_total:
            raise CapHit(self.what, self.max_total, "in one stream")
        buf = self.buf + data if self.buf else data
        if b"\r\n" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        events = []
        while (cut := buf.find(b"\n\n")) >= 0:
            events.append(buf[:cut])
            buf = buf[cut + 2 :]
        if len(buf) > self.max_event:
            raise CapHit(self.what, self.max_event, "in one event")
        self.buf = buf
        return events
