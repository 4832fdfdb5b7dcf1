"""Probes that use the server as its users do: sampling, a long prompt, the full batch.

The first rungs of the ladder (bringup/verify/probes.py) decode greedily, with short prompts and a batch of
8. Users sample with temperature, top-p and top-k (kernels greedy decoding never runs: FlashInfer's
top-k/top-p sampler on GPUs), send prompts near the maximum length (chunked prefill) and fill the
batch. These probes run last, so the cheap ones decide first; one that cannot apply passes with
kind "skipped" and says why (no reference, no logprobs, no maximum length reported).

- sampled: a streamed request with temperature, top_p, top_k and a seed. Every token must be
  one the sampler could draw from the server's own top logprobs (bringup/verify/sampling_check.py); the
  first token must come within a deadline derived from the greedy request's measured timing (else
  a stall: kind "stall"); tokens must come at a rate comparable to greedy decoding; the same seed
  again gives the same tokens where the engine promises it (engines.yaml `probes: seeded`).
- sampled-reference: n draws of the first token of each reference prompt, against the reference's
  float32 top-k distribution (a binomial test with false-alarm rate sampling_check.ALPHA per prompt).
- long-prompt: one prompt at `long_prompt_fraction` of the effective maximum length (read from
  /v1/models `max_model_len`), so the engine prefills it in chunks; then the prompt followed by the
  first half of its own greedy answer, as token ids where the server returns them: the second
  half must come back (the prefill path against the decode path).
- concurrency: `min(max batch, concurrency_cap)` requests at once, copies of the reference prompt
  among them: each copy's greedy tokens must be the ones it gets alone.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from bringup.verify.reference import common_prefix
from bringup.verify.sampling_check import allowed, binomial_verdict

if TYPE_CHECKING:
    from bringup.verify.probes import ProbeRunner  # noqa: F401  (annotations only)

SAMPLED_PROMPT = "Once upon a time there was"
LONG_FILLER = "The engine reads each word of this long prompt and keeps its keys and values. "
RATE_FACTOR = 5.0  # sampled decoding slower than greedy by more than this is a fault, not noise
RATE_NOTICED_S = 0.05  # ... and a token taking longer than this
REFERENCE_DRAWS = 32  # draws per reference prompt in the sampled-reference probe
REFERENCE_TOP_K = 3  # top_k of those draws (the reference keeps 5: ties past the 3rd are known)


class Skip(Exception):
    """The probe cannot apply here; the message says why (the ladder records it as passed, skipped)."""


@dataclass
class Streamed:
    """One streamed completion, as it arrived."""

    text: str = ""
    tokens: list[str] = field(default_factory=list)
    logprobs: list[float | None] = field(default_factory=list)
    top: list[dict[str, float]] = field(default_factory=list)
    chunks: int = 0  # chunks that carried text or tokens (the count where no usage or tokens come)
    first_s: float | None = None  # request sent to first token
    last_s: float | None = None  # request sent to last token
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return int(self.usage.get("completion_tokens") or len(self.tokens) or self.chunks)

    def mark(self, t0: float) -> None:
        """A token arrived now (`t0`: when the request was sent)."""
        now = time.monotonic() - t0
        self.first_s = now if self.first_s is None else self.first_s
        self.last_s = now

    def rate(self) -> float | None:
        """Tokens per second after the first one (decode), None with fewer than 3 tokens."""
        if self.first_s is None or self.last_s is None or self.count < 3:
            return None
        return (self.count - 1) / max(self.last_s - self.first_s, 1e-6)


def _chunk(payload: str) -> dict | None:
    from bringup.verify.probe_http import Disagree, ServerBroke

    if payload == "[DONE]":
        return None
    try:
        chunk = json.loads(payload)
    except ValueError as e:
        raise Disagree(f"stream chunk is not JSON: {payload[:120]}") from e
    if chunk.get("error"):
        raise ServerBroke(f"error in stream: {str(chunk['error'])[:200]}")
    return chunk


def _take(out: Streamed, chunk: dict, t0: float) -> None:
    out.usage = chunk.get("usage") or out.usage
    for ch in chunk.get("choices") or []:
        lp = ch.get("logprobs") or {}
        got = bool(ch.get("text")) or bool(lp.get("tokens"))
        out.text += ch.get("text") or ""
        out.tokens += lp.get("tokens") or []
        out.logprobs += lp.get("token_logprobs") or []
        out.top += lp.get("top_logprobs") or []
        if got:
            out.chunks += 1
            out.mark(t0)


def stream(client: httpx.Client, body: dict, read_timeout: float | None = None) -> Streamed:
    """POST a streamed completion; a gap between chunks longer than `read_timeout` is a stall."""
    from bringup.verify.probe_http import Disagree, ServerBroke

    out = Streamed()
    timeout = httpx.Timeout(read_timeout, connect=10.0) if read_timeout else client.timeout
    t0 = time.monotonic()
    try:
        with client.stream("POST", "/v1/completions", json=body, timeout=timeout) as r:
            if r.status_code >= 500:
                raise ServerBroke(f"POST /v1/completions: HTTP {r.status_code}: {r.read()[:300]!r}")
            if r.status_code >= 400:
                raise Disagree(f"POST /v1/completions: HTTP {r.status_code}: {r.read()[:300]!r}")
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                chunk = _chunk(line[5:].strip())
                if chunk is None:
                    break
                _take(out, chunk, t0)
    except httpx.TimeoutException as e:
        where = "no first token" if out.first_s is None else f"no token after {len(out.tokens) or 1}"
        raise Disagree(
            f"stall: {where} within {timeout.read:.1f} s (streamed request, "
            f"{time.monotonic() - t0:.1f} s in all)",
            kind="stall",
        ) from e
    except httpx.HTTPError as e:
        raise ServerBroke(f"POST /v1/completions (stream): {type(e).__name__}: {e}") from e
    return out


def stall_deadline(runner: ProbeRunner) -> float:
    """How long one gap of a streamed request may last: STALL_FACTOR x the greedy request's
    time to first token (the largest gap a healthy request has), at least the floor, and never
    past the request timeout (the trial's hang deadline)."""
    cfg = runner.cfg
    g = runner.greedy
    base = max(g.first_s or 0.0, (g.last_s or 0.0) - (g.first_s or 0.0)) if g is not None else 0.0
    return min(max(cfg.stall_floor_s, cfg.stall_factor * base), cfg.request_timeout)


# -- sampled --------------------------------------------------------------------------------------
def _sampled_body(runner: ProbeRunner, stream_it: bool, seed: bool = False) -> dict:
    """The sampled request. Unseeded unless `seed`: vLLM serves a request that carries a `seed`
    with its PyTorch sampler, never FlashInfer's (per-request generators; vllm/v1/sample/ops/
    topk_topp_sampler.py forward_cuda, read in 0.24.0 and 0.32.0), so only an unseeded request
    runs the GPU top-k/top-p kernel this probe exists for."""
    cfg = runner.cfg
    body: dict[str, Any] = {
        "model": runner.model,
        "prompt": SAMPLED_PROMPT,
        "max_tokens": cfg.sample_tokens,
        "temperature": cfg.sample_temperature,
        "top_p": cfg.sample_top_p,
    }
    if seed:
        body["seed"] = cfg.sample_seed
    if cfg.top_k:
        body["top_k"] = cfg.sample_top_k
    if cfg.logprobs:
        body["logprobs"] = cfg.sample_top_k
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    if stream_it:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _violations(runner: ProbeRunner, s: Streamed) -> list[str]:
    cfg = runner.cfg
    top_k = cfg.sample_top_k if cfg.top_k else 0
    bad = []
    for i, (tok, lp, top) in enumerate(zip(s.tokens, s.logprobs, s.top, strict=False)):
        if lp is None or not top:
            continue
        why = allowed(tok, float(lp), top, top_k, cfg.sample_top_p)
        if why:
            bad.append(f"token {i}: {why}")
    return bad


def _rate_note(runner: ProbeRunner, s: Streamed) -> str:
    from bringup.verify.probe_http import Disagree

    greedy = runner.greedy.rate() if runner.greedy is not None else None
    rate = s.rate()
    if greedy is None or rate is None:
        return "rate not compared (too few tokens)"
    # Slower by the factor and by a time a user notices (scheduling noise on a busy host makes
    # sub-millisecond tokens vary several-fold without meaning anything).
    if rate * RATE_FACTOR < greedy and 1 / rate > RATE_NOTICED_S:
        raise Disagree(
            f"sampled decoding at {rate:.1f} tokens/s, greedy at {greedy:.1f}: more than "
            f"{RATE_FACTOR:g}x slower",
            kind="stall",
        )
    return f"{rate:.0f} tokens/s (greedy {greedy:.0f})"


def _seeded(runner: ProbeRunner, client: httpx.Client) -> Streamed:
    """One seeded sampled request (not streamed), its draws checked like the streamed one's."""
    from bringup.verify.probe_http import Disagree, finite_logprobs
    from bringup.verify.probe_http import post_json as _post

    data = _post(client, "/v1/completions", _sampled_body(runner, stream_it=False, seed=True))
    choice = (data.get("choices") or [{}])[0]
    finite_logprobs(choice)
    out = Streamed()
    _take(out, {"choices": [choice], "usage": data.get("usage")}, time.monotonic())
    bad = _violations(runner, out)
    if bad:
        raise Disagree(f"{len(bad)} of {len(out.tokens)} seeded draws the sampler may not draw: {bad[0]}")
    return out


def _same_seed(runner: ProbeRunner, client: httpx.Client) -> str:
    """Two requests with the same seed, alone: the same tokens (where the engine promises it)."""
    from bringup.verify.probe_http import Disagree, near_tie_divergence

    if not runner.cfg.seeded:
        return "same-seed repeat not checked (this engine does not promise seeded sampling)"
    first, second = _seeded(runner, client), _seeded(runner, client)
    again: list[str] | str = second.tokens or second.text
    ref: list[str] | str = first.tokens if isinstance(again, list) else first.text
    if again == ref:
        return "same seed, same tokens"
    agree = common_prefix(ref, again)
    if near_tie_divergence(ref, agree):
        return f"same seed agrees for {agree} tokens, then parts (a near tie)"
    raise Disagree(f"the same seed gave other tokens: {''.join(ref)[:50]!r} vs {''.join(again)[:50]!r}")


def probe_sampled(runner: ProbeRunner, client: httpx.Client) -> str:
    from bringup.verify.probe_http import Disagree, finite_logprobs

    cfg = runner.cfg
    runner.phase = "decode"
    deadline = stall_deadline(runner)
    s, waited = _stream_past_compiles(runner, client, _sampled_body(runner, stream_it=True), deadline)
    finite_logprobs({"logprobs": {"token_logprobs": s.logprobs}})
    if s.count < 1:
        raise Disagree("sampled request returned no tokens")
    bad = _violations(runner, s)
    if bad:
        raise Disagree(
            f"{len(bad)} of {len(s.tokens)} sampled tokens the sampler may not draw "
            f"(temperature {cfg.sample_temperature}, top_p {cfg.sample_top_p}, top_k "
            f"{cfg.sample_top_k if cfg.top_k else 'off'}): " + "; ".join(bad[:2])
        )
    checked = (
        f"all {len(s.tokens)} within top-k/top-p"
        if s.top
        else "membership not checked (this engine returns no top logprobs)"
    )
    rate = _rate_note(runner, s)
    seed = _same_seed(runner, client)
    return (
        f"{waited}{s.count} sampled tokens, first after {s.first_s or 0:.2f} s (deadline {deadline:.1f} s); "
        f"{checked}; {rate}; {seed}"
    )


COMPILE_POLL_S = 2.0


def _stream_past_compiles(
    runner: ProbeRunner, client: httpx.Client, body: dict, deadline: float
) -> tuple[Streamed, str]:
    """The streamed request, and a note when it had to wait for a kernel build. A gap past the stall
    deadline while compilers work under the server (runner.compiling: FlashInfer builds its
    top-k/top-p kernel on the first sampled request where nothing warmed it up, as SGLang 0.5.16 on
    the H200 did) is a cold JIT cache, not a stall: wait, bounded by the request timeout, until the
    compilers are quiet, then send the request again under the same deadline. A gap with no
    compiler at work is a stall, as before."""
    from bringup.verify.probe_http import Disagree

    try:
        return stream(client, body, read_timeout=deadline), ""
    except Disagree as e:
        if e.kind != "stall" or runner.compiling is None:
            raise
        t0 = time.monotonic()
        tools = set(runner.compiling())
        if not tools:
            raise
        while time.monotonic() - t0 < runner.cfg.request_timeout and not runner.stop.is_set():
            time.sleep(COMPILE_POLL_S)
            now = runner.compiling()
            if not now:
                break
            tools.update(now)
        waited = deadline + time.monotonic() - t0
        s = stream(client, body, read_timeout=deadline)
        return s, (
            f"the first request waited {waited:.0f} s while kernels compiled under the server "
            f"({', '.join(sorted(tools))}: a cold JIT cache), then: "
        )


# -- sampled against the reference ---------------------------------------------------------------
def _draws(runner: ProbeRunner, client: httpx.Client, prompt: str) -> list[str]:
    from bringup.verify.probe_http import post_json as _post

    body: dict[str, Any] = {
        "model": runner.model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 1.0,
        "top_k": REFERENCE_TOP_K,
        "n": REFERENCE_DRAWS,
    }
    if runner.cfg.ignore_eos:
        body["ignore_eos"] = True
    data = _post(client, "/v1/completions", body)
    return [c.get("text") or "" for c in data.get("choices") or []]


def probe_sampled_reference(runner: ProbeRunner, client: httpx.Client) -> str:
    from bringup.verify.probe_http import Disagree
    from bringup.verify.reference import tolerance

    cfg = runner.cfg
    if cfg.reference is None:
        raise Skip("no reference for this model (--reference): the draws have nothing to be compared with")
    if not cfg.top_k:
        raise Skip("this engine takes no top_k: the reference's top-k set does not apply")
    tol = tolerance(cfg.reference_precision).logprob_abs
    verdicts = []
    for p in cfg.reference.prompts:
        draws = _draws(runner, client, p.prompt)
        if len(draws) != REFERENCE_DRAWS:
            raise Skip(f"asked for n={REFERENCE_DRAWS} draws, got {len(draws)}: this server ignores `n`")
        verdicts.append(binomial_verdict(p.prompt, draws, p.steps[0].top, REFERENCE_TOP_K, tol))
    bad = [v for v in verdicts if not v.passed]
    if bad:
        raise Disagree(
            f"{len(bad)} of {len(verdicts)} prompts: draws unlike the reference's distribution: "
            + "; ".join(v.detail for v in bad[:2])
        )
    return (
        f"{len(verdicts)} prompts x {REFERENCE_DRAWS} draws (top_k {REFERENCE_TOP_K}, temperature 1) "
        f"agree with the reference's first-token distribution"
    )


# -- long prompt ----------------------------------------------------------------------------------
# Asked of the long prompt's answers: the tokens' ids. vLLM (>= 0.10.2, PR #22587; read in 0.24.0
# and 0.32.0) and SGLang (>= 0.5.23, PR #30917; not in 0.5.10 or 0.5.16) then return each choice's
# `token_ids` and `prompt_token_ids`; a server that does not know the field ignores it (pydantic's
# default), and engines.yaml `probes: token_ids: false` keeps it from one that rejects it.
TOKEN_IDS_FIELD = "return_token_ids"


class NotCompared(Exception):
    """The continuation cannot be lined up with the answer: the message says why."""


@dataclass
class LongAnswer:
    """One long-prompt completion, as the probe reads it."""

    tokens: list[str]  # logprobs.tokens
    top: list[dict[str, float]]  # logprobs.top_logprobs
    ids: list[int] | None  # the answer's token ids, where the server returns them
    prompt_ids: list[int] | None  # the prompt's, likewise
    prompt_tokens: int | None  # usage.prompt_tokens


def _int_list(v: Any) -> list[int] | None:
    ok = isinstance(v, list) and bool(v) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
    return list(v) if ok else None


def _answer_ids(choice: dict, tokens: list[str]) -> list[int] | None:
    """The answer's ids: `token_ids` (return_token_ids), or tokens spelled `token_id:N` (vLLM's
    `return_tokens_as_token_ids`)."""
    ids = _int_list(choice.get("token_ids"))
    if ids is not None:
        return ids
    if tokens and all(t.startswith("token_id:") and t[9:].isdigit() for t in tokens):
        return [int(t[9:]) for t in tokens]
    return None


def _read_long(data: dict) -> LongAnswer:
    choice = (data.get("choices") or [{}])[0]
    lp = choice.get("logprobs") or {}
    tokens = list(lp.get("tokens") or [])
    n = (data.get("usage") or {}).get("prompt_tokens")
    return LongAnswer(
        tokens=tokens,
        top=[t or {} for t in lp.get("top_logprobs") or [{}] * len(tokens)],
        ids=_answer_ids(choice, tokens),
        prompt_ids=_int_list(choice.get("prompt_token_ids")),
        prompt_tokens=n if isinstance(n, int) and not isinstance(n, bool) else None,
    )


def long_prompt(tokens: int) -> str:
    """About `tokens` tokens of plain words (most tokenizers spend one per word here)."""
    words = LONG_FILLER.split()
    return " ".join(words[i % len(words)] for i in range(max(tokens, 1))) + " To sum up,"


def probe_long_prompt(runner: ProbeRunner, client: httpx.Client) -> str:
    """A prompt at a fraction of the maximum length, then the same prompt followed by the first
    half of its own answer: the second half must come back. The first request builds the answer's
    KV cache by decoding, the second by (chunked) prefill; a broken long prefill gives garbled
    text that is consistent with itself but not with the decode path. A first difference is
    allowed where the server's own top logprobs call it a near tie (`tie_gap` of the precision).

    The first half goes back as token ids where the server returns them (`return_token_ids`), so
    the second prompt is the first's continuation token for token; as text only where the round
    trip is verified (the server counts exactly half more prompt tokens): gibberish from random
    weights re-tokenizes into other pieces (seen on the H200 with vLLM 0.24.0), and comparing the
    continuation of another prompt would call a healthy server wrong."""
    from bringup.verify.probe_http import Disagree

    cfg = runner.cfg
    runner.phase = "decode"
    if not runner.max_model_len:
        raise Skip("the server reports no maximum length (/v1/models max_model_len)")
    if not cfg.logprobs:
        raise Skip("this engine returns no token logprobs: the continuation cannot be lined up by token")
    target = int(runner.max_model_len * cfg.long_prompt_fraction)
    prompt = long_prompt(int(target / _filler_tokens_per_word(runner, client)) - 8)
    half = max(cfg.short_tokens // 2, 1)
    t0 = time.monotonic()
    first = _long(runner, client, prompt, 2 * half, top=5)
    took = time.monotonic() - t0
    n_prompt = first.prompt_tokens or 0
    if len(first.tokens) < 2 * half:
        raise Disagree(f"a {n_prompt}-token prompt got {len(first.tokens)} tokens, asked for {2 * half}")
    head = (
        f"{n_prompt} prompt tokens ({n_prompt / runner.max_model_len:.0%} of max_model_len "
        f"{runner.max_model_len}) in {took:.1f} s"
    )
    try:
        note = _by_ids(runner, client, prompt, first, half)
        if note is None:
            note = _by_text(runner, client, prompt, first, half)
    except NotCompared as e:
        return f"{head}, answered; the continuation was not compared: {e}"
    return (
        f"{head}; prefilling its first {half} answer tokens gives the other {half}{note} "
        "(no long-prompt reference: compared with the decode path)"
    )


def _by_ids(
    runner: ProbeRunner, client: httpx.Client, prompt: str, first: LongAnswer, half: int
) -> str | None:
    """The continuation with the answer's first half fed back as token ids; None where the server
    gives no ids (or takes no id prompt): then text is tried."""
    from bringup.verify.probe_http import Disagree

    if first.ids is None or len(first.ids) < 2 * half:
        return None
    prompt_ids = first.prompt_ids or _tokenize(runner, client, prompt)
    if prompt_ids is None or (first.prompt_tokens is not None and len(prompt_ids) != first.prompt_tokens):
        return None  # the prompt's ids are not known, or not the ones the completion counted
    ids = prompt_ids + first.ids[:half]
    try:
        second = _long(runner, client, ids, half, top=5)
    except Disagree as e:
        if e.status is not None and e.kind == "disagree":
            return None  # an id prompt refused (HTTP 4xx): text is tried instead
        raise
    read = second.prompt_tokens if second.prompt_ids is None else len(second.prompt_ids)
    if (read is not None and read != len(ids)) or (
        second.prompt_ids is not None and second.prompt_ids != ids
    ):
        raise NotCompared(f"the server read the {len(ids)} token ids sent back as {read} prompt tokens")
    if second.ids is not None:
        want: list = first.ids[half : 2 * half]
        got: list = second.ids
    else:
        want, got = first.tokens[half : 2 * half], second.tokens
    return _continues(runner, want, got, first, second) + " (fed back as token ids)"


def _by_text(runner: ProbeRunner, client: httpx.Client, prompt: str, first: LongAnswer, half: int) -> str:
    """The continuation with the first half fed back as text, compared only where the server read
    that text as exactly `half` more prompt tokens (usage.prompt_tokens)."""
    fed = first.tokens[:half]
    if _fragment(fed):
        # A byte fragment has no text of its own (vLLM 0.24.0 spells it ''): the text read back is
        # missing bytes. Seen on real vLLM on the H200 with a random-weight 8 B Llama.
        raise NotCompared(f"its first {half} tokens hold a byte fragment, which text cannot feed back")
    second = _long(runner, client, prompt + "".join(fed), half, top=5)
    if first.prompt_tokens is None or second.prompt_tokens is None:
        raise NotCompared(
            "the server returns no token ids and no prompt token counts: the text fed back cannot be "
            "checked to be the answer's own tokens"
        )
    extra = second.prompt_tokens - first.prompt_tokens
    if extra != half:
        raise NotCompared(
            f"the server returns no token ids, and the answer's first {half} tokens fed back as text "
            f"were read as {extra} prompt tokens (text re-tokenizes into other pieces)"
        )
    want = first.tokens[half : 2 * half]
    return (
        _continues(runner, want, second.tokens, first, second) + " (fed back as text, read as the same count)"
    )


def _fragment(tokens: list[str]) -> bool:
    """Whether a token list holds a piece of a UTF-8 character (no text of its own, in any
    engine's spelling: empty, U+FFFD, `bytes:`)."""
    return any(t == "" or "\ufffd" in t or t.startswith("bytes:") for t in tokens)


def _tokenize(runner: ProbeRunner, client: httpx.Client, prompt: str) -> list[int] | None:
    """The prompt's ids from the server's /tokenize (vLLM, SGLang: `{"tokens": [...]}`), None where
    it has none."""
    from bringup.guard.bounded import CapHit
    from bringup.verify.probe_http import fetch

    try:
        status, raw = fetch(client, "POST", "/tokenize", {"model": runner.model, "prompt": prompt})
        data = json.loads(raw) if status == 200 else {}
    except (httpx.HTTPError, CapHit, ValueError):
        return None
    return _int_list(data.get("tokens")) if isinstance(data, dict) else None


def _filler_tokens_per_word(runner: ProbeRunner, client: httpx.Client, words: int = 64) -> float:
    """The filler's tokens per word on this server's tokenizer: one short request's usage (a
    tokenizer may spend several tokens on a word; the prompt must stay at its fraction)."""
    data = runner._completion(client, long_prompt(words), 1)
    n = (data.get("usage") or {}).get("prompt_tokens")
    return max(n / words, 0.5) if isinstance(n, int) and n > 0 else (runner.tokens_per_word or 1.0)


def _long(
    runner: ProbeRunner, client: httpx.Client, prompt: str | list[int], n: int, top: int = 1
) -> LongAnswer:
    from bringup.verify.probe_http import Disagree, finite_logprobs
    from bringup.verify.probe_http import post_json as _post

    body: dict[str, Any] = {"model": runner.model, "prompt": prompt, "max_tokens": n, "temperature": 0}
    body["logprobs"] = top
    if runner.cfg.ignore_eos:
        body["ignore_eos"] = True
    if runner.cfg.token_ids:
        body[TOKEN_IDS_FIELD] = True
    data = _post(client, "/v1/completions", body)
    choice = (data.get("choices") or [{}])[0]
    finite_logprobs(choice)
    if not (choice.get("logprobs") or {}).get("tokens"):
        raise Disagree(f"long prompt: no tokens in the answer: {str(data)[:200]}")
    return _read_long(data)


def _continues(runner: ProbeRunner, want: list, got: list, first: LongAnswer, second: LongAnswer) -> str:
    """Whether `got` (the prefill path's answer) continues `want` (the decode path's second half),
    compared by id or by text; the answers' tokens and top logprobs name them. A first difference
    is allowed where either path's own top logprobs hold both tokens within the precision's
    `tie_gap` (prefill and decode kernels round differently)."""
    from bringup.verify.probe_http import Disagree, tie_break

    k = common_prefix(want, got)
    if k >= min(len(want), len(got)):
        return ""
    half = len(first.tokens) - len(want)
    want_text = first.tokens[half:]
    w, g = want_text[k], second.tokens[k]
    tops = [t[i] if i < len(t) else None for t, i in ((second.top, k), (first.top, half + k))]
    if tie_break(w, g, tops, runner.tie_gap) is not None:
        return f" (a near tie at token {k}: {g!r} vs {w!r})"
    raise Disagree(
        f"a long prompt's answer is not its own continuation: after {k} tokens the prefill path "
        f"says {''.join(second.tokens[k:])[:40]!r}, the decode path {''.join(want_text[k:])[:40]!r}"
    )


# -- full concurrency -----------------------------------------------------------------------------
def concurrency(runner: ProbeRunner) -> int:
    cfg = runner.cfg
    return max(1, min(cfg.max_batch or cfg.concurrency_cap, cfg.concurrency_cap))


def probe_concurrency(runner: ProbeRunner, client: httpx.Client) -> str:
    from bringup.verify.probe_http import (
        BATCH_PROMPTS,
        REFERENCE_PROMPT,
        Disagree,
        finite_logprobs,
        tokens_of,
        top_of,
    )

    cfg = runner.cfg
    runner.phase = "load"
    n = concurrency(runner)
    if runner.alone is None:
        raise Disagree("not compared: no greedy output of the reference prompt alone")
    if n <= cfg.batch_size:
        raise Skip(f"the maximum batch ({n}) is no larger than the batch probe's {cfg.batch_size}")
    copies = max(2, n // 8)
    prompts = [
        REFERENCE_PROMPT if i % (n // copies) == 0 else BATCH_PROMPTS[i % len(BATCH_PROMPTS)]
        for i in range(n)
    ]
    limits_hint = httpx.Limits(max_connections=n + 4)
    with httpx.Client(
        base_url=str(client.base_url), timeout=client.timeout, limits=limits_hint, headers=client.headers
    ) as wide:
        with ThreadPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(runner._completion, wide, p, cfg.short_tokens) for p in prompts]
            outs = [f.result() for f in futures]
    for o in outs:
        finite_logprobs(o["choices"][0])
    copies_out = [o["choices"][0] for p, o in zip(prompts, outs, strict=True) if p == REFERENCE_PROMPT]
    parted = _parted(runner, [(tokens_of(c), top_of(c)) for c in copies_out], n)
    note = f" ({parted} part after a near tie)" if parted else ""
    return (
        f"{n} concurrent requests; {len(copies_out)} copies of the reference prompt agree with it alone{note}"
    )


def _parted(runner: ProbeRunner, copies: list[tuple[list[str] | str, list]], n: int) -> int:
    """How many copies part from the output alone at a near tie (probe_http.parting); a copy that
    parts where the server was confident fails."""
    from bringup.verify.probe_http import Disagree, parting

    alone = runner.alone
    parted = 0
    for got, top in copies:
        if got == alone:
            continue
        if parting(alone, got, (runner.alone_top, top), runner.tie_gap) is None:
            raise Disagree(
                f"greedy output at {n} concurrent requests differs from alone: "
                f"{''.join(alone)[:50]!r} vs {''.join(got)[:50]!r}"
            )
        parted += 1
    return parted
