"""The probes that use the server as users do (bringup/verify/probes_user.py), and their arithmetic.

Against the in-process fake server of tests/verify/test_probes.py, each subclass scripting one fault a
greedy ladder cannot see: a sampler that draws outside top-k, a sampled request that stalls, a
long prompt whose prefill is wrong, output that changes once the batch is full. Then the three
shipped scenarios of these faults, through the oracle and one real trial each (slow).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import zlib

import pytest

from bringup.verify.probes import REFERENCE_PROMPT, ProbeConfig, ProbeRunner
from bringup.verify.reference import PromptReference, Reference, Step
from bringup.verify.sampling_check import ALPHA, allowed, binomial_verdict, outside_reference, top1_bounds
from tests.fake_openai_server import Server
from tests.verify.test_probes import by_name, probe, serving

TOP = {" a": -0.1, " b": -2.5, " c": -3.0, " d": -4.0, " e": -5.0}


# -- the arithmetic ----------------------------------------------------------------------------------
def test_allowed_rules_out_what_top_k_or_top_p_excludes():
    assert allowed(" a", -0.1, TOP, top_k=5, top_p=0.9) is None
    assert allowed(" c", -3.0, TOP, top_k=3, top_p=1.0) is None  # the 3rd of top_k 3
    why = allowed(" d", -4.0, TOP, top_k=3, top_p=1.0)
    assert why is not None and "top_k is 3" in why
    # " a" alone holds exp(-0.1) = 0.905 of the mass: with top_p 0.5 only " a" may be drawn
    why = allowed(" b", -2.5, TOP, top_k=0, top_p=0.5)
    assert why is not None and "top_p is 0.5" in why
    # ... but at top_p 0.9 the mass above " b" (0.905) is within the slack: allowed
    assert allowed(" b", -2.5, TOP, top_k=0, top_p=0.9) is None
    # a near tie with the k-th token is no violation (bf16 may rank either side)
    assert allowed(" x", -3.02, {**TOP, " x": -3.02}, top_k=3, top_p=1.0) is None
    assert "logprob nan" in (allowed(" a", math.nan, TOP, 5, 1.0) or "")


def test_the_binomial_test_catches_a_uniform_or_greedy_sampler_and_passes_a_healthy_one():
    top = {" a": -0.05, " b": -3.5, " c": -4.0, " d": -6.0, " e": -7.0}
    first, lo, hi = top1_bounds(top, 3, 0.5)
    assert first == " a" and 0.85 < lo < hi <= 1.0
    healthy = [" a"] * 31 + [" b"]
    assert binomial_verdict("p", healthy, top, 3, 0.5).passed
    uniform = [" a", " b", " c"] * 10 + [" a", " b"]
    v = binomial_verdict("p", uniform, top, 3, 0.5)
    assert not v.passed and "too rarely" in v.detail
    flat = {" a": -1.0, " b": -1.1, " c": -1.2, " d": -3.0, " e": -3.1}
    v = binomial_verdict("p", [" a"] * 32, flat, 3, 0.05)  # always the top-1 of a flat distribution
    assert not v.passed and "too often" in v.detail
    assert outside_reference(" e", top, 3, 0.5) and not outside_reference(" c", top, 3, 0.5)
    v = binomial_verdict("p", [" a"] * 30 + [" e", " e"], top, 3, 0.5)
    assert not v.passed and "outside the reference's top-3" in v.detail


def test_byte_fragments_are_left_out_of_the_draws_not_counted_against_the_sampler():
    """A token that is half a UTF-8 character comes back as '' or U+FFFD: it names no token."""
    top = {" a": -0.3, "\ufffd": -1.5, " c": -3.0, " d": -6.0, " e": -7.0}
    draws = [" a"] * 24 + [""] * 4 + ["\ufffd"] * 4
    assert binomial_verdict("p", draws, top, 3, 0.5).passed
    frag_first = {"\ufffd": -0.1, " a": -3.0, " b": -3.5}
    v = binomial_verdict("p", [""] * 30 + [" a", " b"], frag_first, 3, 0.5)
    assert v.passed and "byte fragment" in v.detail


def test_the_binomial_false_alarm_rate_is_at_most_alpha_on_a_simulated_healthy_sampler():
    """Draws from a distribution at the edge of the tolerance: the test fails well under ALPHA x
    (2 sides) of the time (here: never in 2,000 trials)."""
    import random

    rng = random.Random(7)
    top = {" a": -0.7, " b": -1.2, " c": -1.9, " d": -2.5, " e": -3.0}
    tol = 0.5
    _, lo, _ = top1_bounds(top, 3, tol)
    fails = 0
    for _ in range(2000):
        draws = [" a" if rng.random() < lo else rng.choice([" b", " c"]) for _ in range(32)]
        fails += not binomial_verdict("p", draws, top, 3, tol).passed
    assert fails <= 2000 * 2 * ALPHA + 1


# -- the probes against the fake server ----------------------------------------------------------------
class Sampler(Server):
    """Logprobs with top alternatives; `wrong` draws a token ranked 6th when sampling."""

    wrong = False
    stall = 0.0

    async def generate(self, req: dict, chat: bool, w) -> bool:
        sampled = (req.get("temperature") or 0) > 0
        if chat or not sampled:
            return await super().generate(req, chat, w)
        self.log.append(req)
        if self.stall:
            await asyncio.sleep(self.stall)
        n = int(req.get("max_tokens") or 16)
        tok = " w9" if self.wrong else " w0"
        lp = -6.0 if self.wrong else -0.2
        top = {f" w{i}": -0.2 - i for i in range(6)}
        chunk = {
            "choices": [
                {
                    "index": 0,
                    "text": tok,
                    "logprobs": {"tokens": [tok], "token_logprobs": [lp], "top_logprobs": [{**top, tok: lp}]},
                }
            ]
        }
        if not req.get("stream"):
            lps = {"tokens": [tok] * n, "token_logprobs": [lp] * n, "top_logprobs": [{**top, tok: lp}] * n}
            self.send_json(
                w,
                {
                    "choices": [{"index": 0, "text": tok * n, "logprobs": lps}],
                    "usage": {"completion_tokens": n},
                },
            )
            await w.drain()
            return True
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(n):
            data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            w.write(b"%x\r\n%s\r\n" % (len(data), data))
        data = b"data: [DONE]\n\n"
        w.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await w.drain()
        return True


class WrongSampler(Sampler):
    wrong = True


class StallingSampler(Sampler):
    stall = 1.0


def test_a_sampler_that_draws_outside_top_k_fails_only_the_sampled_probe():
    with serving(Sampler) as (url, _):
        ok = by_name(probe(url))
    assert ok["sampled"].passed and "all 24 within top-k/top-p" in ok["sampled"].detail
    assert "same seed, same tokens" in ok["sampled"].detail
    with serving(WrongSampler) as (url, _):
        res = by_name(probe(url))
    assert all(res[n].passed for n in ("completion", "chat", "long-decode", "batch", "batch-invariance"))
    s = res["sampled"]
    assert not s.passed and s.kind == "disagree" and s.phase == "decode"
    assert "24 of 24 sampled tokens the sampler may not draw" in s.detail and "top_k is 5" in s.detail
    assert list(res)[-1] == "concurrency"  # a wrong answer does not stop the ladder


def test_a_sampled_request_with_no_token_by_the_deadline_is_a_stall_and_ends_the_ladder():
    with serving(StallingSampler) as (url, _):
        results = ProbeRunner(url, ProbeConfig(request_timeout=10, stall_floor_s=0.5, stall_factor=5)).run()
        time.sleep(0.8)  # the server's stalled request ends before the server does
    s = results[-1]
    assert s.name == "sampled" and not s.passed and s.kind == "stall"
    assert "stall: no first token within 0.5 s" in s.detail
    assert (
        s.seconds >= 0.4
    )  # it waited for the floor; the detail says the stall, not the 10 s timeout, ended it


class FirstSampleCompiles(Sampler):
    """The first sampled request waits on a kernel build (FlashInfer's top-k/top-p JIT on a cold
    cache, as SGLang 0.5.16 on the H200 showed); later ones are answered at once."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        first = (req.get("temperature") or 0) > 0 and not any(
            (r.get("temperature") or 0) > 0 for r in self.log
        )
        self.stall = 1.2 if first else 0.0
        return await super().generate(req, chat, w)


