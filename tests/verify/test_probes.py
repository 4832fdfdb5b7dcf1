"""The probe ladder (bringup/verify/probes.py) in-process, against the fake OpenAI server of the load tests.

The server runs on an event loop in a thread of the test process; a subclass per test scripts
what it does wrong (a 5xx on the first request, an answer that changes in a batch, NaN
logprobs), so each verdict of the ladder is checked in well under a second, without an engine.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from bringup.verify.probes import REFERENCE_PROMPT, KnownAnswer, ProbeConfig, ProbeRunner
from tests.fake_openai_server import Server, parse

GREEDY = ["health", "completion", "chat", "long-decode", "batch", "batch-invariance"]
USER = ["sampled", "sampled-reference", "long-prompt", "concurrency"]  # bringup/verify/probes_user.py
LADDER = GREEDY + USER


@contextmanager
def serving(server_cls: type[Server] = Server, *argv: str) -> Iterator[tuple[str, Server]]:
    """The fake server on 127.0.0.1, on its own event loop in a thread; stopped on exit."""
    srv = server_cls(parse(["--port", "0", *argv]))
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict = {}

    async def start() -> None:
        box["server"] = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
        box["port"] = box["server"].sockets[0].getsockname()[1]
        started.set()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    t = threading.Thread(target=main, daemon=True)
    t.start()
    assert started.wait(10), "the fake server did not start"
    try:
        yield f"http://127.0.0.1:{box['port']}", srv
    finally:

        async def stop() -> None:
            box["server"].close()
            await box["server"].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


def probe(url: str, **cfg) -> list:
    return ProbeRunner(url, ProbeConfig(request_timeout=10, **cfg)).run()


def by_name(results: list) -> dict:
    return {r.name: r for r in results}


def test_a_healthy_server_passes_the_whole_ladder():
    with serving() as (url, srv):
        runner = ProbeRunner(url, ProbeConfig(request_timeout=10, batch_size=4, long_tokens=200))
        results = runner.run()
        log = list(srv.log)
    assert [r.name for r in results] == LADDER
    assert all(r.passed and r.kind in ("ok", "skipped") for r in results), [
        (r.name, r.detail) for r in results
    ]
    assert runner.model == "fake-model"  # read from /v1/models
    assert "16 tokens (streamed)" in by_name(results)["completion"].detail
    assert by_name(results)["long-decode"].detail.startswith("200 tokens")
    assert [r.phase for r in results][: len(GREEDY)] == [
        "ready",
        "ready",
        "decode",
        "decode",
        "decode",
        "load",
    ]
    # what the server received: one streamed first request, then chat, long decode, the batch, one repeat
    completions = [r for r in log if "prompt" in r]
    assert completions[0]["stream"] is True and completions[0]["prompt"] == REFERENCE_PROMPT
    greedy = [r for r in log if r.get("temperature") == 0]
    assert all(r["model"] == "fake-model" for r in log)
    assert any(r.get("ignore_eos") and r["max_tokens"] == 200 for r in completions)
    assert len([r for r in greedy if "prompt" in r]) == 1 + 1 + 4 + 1 + 32  # the last: the full batch
    # then the sampled request (streamed, unseeded: vLLM samples a seeded request with PyTorch, never
    # FlashInfer's kernel) and the same-seed pair
    sampled = [r for r in log if r.get("temperature", 0) > 0]
    assert len(sampled) == 3 and sampled[0]["stream"] and "seed" not in sampled[0]
    assert sampled[1]["seed"] == sampled[2]["seed"] and not sampled[1].get("stream")
    assert sampled[0]["top_k"] == 5 and sampled[0]["top_p"] == 0.9
    res = by_name(results)
    assert res["sampled-reference"].kind == "skipped" and "no reference" in res["sampled-reference"].detail
    assert res["long-prompt"].kind == "skipped" and "no maximum length" in res["long-prompt"].detail
    assert res["concurrency"].detail.startswith("32 concurrent requests")


def test_known_answers_right_and_wrong():
    """A wrong answer is wrong output: the ladder goes on (the server is up) and says what it got."""
    with serving() as (url, _):
        ok = by_name(probe(url, answers=[KnownAnswer("Count for me", "t3")]))
        bad = probe(url, answers=[KnownAnswer("What is 2+2?", "4")])
    assert ok["known-answers"].passed and ok["known-answers"].detail == "1 known answers correct"
    names = [r.name for r in bad]
    assert names == [
        "health",
        "completion",
        "chat",
        "known-answers",
        "long-decode",
        "batch",
        "batch-invariance",
        *USER,
    ]
    ka = by_name(bad)["known-answers"]
    assert not ka.passed and ka.kind == "disagree" and "expected '4'" in ka.detail
    assert by_name(bad)["batch-invariance"].passed


class FailsFirstCompletion(Server):
    """HTTP 500 on the first generation request, like an engine that dies on its first prefill."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        self.send_json(w, {"error": {"message": "CUDA error: an illegal memory access"}}, 500)
        await w.drain()
        return True


