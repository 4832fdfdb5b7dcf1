"""The HTTP side of the probes: one request with a capped body, and the two ways a probe fails.

Shared by the probe ladder (probes.py) and the probes that use the server as users do
(probes_user.py), so that neither imports the other.
"""

from __future__ import annotations

import json
import math
import re

import httpx

from bringup.guard.bounded import CapHit, read_body

_NAN_JSON = "Out of range float values are not JSON compliant"  # CPython json, allow_nan=False
# A request longer than the server's maximum length, in the engines' words: vLLM "This model's
# maximum context length is 2048 tokens. However, you requested ..." (serving_engine.py) and
# "'max_tokens' or 'max_completion_tokens' is too large: ... maximum context length" (newer),
# "The decoder prompt (length N) is longer than the maximum model length of M"; SGLang "Requested
# token count exceeds the model's maximum context length" and "The input (N tokens) is longer than
# the model's context length (M tokens)". The request was too long, the output is not wrong.
_TOO_LONG = re.compile(
    r"maximum (?:context|model) length|longer than the (?:maximum model|model's context) length"
    r"|exceeds the model's maximum context length",
    re.IGNORECASE,
)


class ServerBroke(Exception):
    """HTTP 5xx or a dropped connection: the server failed, the ladder stops."""


class Disagree(Exception):
    """The server answered, but not consistently or not correctly."""

    def __init__(self, msg: str, kind: str = "disagree", status: int | None = None):
        super().__init__(msg)
        self.kind = kind
        self.status = status  # the HTTP status of a refused request (4xx), None otherwise


