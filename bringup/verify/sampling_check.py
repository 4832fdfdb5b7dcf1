"""Is a sampled token one the sampler was allowed to draw? The arithmetic of the sampled probes.

Greedy probes never run the top-k/top-p sampling kernels (FlashInfer's on GPUs), so a broken
sampler passes them all. Two checks, both pure functions here so they are tested without a server:

- `allowed`: a drawn token against the server's own top logprobs of that step. A healthy sampler
  never draws a token ranked at or past top_k, nor one whose higher-ranked tokens already hold
  top_p of the probability. Deterministic: only rounding at the boundary (a near tie with the k-th
  token, a cumulative mass within `MASS_SLACK` of top_p) can raise a false alarm, and the slack
  absorbs it.
- `binomial_verdict`: draws of one first token against the reference's float32 distribution,
  restricted to its top-k. The count of the reference's top-1 must be likely under every
  distribution within the precision's logprob tolerance; a two-sided binomial test at level
  `ALPHA` per prompt (the stated false-alarm rate) catches a sampler that ignores the
  probabilities (uniform over the top-k) or ignores the temperature (always the top-1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MASS_SLACK = 0.02  # absolute probability: bf16 logits move a cumulative mass by ~1e-2 at most
RANK_TIE_NATS = 0.05  # a token this close to the k-th one may be ranked either side of it
ALPHA = 1e-4  # per prompt and side of the binomial test: the false-alarm rate of a healthy server


def allowed(chosen: str, chosen_lp: float, top: dict[str, float], top_k: int, top_p: float) -> str | None:
    """Why `chosen` (with logprob `chosen_lp`) could not have been drawn, or None if it could.

    `top` is the server's top logprobs of the step (the chosen token may be among them). The
    logprobs may be the raw model's (vLLM's default logprobs mode) or after temperature: the mass
    of the tokens above the chosen one only grows as the temperature falls below 1, so the raw
    mass is a lower bound of what the sampler saw, and a violation of it is one in both cases.
    """
    if not math.isfinite(chosen_lp):
        return f"{chosen!r} has logprob {chosen_lp}"
    above = sorted((v for k, v in top.items() if k != chosen and v > chosen_lp + RANK_TIE_NATS), reverse=True)
    if top_k > 0 and len(above) >= top_k:
        return (
            f"{chosen!r} (logprob {chosen_lp:.2f}) is ranked {len(above) + 1} or lower: "
            f"{len(above)} tokens are more likely, top_k is {top_k}"
        )
    mass = sum(math.exp(v) for v in above)
    if top_p < 1.0 and mass >= top_p + MASS_SLACK:
        return (
            f"{chosen!r} (logprob {chosen_lp:.2f}): the {len(above)} more likely tokens already hold "
            f"{mass:.3f} of the probability, top_p is {top_p}"
        )
    return None


def _binom_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p)."""
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(x + 1))


@dataclass
class DrawVerdict:
    passed: bool
    detail: str


def top1_bounds(top: dict[str, float], top_k: int, tol: float) -> tuple[str, float, float]:
    """The reference's top-1 and the range of its share of the top-k under logprob errors of `tol`."""
    ranked = sorted(top.items(), key=lambda kv: kv[1], reverse=True)[:top_k]
    first, l1 = ranked[0]
    rest = [v for _, v in ranked[1:]]
    lo = math.exp(l1 - tol) / (math.exp(l1 - tol) + sum(math.exp(v + tol) for v in rest))
    hi = math.exp(l1 + tol) / (math.exp(l1 + tol) + sum(math.exp(v - tol) for v in rest))
    return first, lo, hi


def outside_reference(draw: str, top: dict[str, float], top_k: int, tol: float) -> bool:
    """A draw the reference says no sampler at top_k could make, even with the server's logits
    `tol` nats off: outside the reference's top list and clearly below its k-th token."""
    if draw in top:
        ranked = sorted(top.values(), reverse=True)
        kth = ranked[min(top_k, len(ranked)) - 1]
        return top[draw] < kth - 2 * tol
    ranked = sorted(top.values(), reverse=True)
    if len(ranked) <= top_k:
        return False  # the reference lists no more than the allowed set: nothing known past it
    return ranked[top_k - 1] - ranked[-1] >= 2 * tol


def _clean(text: str) -> bool:
    """A token text that names one token: not empty, not part of a UTF-8 character (U+FFFD; a
    server may also hold such a fragment back and send nothing)."""
    return bool(text) and "\ufffd" not in text


def binomial_verdict(
    prompt: str, draws: list[str], top: dict[str, float], top_k: int, tol: float, alpha: float = ALPHA
) -> DrawVerdict:
    """The draws of one step against the reference's top-k distribution (see the module doc).

    Draws whose text cannot name a token (empty, a byte fragment) are left out, and so are such
    tokens from the reference's top-k: the test is then on the draws among the other tokens,
    whose shares the reference still gives (renormalized). A reference whose top-1 is such a
    token gets the membership check only."""
    kept = [d for d in draws if _clean(d)]
    bad = [d for d in kept if outside_reference(d, top, top_k, tol)]
    if bad:
        return DrawVerdict(
            False,
            f"{prompt!r}: {len(bad)} of {len(draws)} draws outside the reference's top-{top_k} "
            f"(e.g. {bad[0]!r}; reference top: {_show_top(top)})",
        )
    ranked = sorted(top.items(), key=lambda kv: kv[1], reverse=True)[:top_k]
    if not _clean(ranked[0][0]):
        return DrawVerdict(
            True, f"{prompt!r}: {len(kept)} draws in the top-{top_k} (its top-1 is a byte fragment)"
        )
    allowed_top = {k: v for k, v in ranked if _clean(k)}
    first, lo, hi = top1_bounds(allowed_top, top_k, tol)
    n, x = len(kept), sum(d == first for d in kept)
    low_tail = _binom_cdf(x, n, lo)
    high_tail = 1.0 - _binom_cdf(x - 1, n, hi)
    if low_tail < alpha or high_tail < alpha:
        side = "too rarely" if low_tail < alpha else "too often"
        return DrawVerdict(
            False,
            f"{prompt!r}: the reference's top-1 {first!r} drawn {x} of {n} times, {side} for a share "
            f"in [{lo:.2f}, {hi:.2f}] (binomial tail {min(low_tail, high_tail):.1e} < {alpha:g})",
        )
    return DrawVerdict(True, f"{prompt!r}: top-1 {first!r} {x}/{n} within [{lo:.2f}, {hi:.2f}]")


def _show_top(top: dict[str, float]) -> str:
    return ", ".join(f"{k!r} {v:.2f}" for k, v in sorted(top.items(), key=lambda kv: -kv[1])[:5])