def test_a_server_error_on_the_first_request_stops_the_ladder():
    with serving(FailsFirstCompletion) as (url, _):
        results = probe(url)
    assert [r.name for r in results] == ["health", "completion"]  # nothing after a broken server
    assert results[0].passed
    r = results[1]
    assert not r.passed and r.kind == "server-error" and r.phase == "first-request"
    assert "HTTP 500" in r.detail and "illegal memory access" in r.detail


class BatchVariant(Server):
    """Greedy output of the reference prompt changes once it is not alone (a batch-variant kernel)."""

    seen = 0

    async def generate(self, req: dict, chat: bool, w) -> bool:
        if not chat and req.get("prompt") == REFERENCE_PROMPT and not req.get("stream"):
            self.send_json(
                w,
                {
                    "choices": [{"index": 0, "text": " t0 t1 t2 DIFFERENT"}],
                    "usage": {"prompt_tokens": 4, "completion_tokens": 4},
                },
            )
            await w.drain()
            return True
        return await super().generate(req, chat, w)


def test_a_batch_variant_answer_is_wrong_output_not_a_broken_server():
    with serving(BatchVariant) as (url, _):
        results = probe(url, batch_size=3)
    assert [r.name for r in results] == LADDER
    res = by_name(results)
    assert all(res[n].passed for n in GREEDY[:-1])
    bi = res["batch-invariance"]
    assert not bi.passed and bi.kind == "disagree" and bi.phase == "load"
    assert "differs alone vs in a batch" in bi.detail and "DIFFERENT" in bi.detail


class NaNLogprobs(Server):
    """Every non-streamed completion carries a NaN logprob (a numerically broken kernel)."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        if chat or req.get("stream"):
            return await super().generate(req, chat, w)
        n = int(req.get("max_tokens") or 16)
        toks = [f" t{i}" for i in range(n)]
        lps = [-0.5] * n
        lps[n // 2] = math.nan
        body = {
            "choices": [
                {"index": 0, "text": "".join(toks), "logprobs": {"tokens": toks, "token_logprobs": lps}}
            ],
            "usage": {"prompt_tokens": 4, "completion_tokens": n},
        }
        assert "NaN" in json.dumps(body)  # what a Python server sends for nan
        self.send_json(w, body)
        await w.drain()
        return True


def test_nan_logprobs_are_reported_as_nan():
    with serving(NaNLogprobs) as (url, _):
        results = probe(url, batch_size=3)
    res = by_name(results)
    assert res["health"].passed and res["completion"].passed and res["chat"].passed
    ld = res["long-decode"]
    assert (
        not ld.passed and ld.kind == "nan" and "non-finite logprobs" in ld.detail and "1 of 256" in ld.detail
    )
    assert not res["batch"].passed and res["batch"].kind == "nan"
    # the batch gave no comparable output: invariance fails and says why, instead of crashing the ladder
    bi = res["batch-invariance"]
    assert not bi.passed and bi.detail == "not compared: the batch probe gave no output to compare"


class NaNInStream(Server):
    """The streamed first request's second token has a NaN logprob."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        if not req.get("stream"):
            return await super().generate(req, chat, w)
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for tok, lp in ((" a", -0.1), (" b", math.nan)):
            chunk = {
                "choices": [{"index": 0, "text": tok, "logprobs": {"tokens": [tok], "token_logprobs": [lp]}}]
            }
            data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            w.write(b"%x\r\n%s\r\n" % (len(data), data))
        data = b"data: [DONE]\n\n"
        w.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await w.drain()
        return True


def test_nan_in_the_first_streamed_answer_strikes_in_decode():
    with serving(NaNInStream) as (url, _):
        res = by_name(probe(url))
    c = res["completion"]
    assert not c.passed and c.kind == "nan" and c.phase == "decode" and "nan" in c.detail.lower()
    assert list(res) == LADDER  # the ladder goes on: the server is up
    assert res["batch-invariance"].detail == "not compared: the completion probe gave no output to compare"


def test_a_stop_event_ends_the_ladder_before_the_next_probe():
    """The trial sets `stop` when the server process dies: no probe runs against a dead server."""
    with serving() as (url, _):
        stop = threading.Event()
        stop.set()
        results = ProbeRunner(url, ProbeConfig(request_timeout=10), stop=stop).run()
    assert len(results) == 1 and not results[0].passed and "not run" in results[0].detail
