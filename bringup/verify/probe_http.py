"""The HTTP side of the probes: one request with a capped body, and the two ways a probe fails.

Shared by the probe ladder (probes.py) and the probes that use the server as users do
(probes_user.py), so that neither imports the other.
"""

from __future__ import annotations

import json
import math

import httpx

from bringup.guard.bounded import CapHit, read_body

_NAN_JSON = "Out of range float values are not JSON compliant"  # CPython json, allow_nan=False


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


def tokens_of(choice: dict) -> list[str] | str:
    lp = choice.get("logprobs") or {}
    return lp.get("tokens") or choice.get("text", "")


def unit_of(tokens: list[str] | str) -> str:
    return "tokens" if isinstance(tokens, list) else "characters"


def show_tokens(tokens: list[str] | str) -> str:
    s = "".join(tokens) if isinstance(tokens, list) else tokens
    return repr(s[:60])