@pytest.mark.slow
def test_a_sampled_request_that_waits_on_a_kernel_build_is_slow_not_a_stall():
    """While compilers work under the server the gap is a cold JIT cache: the probe waits until they
    are quiet and asks again (the note says so); with no compiler at work the same gap is a stall."""
    calls = []

    def compiling() -> list[str]:  # a build for the first 1.6 s of looking, then quiet
        calls.append(time.monotonic())
        return ["ninja", "nvcc"] if calls[-1] - calls[0] < 1.6 else []

    cfg = ProbeConfig(request_timeout=10, stall_floor_s=0.5, stall_factor=5)
    with serving(FirstSampleCompiles) as (url, _):
        runner = ProbeRunner(url, cfg)
        runner.compiling = compiling
        res = by_name(runner.run())
        time.sleep(1.0)
    s = res["sampled"]
    assert s.passed, s.detail
    assert s.detail.startswith("the first request waited") and "(ninja, nvcc: a cold JIT cache)" in s.detail
    with serving(FirstSampleCompiles) as (url, _):
        runner = ProbeRunner(url, cfg)
        runner.compiling = lambda: []
        results = runner.run()
        time.sleep(1.0)
    assert results[-1].name == "sampled" and results[-1].kind == "stall"


class LongPrompt(Server):
    """Reports max_model_len; prompts past 500 words get a prefill that disagrees with decoding,
    unless `healthy`: then a prompt ending in its own answer continues it."""

    healthy = False

    async def route(self, method: str, path: str, body: bytes, w) -> bool:
        if method == "GET" and path == "/v1/models":
            self.send_json(w, {"object": "list", "data": [{"id": "fake-model", "max_model_len": 2048}]})
            await w.drain()
            return True
        return await super().route(method, path, body, w)

    async def generate(self, req: dict, chat: bool, w) -> bool:
        prompt = "" if chat else req["prompt"]
        if len(prompt.split()) < 500 or req.get("stream"):
            return await super().generate(req, chat, w)
        self.log.append(req)
        n = int(req["max_tokens"])
        done = len(prompt.split(" To sum up,", 1)[1].split()) if self.healthy else 7 * len(prompt)
        toks = [f" t{done + i}" for i in range(n)]
        top = [{t: -0.1, " other": -3.0} for t in toks]
        lps = {"tokens": toks, "token_logprobs": [-0.1] * n, "top_logprobs": top}
        self.send_json(
            w,
            {
                "choices": [{"index": 0, "text": "".join(toks), "logprobs": lps}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n},
            },
        )
        await w.drain()
        return True


