"""Issue 28, row 1: every read from a server or a file has a cap, and says when it was hit.

The attack: a server whose answer is one line that never ends (the fake sends 256 MiB of it,
then closes). Before the caps the probes held every byte (15.9 GB peak against a real endless
server); now the read stops at the cap. Memory is measured with tracemalloc (allocations of
this process), never with wall time.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bringup.guard.bounded import MAX_BODY, MAX_LINE, CapHit, EventBuffer, iter_lines, read_body
from bringup.verify.probe_http import post_json as _post
from bringup.verify.probes import ProbeConfig, ProbeRunner, ServerBroke
from tests.endless_server import endless_server

MiB = 1 << 20


def _peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn's result and the peak of memory allocated while it ran, in bytes."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _url(srv: Any) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_caps_in_lines_and_bodies() -> None:
    assert list(iter_lines([b"a\nb", b"c\r\n", b"d"], "t")) == [b"a", b"bc", b"d"]
    with pytest.raises(CapHit, match="cap hit: more than 8 bytes in one line"):
        list(iter_lines([b"x" * 5, b"y" * 5], "t", max_line=8))
    with pytest.raises(CapHit, match="in one stream"):
        list(iter_lines([b"a\n"] * 10, "t", max_total=9))
    with pytest.raises(CapHit, match="in one answer"):
        read_body([b"x" * 6] * 2, "t", cap=10)
    ev = EventBuffer("t", max_event=8)
    assert ev.feed(b"data: 1\n\ndata") == [b"data: 1"]
    with pytest.raises(CapHit, match="in one event"):
        ev.feed(b"x" * 8)


@pytest.mark.slow
def test_probes_stop_an_endless_streamed_line() -> None:
    with endless_server(("/v1/completions",)) as srv:
        results, peak = _peak(lambda: ProbeRunner(_url(srv), ProbeConfig(request_timeout=60)).run())
    by = {r.name: r for r in results}
    assert by["health"].passed
    assert not by["completion"].passed and by["completion"].kind == "server-error"
    assert "cap hit" in by["completion"].detail
    assert "chat" not in by  # the server broke: the ladder stopped
    assert peak < 4 * MAX_LINE + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


@pytest.mark.slow
def test_probe_json_answer_without_end() -> None:
    with endless_server(("/v1/chat/completions",)) as srv, httpx.Client(base_url=_url(srv), timeout=60) as c:

        def call() -> str:
            with pytest.raises(ServerBroke) as e:
                _post(c, "/v1/chat/completions", {"model": "m"})
            return str(e.value)

        msg, peak = _peak(call)
    assert "cap hit" in msg and "in one answer" in msg
    assert peak < 2 * MAX_BODY + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


@pytest.mark.slow
def test_loadgen_request_stops_an_endless_event() -> None:
    from bringup.loadgen.client import Lanes, RequestRecord, send

    async def one(url: str) -> RequestRecord:
        lanes = Lanes(60)
        try:
            rec = RequestRecord(index=0)
            return await send(lanes, url, b"{}", rec, chat=False, t0=0.0, timeout_s=60)
        finally:
            await lanes.aclose()

    with endless_server(("/v1/completions",)) as srv:
        rec, peak = _peak(lambda: asyncio.run(one(_url(srv) + "/v1/completions")))
    assert not rec.ok and rec.error and "cap hit" in rec.error
    assert peak < 4 * MAX_LINE + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


@pytest.mark.slow
def test_bench_model_list_without_end() -> None:
    from bringup.loadgen.config import BenchConfig, BenchError
    from bringup.loadgen.runner import _client, resolve_model

    async def go(cfg: BenchConfig) -> str:
        async with _client(cfg) as client:
            with pytest.raises(BenchError) as e:
                await resolve_model(client, cfg)
            return str(e.value)

    with endless_server(("/v1/models",)) as srv:
        cfg = BenchConfig(url=_url(srv))
        msg, peak = _peak(lambda: asyncio.run(go(cfg)))
    assert "cap hit" in msg
    assert peak < 2 * MAX_BODY + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


@pytest.mark.slow
def test_explain_on_distinct_long_lines_keeps_a_bounded_selection(tmp_path: Path) -> None:
    """1 GB of distinct 4,000-byte lines was 272 MB peak; the kept lines now have a budget. Here
    64 MB of them: the selection stays under its 24 MiB budget plus head and tail."""
    from bringup.observe.logread import select_lines

    log = tmp_path / "long.log"
    with open(log, "w") as f:
        for i in range(16000):
            word = "".join(chr(97 + (i >> (4 * k)) % 16) for k in range(4))  # distinct, digits aside
            f.write(f"line {word} " + chr(65 + i % 26) * 3980 + "\n")
    sel, peak = _peak(lambda: select_lines(log))
    assert sel.total_lines == 16000
    assert sel.over_budget > 0 and any("cap hit" in n for n in sel.notes)
    assert peak < 48 * MiB, f"peak {peak / MiB:.0f} MiB"
