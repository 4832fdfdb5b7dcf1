"""Batch invariance: where greedy outputs may part (numerics) and where they may not (a wrong kernel)."""

from __future__ import annotations

import pytest

from bringup.verify.probes import common_prefix, near_tie_divergence


def test_parting_at_once_is_a_wrong_kernel():
    ref, batched = ["The", " cat", " sat"], ["A", " dog", " ran"]
    assert common_prefix(ref, batched) == 0 and not near_tie_divergence(ref, 0)
    # the scenario engine's `inconsistent` mode parts after 2 tokens: still wrong
    assert not near_tie_divergence(ref, 2)


def test_parting_after_a_shared_prefix_is_numerics():
    ref = ["a", "b", "c", "d", "e", "f"]
    batched = ["a", "b", "c", "d", "e", "x"]
    assert common_prefix(ref, batched) == 5 and near_tie_divergence(ref, 5)


def test_text_is_measured_in_characters():
    # Seen on the H200 (transformers serve, continuous batching, random 8 B model): parted after 12 characters.
    ref, batched = "lease senleaefzgrees la at Co", "lease senlea\ufffd sha hastse Par"
    agree = common_prefix(ref, batched)
    assert agree == 12 and near_tie_divergence(ref, agree)
    assert not near_tie_divergence("lease", common_prefix("lease", "leaf"))


def test_parting_at_a_near_tie_of_the_servers_own_logprobs_is_numerics_at_any_token():
    """With two logprobs a step, a parting at token 0-3 is allowed where the greedy token and the
    other request's lie within the precision's tie gap in either request's top logprobs (bf16
    batched kernels break a near tie the other way); where the server was confident, it fails."""
    from bringup.verify.probe_http import parting

    alone, batched = [" a", " b", " c"], [" a", " x", " y"]
    near = [{" a": -1.0, " q": -2.0}, {" b": -2.00, " x": -2.03}, {}]
    far = [{" a": -1.0, " q": -2.0}, {" b": -0.2, " x": -3.0}, {}]
    assert "a near tie" in (parting(alone, batched, (near, []), 0.5) or "")
    assert parting(alone, batched, ([], near), 0.5) is not None  # the batched request's own top says it
    assert parting(alone, batched, (far, far), 0.5) is None
    assert parting(alone, batched, (near, near), 0.02) is None  # float32's tie gap is tighter
    assert parting(alone, [" a", " x"], ([], []), 0.5) is None  # no logprobs: the 4-token rule alone
    assert "agree for 4" in (parting(list("abcde"), list("abcdx"), ([], []), 0.5) or "")


@pytest.mark.slow  # two whole ladders against a fake server that holds each request 0.2 s: ~4 s
def test_the_concurrency_probe_allows_a_copy_that_parts_at_a_near_tie_and_fails_a_confident_one():
    import asyncio
    import json

    from bringup.verify.probes import REFERENCE_PROMPT
    from tests.fake_openai_server import Server
    from tests.verify.test_probes import by_name, probe, serving

    class Flips(Server):
        """Greedy ' t0 t1 ...' with two logprobs a step; the reference prompt, in a batch of more
        than 16, answers ' t0 u1 ...' where t1 and u1 are `gap` nats apart."""

        gap = 0.01
        inflight = 0

        async def generate(self, req: dict, chat: bool, w) -> bool:
            self.inflight += 1
            try:
                await asyncio.sleep(0.2)
                busy = self.inflight > 16
                if chat or req.get("prompt") != REFERENCE_PROMPT or req.get("temperature"):
                    return await super().generate(req, chat, w)
                n = int(req.get("max_tokens") or 16)
                toks = [f" t{i}" if not busy or i == 0 else f" u{i}" for i in range(n)]
                top = [{f" t{i}": -1.0, f" u{i}": -1.0 - self.gap} for i in range(n)]
                if busy:
                    top = [{f" u{i}": -1.0, f" t{i}": -1.0 - self.gap} if i else t for i, t in enumerate(top)]
                lps = {"tokens": toks, "token_logprobs": [-1.0] * n, "top_logprobs": top}
                answer = {"choices": [{"index": 0, "text": "".join(toks), "logprobs": lps}]}
                if not req.get("stream"):
                    self.send_json(w, {**answer, "usage": {"completion_tokens": n}})
                    await w.drain()
                    return True
                # the completion probe's streamed request: one chunk, then [DONE]
                w.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                for data in (b"data: " + json.dumps(answer).encode() + b"\n\n", b"data: [DONE]\n\n"):
                    w.write(b"%x\r\n%s\r\n" % (len(data), data))
                w.write(b"0\r\n\r\n")
                await w.drain()
                return True
            finally:
                self.inflight -= 1

    class Confident(Flips):
        gap = 3.0

    with serving(Flips) as (url, _):
        ok = by_name(probe(url))
    with serving(Confident) as (url, _):
        bad = by_name(probe(url))
    assert ok["concurrency"].passed and "part after a near tie" in ok["concurrency"].detail, ok[
        "concurrency"
    ].detail
    assert not bad["concurrency"].passed and "differs from alone" in bad["concurrency"].detail