class HealthyLongPrompt(LongPrompt):
    healthy = True


def test_a_long_prompt_whose_prefill_disagrees_with_decoding_fails():
    with serving(HealthyLongPrompt) as (url, srv):
        ok = by_name(probe(url))["long-prompt"]
        long = [r for r in srv.log if len(r.get("prompt", "").split()) >= 500]
    assert ok.passed and ok.kind == "ok" and "of max_model_len 2048" in ok.detail, ok.detail
    assert len(long) == 2 and long[1]["prompt"].startswith(long[0]["prompt"])
    with serving(LongPrompt) as (url, _):
        bad = by_name(probe(url))["long-prompt"]
    assert not bad.passed and bad.kind == "disagree" and "not its own continuation" in bad.detail


class ByteFragmentLongPrompt(LongPrompt):
    """Disagrees like LongPrompt, but its answer starts with a byte fragment (vLLM 0.24.0 spells one
    ''): the answer's text cannot be fed back as its own tokens, so there is nothing to compare."""

    async def generate(self, req: dict, chat: bool, w) -> bool:
        prompt = "" if chat else req["prompt"]
        if len(prompt.split()) < 500 or req.get("stream"):
            return await super().generate(req, chat, w)
        self.log.append(req)
        n = int(req["max_tokens"])
        toks = ["", *(f" g{len(prompt) + i}" for i in range(n - 1))]
        lps = {"tokens": toks, "token_logprobs": [-0.1] * n, "top_logprobs": [{t: -0.1} for t in toks]}
        self.send_json(
            w,
            {
                "choices": [{"index": 0, "text": "".join(toks), "logprobs": lps}],
                "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": n},
            },
        )
        await w.drain()
        return True