def fetch(client: httpx.Client, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    """Status and body of one request, the body read with a cap (bringup/guard/bounded.py): a server
    that answers without end is an error that says the cap was hit, not memory without end."""
    with client.stream(method, path, json=body) as r:
        return r.status_code, read_body(r.iter_bytes(), f"{method} {path}")


def post_json(client: httpx.Client, path: str, body: dict) -> dict:
    try:
        status, raw = fetch(client, "POST", path, body)
    except CapHit as e:
        raise ServerBroke(str(e)) from e
    except httpx.TimeoutException as e:
        raise ServerBroke(
            f"POST {path}: no answer within {client.timeout.read} s ({type(e).__name__})"
        ) from e
    except httpx.HTTPError as e:
        raise ServerBroke(f"POST {path}: {type(e).__name__}: {e}") from e
    text = raw.decode("utf-8", errors="replace")
    if status >= 500:
        raise ServerBroke(f"POST {path}: HTTP {status}: {text[:300]}")
    if status >= 400:
        # Python's json refuses NaN/inf when the server serializes logprobs strictly (vLLM answers
        # HTTP 400 with this message): the output is non-finite, not the request malformed.
        nan = _NAN_JSON in text
        if not nan and _TOO_LONG.search(text):
            raise Disagree(
                f"POST {path}: HTTP {status}: the request is longer than the server's maximum length "
                f"(its words: {text[:300]})",
                kind="too-long",
                status=status,
            )
        raise Disagree(
            f"POST {path}: HTTP {status}: {text[:300]}"
            + (" (non-finite logprobs: the output is NaN/inf)" if nan else ""),
            kind="nan" if nan else "disagree",
            status=status,
        )
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise Disagree(f"POST {path}: response is not JSON: {text[:200]}") from e
    if not isinstance(data, dict):
        raise Disagree(f"POST {path}: response is not a JSON object: {text[:200]}")
    return data


# A GPU's batched kernels reduce in another order than a single request's, so bf16/fp16 logits
# differ in their last bits and greedy decoding may part where two tokens nearly tie: seen on the
# H200 with transformers' continuous batching on a random-weight 8 B model (tests/data/gpu/,
# parting after about 5 tokens), and the reason vLLM documents batch invariance as an opt-in
# mode. A kernel that is wrong parts at once. So parting is allowed only after a common prefix
# of this many tokens (or characters, when the engine returns text without tokens).
NEAR_TIE_AFTER_TOKENS = 4
NEAR_TIE_AFTER_CHARS = 12  # about 4 tokens of 3 characters


def near_tie_divergence(reference: list[str] | str, agree: int) -> bool:
    """Whether parting after `agree` common tokens (characters) is numerics, not a wrong kernel."""
    need = NEAR_TIE_AFTER_TOKENS if isinstance(reference, list) else NEAR_TIE_AFTER_CHARS
    return agree >= need


# With token logprobs (two per step: the greedy token and the runner-up), a parting before that
# many tokens is allowed too where the two tokens lie within the precision's `tie_gap`
# (tolerances.yaml) of each other in either request's own top logprobs: a near tie that batched
# bf16 kernels may break the other way (random weights have many: gaps of hundredths of a nat; on
# the H200 one of 15 copies of the reference prompt parted so, tests/data/gpu/h200-2026-12-02-vllm).
# A wrong kernel parts where the server itself was confident.
TIE_LOGPROBS = 2


def tie_break(a: str, b: str, tops: list[dict | None], gap: float) -> float | None:
    """The logprob gap of tokens `a` and `b` in the first of `tops` that holds both, if under `gap`."""
    for top in tops:
        if top and a in top and b in top and abs(top[a] - top[b]) < gap:
            return abs(top[a] - top[b])
    return None


def parting(alone: list[str] | str, got: list[str] | str, tops: tuple[list, list], gap: float) -> str | None:
    """Why greedy output `got` may part from `alone` (numerics, not a wrong kernel), or None: after
    NEAR_TIE_AFTER_TOKENS common tokens, or at a near tie of either request's top logprobs
    (`tops`: each request's top_logprobs, one dict a step)."""
    agree = 0
    for x, y in zip(alone, got, strict=False):
        if x != y:
            break
        agree += 1
    if near_tie_divergence(alone, agree):
        return f"agree for {agree} {unit_of(alone)}, then part"
    if isinstance(alone, list) and isinstance(got, list) and agree < min(len(alone), len(got)):
        at = [t[agree] if agree < len(t) else None for t in tops]
        d = tie_break(alone[agree], got[agree], at, gap)
        if d is not None:
            return (
                f"part at token {agree}, a near tie ({alone[agree]!r} vs {got[agree]!r}, {d:.3f} nats apart)"
            )
    return None


REFERENCE_PROMPT = "The quick brown fox"
BATCH_PROMPTS = [
    "Once upon a time there was",
    "The capital of France is",
    "Hello, how are you today?",
    "Numbers: 1 2 3 4",
    "The sun rises in the",
    "A server answers requests and",
    "Water boils at one hundred",
    "GPUs have memory and",
    "Colors: red green blue",
    "Please answer briefly and",
    "Attention, decode, prefill",
    "Say hello in one sentence.",
    "What is two plus two?",
    "The engine loads weights",
    "It learned words, then",
]


def finite_logprobs(choice: dict) -> list[float]:
    lp = choice.get("logprobs") or {}
    vals = lp.get("token_logprobs")
    if vals is None and isinstance(lp.get("content"), list):  # chat format
        vals = [c.get("logprob") for c in lp["content"]]
    vals = [v for v in (vals or []) if v is not None]
    bad = [v for v in vals if not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v)]
    if bad:
        raise Disagree(f"non-finite logprobs in output ({len(bad)} of {len(vals)}): {bad[:3]}", kind="nan")
    return vals


def top_of(choice: dict) -> list:
    """The choice's top logprobs, one dict (or None) a step."""
    return list((choice.get("logprobs") or {}).get("top_logprobs") or [])


def tokens_of(choice: dict) -> list[str] | str:
    lp = choice.get("logprobs") or {}
    return lp.get("tokens") or choice.get("text", "")


def unit_of(tokens: list[str] | str) -> str:
    return "tokens" if isinstance(tokens, list) else "characters"


def show_tokens(tokens: list[str] | str) -> str:
    s = "".join(tokens) if isinstance(tokens, list) else tokens
    return repr(s[:60])