def test_a_long_prompt_answer_that_cannot_be_fed_back_is_not_called_a_disagreement():
    with serving(ByteFragmentLongPrompt) as (url, _):
        r = by_name(probe(url))["long-prompt"]
    assert r.passed and "the continuation was not compared" in r.detail, r.detail


class Retokenizing(Server):
    """A model over token ids whose answers re-tokenize into other pieces when sent back as text,
    as random-weight gibberish does (seen on the H200: vLLM 0.24.0, an 8 B random Llama).

    The next token is a hash of every id before it, so the answer to the prompt plus its own first
    half (as ids) is the answer's second half. Generated tokens are spelled ' g4' or 'h7' (no space:
    glued to the one before), and the tokenizer splits text at spaces, so ' g4h7 g2' comes back as
    two other tokens. `ids`: the server honours `return_token_ids` (vLLM's, SGLang's from 0.5.23);
    `broken`: past 500 prompt tokens the prefill is wrong, so the first token after a long prefill
    is not the one decoding reaches (the fault the probe exists for)."""

    ids = True
    broken = False

    async def route(self, method: str, path: str, body: bytes, w) -> bool:
        if method == "GET" and path == "/v1/models":
            self.send_json(w, {"object": "list", "data": [{"id": "fake-model", "max_model_len": 2048}]})
            await w.drain()
            return True
        return await super().route(method, path, body, w)

    @staticmethod
    def spell(i: int) -> str:
        return f" g{i}" if i % 2 == 0 else f"h{i}"

    @staticmethod
    def next_id(ids: list[int], salt: str = "") -> int:
        return zlib.crc32((salt + ",".join(map(str, ids))).encode()) % 64

    async def generate(self, req: dict, chat: bool, w) -> bool:
        prompt = None if chat else req.get("prompt")
        ids = prompt if isinstance(prompt, list) else self.tokenize(prompt or "", True)
        if chat or req.get("stream") or len(ids) < 500:
            return await super().generate(req, chat, w)
        self.log.append(req)
        out: list[int] = []
        for _ in range(int(req["max_tokens"])):
            salt = "broken" if self.broken and not out else ""
            out.append(self.next_id(ids + out, salt))
        toks = [self.spell(i) for i in out]
        top = [{t: -0.1, " other": -3.0} for t in toks]
        choice: dict = {
            "index": 0,
            "text": "".join(toks),
            "logprobs": {"tokens": toks, "token_logprobs": [-0.1] * len(toks), "top_logprobs": top},
        }
        if self.ids and req.get("return_token_ids"):
            choice |= {"token_ids": out, "prompt_token_ids": ids}
        self.send_json(
            w, {"choices": [choice], "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out)}}
        )
        await w.drain()
        return True


class RetokenizingNoIds(Retokenizing):
    ids = False


class RetokenizingBroken(Retokenizing):
    broken = True


def test_an_answer_that_retokenizes_differently_is_fed_back_as_ids_and_not_called_wrong():
    """The old probe fed the answer back as text: the tokenizer read other pieces, the second
    prompt was not the first's continuation, and a healthy server was called wrong-output."""
    with serving(Retokenizing) as (url, srv):
        ok = by_name(probe(url))["long-prompt"]
        long = [r for r in srv.log if isinstance(r.get("prompt"), list)]
    assert ok.passed and ok.kind == "ok" and "(fed back as token ids)" in ok.detail, ok.detail
    assert len(long) == 1 and len(long[0]["prompt"]) > 500  # the prompt's ids + the first 8 answer ids
    with serving(RetokenizingNoIds) as (url, _):
        text = by_name(probe(url))["long-prompt"]
    assert (
        text.passed and "not compared" in text.detail and "re-tokenizes into other pieces" in text.detail
    ), text.detail
    with serving(RetokenizingBroken) as (url, _):
        bad = by_name(probe(url))["long-prompt"]
    assert not bad.passed and bad.kind == "disagree" and "not its own continuation" in bad.detail, bad.detail


def test_an_id_prompt_the_server_reads_as_another_count_is_not_compared():
    class Miscounting(Retokenizing):
        async def generate(self, req: dict, chat: bool, w) -> bool:
            if isinstance(req.get("prompt"), list):
                req = {**req, "prompt": req["prompt"][:-1]}  # drops an id, as a server that re-reads it might
            return await super().generate(req, chat, w)

    with serving(Miscounting) as (url, _):
        r = by_name(probe(url))["long-prompt"]
    assert (
        r.passed and "not compared" in r.detail and "981 token ids sent back as 980 prompt tokens" in r.detail
    ), r.detail


class FullBatchVariant(Server):
    """Greedy output of the reference prompt changes once more than 16 requests were in flight
    with it (each request remembers the largest batch it shared, as the scenario double does)."""

    inflight = 0

    async def generate(self, req: dict, chat: bool, w) -> bool:
        rid = object()
        if not hasattr(self, "peaks"):
            self.peaks: dict = {}
        self.inflight += 1
        self.peaks[rid] = self.inflight
        for k in self.peaks:
            self.peaks[k] = max(self.peaks[k], self.inflight)
        try:
            ours = not chat and req.get("prompt") == REFERENCE_PROMPT
            # Requests sent together find each other: the reference prompt, and whatever comes while
            # another is in flight, wait; the ladder's requests one at a time do not.
            if ours or self.inflight > 1:
                await asyncio.sleep(0.3)
            wrong = self.peaks[rid] > 16 and ours
            if wrong and not req.get("stream"):
                self.send_json(
                    w,
                    {"choices": [{"index": 0, "text": " WRONG at once"}], "usage": {"completion_tokens": 3}},
                )
                await w.drain()
                return True
            return await super().generate(req, chat, w)
        finally:
            self.inflight -= 1
            self.peaks.pop(rid, None)


def test_output_that_changes_only_at_full_concurrency_fails_the_concurrency_probe_only():
    with serving(FullBatchVariant) as (url, _):
        res = by_name(probe(url))
        capped = by_name(probe(url, max_batch=16))
    assert res["batch-invariance"].passed  # 8 at once: right
    c = res["concurrency"]
    assert not c.passed and c.phase == "load" and "at 32 concurrent requests differs from alone" in c.detail
    assert capped["concurrency"].passed and capped["concurrency"].detail.startswith("16 concurrent")


def test_sampled_reference_draws_against_the_reference():
    """n draws of the first token of each reference prompt (the fake server draws ' t0' always):
    a reference whose top-1 is ' t0' with a flat rest sees ' t0' too often; one that ranks ' t0'
    past the top-3 sees draws outside the allowed set."""

    def ref(top: dict[str, float]) -> Reference:
        steps = [Step(1, " t0", max(top.values()), top)]
        return Reference("m", None, "float32", [PromptReference("Hi", " t0", steps)])  # type: ignore[arg-type]

    class NDraws(Server):
        async def generate(self, req: dict, chat: bool, w) -> bool:
            if req.get("n"):
                choices = [{"index": i, "text": " t0"} for i in range(req["n"])]
                self.send_json(w, {"choices": choices, "usage": {"completion_tokens": req["n"]}})
                await w.drain()
                return True
            return await super().generate(req, chat, w)

    with serving(NDraws) as (url, _):
        confident = by_name(probe(url, reference=ref({" t0": -0.01, " x": -6.0, " y": -7.0})))
        flat = by_name(probe(url, reference=ref({" t0": -1.0, " x": -1.05, " y": -1.1, " z": -4})))
        ranked_out = by_name(
            probe(url, reference=ref({" a": -1.0, " b": -1.1, " c": -1.2, " d": -1.3, " t0": -5.0}))
        )
    assert confident["sampled-reference"].passed, confident["sampled-reference"].detail
    assert not flat["sampled-reference"].passed and "too often" in flat["sampled-reference"].detail
    assert "outside the reference's top-3" in ranked_out["sampled-reference"].detail


# -- the shipped scenarios of these faults -------------------------------------------------------------
FAULTS = {
    "llama31-8b-sm120-sampler-wrong-sglang": "sampled",
    "llama31-8b-h200-long-prompt-fp8kv-vllm": "long-prompt",
    "qwen25-14b-h200-concurrency-graph-vllm": "concurrency",
}


@pytest.mark.parametrize("name", FAULTS)
def test_each_users_fault_scenario_is_caught_by_its_probe_in_the_oracle(name):
    from bringup.scenario import load_scenario, scenario_path
    from tests.scenario.test_scenario_expect import oracle_outcome

    sc = load_scenario(scenario_path(name))
    assert not sc.blind and sc.expect[0].changes == ""
    for e in sc.expect:
        o = oracle_outcome(name, e.changes)
        assert o.status == e.status and (e.phase is None or o.phase == e.phase), (e.changes, o)
    assert oracle_outcome(name, "").detail == f"probe {FAULTS[name]} disagrees"


@pytest.mark.slow
@pytest.mark.parametrize("name", FAULTS)
def test_a_real_trial_of_each_users_fault_fails_the_same_probe_and_names_its_suspects(name, tmp_path):
    from bringup.core.datafiles import probe_implicates_by_probe
    from bringup.scenario import load_scenario, scenario_path
    from tests.scenario.test_scenario_expect import _real

    rc, d = _real(name, "", extra=("--runs-dir", str(tmp_path)))
    sc = load_scenario(scenario_path(name))
    bad = [p for p in d["probes"] if not p["passed"]]
    assert d["status"] == sc.expect[0].status and d["phase"] == sc.expect[0].phase, d.get("evidence")
    assert [p["name"] for p in bad] == [FAULTS[name]], bad
    assert d["failure_class"] == "wrong-output"
    assert d["implicates"] == probe_implicates_by_probe()[FAULTS[name]]
    fix = next(e for e in sc.expect if e.status == "works")
    rc, d = _real(name, fix.changes, extra=("--runs-dir", str(tmp_path)))
    assert rc == 0 and d["status"] == "works", d.get("evidence")
    if FAULTS[name] == "long-prompt":  # the double returns token ids: the answer goes back as ids
        assert "not its own continuation" in bad[0]["detail"]
        ok = next(p for p in d["probes"] if p["name"] == "long-prompt")
        assert "(fed back as token ids)" in ok["detail"], ok["detail"]


# -- the trial's verdict on a stall ----------------------------------------------------------------------
def test_a_stalled_probe_is_class_stall_with_the_schedulers_own_lines_as_evidence():
    """The trial's classification of a stalled sampled request (Trial._probe_class): class stall,
    the probe's line, then the scheduler's last lines (engines.yaml `probes: scheduler_log`)."""
    from bringup.engines.base import Engine
    from bringup.observe.outcome import ProbeResult
    from bringup.observe.signatures import Classification
    from bringup.trial.launch import Trial

    trial = Trial.__new__(Trial)
    trial.engine = Engine("vllm")
    lines = [
        "(EngineCore pid=1) INFO 12-01 20:00:00 [topk_topp_sampler.py:36] Using FlashInfer for top-p & top-k sampling.",
        *[
            f"(APIServer pid=2) INFO 12-01 20:00:{10 * i:02d} [loggers.py:236] Engine 000: Avg prompt throughput: "
            "0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%"
            for i in range(5)
        ],
    ]
    bad = ProbeResult(
        name="sampled",
        passed=False,
        detail="stall: no first token within 10.0 s",
        phase="decode",
        kind="stall",
    )
    unknown = Classification("unknown", "decode", [], "")
    cls, status = trial._probe_class(unknown, "fails", bad, lines, "decode")
    assert cls.failure_class == "stall" and cls.phase == "decode" and status == "fails"
    assert cls.evidence[0] == "probe sampled: stall: no first token within 10.0 s"
    assert sum("Running: 1 reqs" in e for e in cls.evidence) == 3  # the last three scheduler lines
    assert any("Using FlashInfer for top-p & top-k sampling" in e for e in cls.evidence)
    assert "while the scheduler kept logging running requests" in cls.hint
    assert cls.implicates[:2] == ["--sampling-backend", "env:VLLM_USE_FLASHINFER_SAMPLER"]
