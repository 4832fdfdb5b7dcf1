"""When a tuned configuration beats the baseline beyond noise, and when repeats may stop.

After the search, the baseline (the working configuration) and the best few points (finalists)
are measured again, interleaved (bringup/tuning/repeats.py). This module decides from those fresh
samples only: the search's own measurement of a finalist is why it was chosen, so it is biased
upwards (the winner's curse) and is never part of the test.

The rule, stated once (``RepeatRule.describe``):

- A finalist beats the baseline when the one-sided exact Mann-Whitney U test (bringup/tuning/
  stats.py) gives p <= alpha', AND its median gain over the baseline's median exceeds the measured
  noise, the larger robust sigma (1.4826 x MAD) of the two sample sets.
- alpha' = alpha / (finalists x looks): Bonferroni over the finalists compared with the baseline
  and over the rounds at which the test is looked at (so stopping as soon as it passes does not
  inflate the false-verdict rate). Looks are only the rounds at which the exact test can reach
  alpha' at all (with 4 samples each the smallest p is 1/70).
- A finalist leaves the repeats when a run of it has failed requests or fails to launch (as vLLM's
  tune_speculative_k rejects such runs), or when, after ``min_rounds``, its median is not above the
  baseline's (dropping cannot make a false verdict more likely).
- The order is settled when a finalist passes and has the highest median of those still in, or
  none is left, or ``max_rounds`` is spent; otherwise another round is measured.
- A baseline that fails (its launch, or every run of it) is beaten by any finalist that works:
  the best median wins after ``min_rounds``, no test needed.

Otherwise the verdict is "no configuration beats the baseline beyond noise here" and the baseline
is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from bringup.tuning.stats import (
    mann_whitney_greater,
    median,
    min_p_value,
    robust_sigma,
)

TEST_NAME = "one-sided exact Mann-Whitney U"
NO_WINNER = "no configuration beats the baseline beyond noise here"


@dataclass(frozen=True)
class RepeatRule:
    finalists: int = 2  # the best points of the search measured again beside the baseline
    min_rounds: int = 3  # fresh samples of each before anything is dropped or decided
    max_rounds: int = 6  # the repeat budget: rounds of (baseline, finalist, finalist, ...)
    alpha: float = 0.05  # the family-wise false-verdict rate the test is held to

    def looks(self, finalists: int | None = None) -> list[int]:
        """The rounds at which the test is looked at: from the first round at which the exact test
        can pass at all, with alpha split over the looks, to max_rounds (the most looks for which
        every one of them can pass)."""
        k = max(1, self.finalists if finalists is None else finalists)
        for start in range(max(1, self.min_rounds), self.max_rounds + 1):
            rounds = list(range(start, self.max_rounds + 1))
            a = self.alpha / (k * len(rounds))
            if all(min_p_value(n, n) <= a for n in rounds):
                return rounds
        return []

    def level(self, finalists: int | None = None) -> float:
        """alpha': the level each test is held to."""
        k = max(1, self.finalists if finalists is None else finalists)
        return self.alpha / (k * max(1, len(self.looks(k))))

    def describe(self, finalists: int | None = None) -> str:
        k = max(1, self.finalists if finalists is None else finalists)
        looks = self.looks(k)
        return (
            f"{TEST_NAME} on the repeats (search measurements left out), p <= {self.level(k):.4g} "
            f"(alpha {self.alpha:g} / ({k} finalist{'s' if k != 1 else ''} x {len(looks)} look"
            f"{'s' if len(looks) != 1 else ''} at round{'s' if len(looks) != 1 else ''} "
            f"{', '.join(map(str, looks)) or 'none'})), and a median gain above the noise "
            f"(the larger 1.4826 x MAD of the two); {self.min_rounds} to {self.max_rounds} "
            "interleaved rounds"
        )


@dataclass
class Arm:
    """One configuration under repeats: the baseline or a finalist, and its fresh samples."""

    number: int  # its point number in the search
    knobs: dict[str, str]
    role: Literal["baseline", "finalist"]
    search_value: float | None = None
    values: list[float] = field(default_factory=list)  # alone, accepted runs, in order
    dropped: str = ""  # why it left the repeats ("" while in)
    failed: str = ""  # the baseline: why it does not work ("" when it does)

    @property
    def active(self) -> bool:
        return not self.dropped


@dataclass
class Comparison:
    number: int
    p_value: float
    gain: float  # median - the baseline's median
    noise: float  # the larger robust sigma of the two
    passed: bool


@dataclass
class Decision:
    settled: bool
    winner: Arm | None  # None: keep the baseline
    verdict: str
    comparisons: list[Comparison] = field(default_factory=list)


def compare(arm: Arm, base: Arm, level: float) -> Comparison:
    p = mann_whitney_greater(arm.values, base.values)
    gain = median(arm.values) - median(base.values)
    noise = max(robust_sigma(arm.values), robust_sigma(base.values))
    return Comparison(arm.number, p, gain, noise, p <= level and gain > noise)


def drop_losers(arms: list[Arm], base: Arm, rounds: int, rule: RepeatRule) -> None:
    """After min_rounds: a finalist whose median is not above the baseline's leaves."""
    if rounds < rule.min_rounds or base.failed or not base.values:
        return
    b = median(base.values)
    for a in arms:
        if a.active and a.values and median(a.values) <= b:
            a.dropped = (
                f"median {a_fmt(median(a.values))} not above the baseline's {a_fmt(b)} after {rounds} runs"
            )


def a_fmt(v: float) -> str:
    return f"{v:.4g}"


def decide(arms: list[Arm], base: Arm, rounds: int, rule: RepeatRule, finalists: int) -> Decision:
    """After ``rounds`` rounds: is the order settled, and who wins (None: the baseline)."""
    live = [a for a in arms if a.active and a.values]
    if base.failed or not base.values:
        if rounds < rule.min_rounds and live and rounds < rule.max_rounds:
            return Decision(False, None, "")
        if not live:
            return Decision(
                True, None, f"the baseline fails ({base.failed or 'no accepted run'}) and no finalist works"
            )
        w = max(live, key=lambda a: median(a.values))
        return Decision(
            True,
            w,
            f"the baseline fails ({base.failed or 'no accepted run'}): #{w.number}, the best median of "
            f"{len(live)} working finalist{'s' if len(live) != 1 else ''} ({a_fmt(median(w.values))}), wins",
        )
    level = rule.level(finalists)
    comps = [compare(a, base, level) for a in live]
    last = rounds >= rule.max_rounds
    if not live:
        return Decision(True, None, f"{NO_WINNER} (no finalist left: {_why_out(arms)})", comps)
    if rounds not in rule.looks(finalists):
        if last:
            return Decision(True, None, f"{NO_WINNER} ({_closest(comps, level)})", comps)
        return Decision(False, None, "", comps)
    passed = {c.number: c for c in comps if c.passed}
    top = max(live, key=lambda a: median(a.values))
    if top.number in passed or (last and passed):
        w = (
            top
            if top.number in passed
            else max((a for a in live if a.number in passed), key=lambda a: median(a.values))
        )
        c = passed[w.number]
        b = median(base.values)
        return Decision(
            True,
            w,
            f"#{w.number} beats the baseline beyond noise: median {a_fmt(median(w.values))} against "
            f"{a_fmt(b)} ({_pct(c.gain, b)}), {TEST_NAME} p = {c.p_value:.3g} <= {level:.3g}, gain "
            f"{a_fmt(c.gain)} > noise {a_fmt(c.noise)}",
            comps,
        )
    if last:
        return Decision(True, None, f"{NO_WINNER} ({_closest(comps, level)})", comps)
    return Decision(False, None, "", comps)


def _pct(gain: float, base: float) -> str:
    return f"{gain / base:+.1%}" if base else f"{gain:+.3g}"


def _closest(comps: list[Comparison], level: float) -> str:
    """Why the closest finalist did not pass."""
    c = min(comps, key=lambda c: (c.p_value, -c.gain))
    bits = [f"best p = {c.p_value:.3g} for #{c.number}"]
    bits.append(f"needs <= {level:.3g}" if c.p_value > level else "under the level")
    if c.gain <= c.noise:
        bits.append(f"gain {a_fmt(c.gain)} within noise {a_fmt(c.noise)}")
    return ", ".join(bits)


def _why_out(arms: list[Arm]) -> str:
    return "; ".join(f"#{a.number} {a.dropped}" for a in arms if a.dropped) or "none measured"


def interference(beside: dict[int, float], alone: dict[int, list[float]]) -> float | None:
    """How much slower a point measures beside another than alone: the median over points of
    1 - beside / median(alone); None without a point measured both ways."""
    shares = [1 - v / median(alone[n]) for n, v in beside.items() if alone.get(n) and median(alone[n]) > 0]
    if not shares:
        return None
    return median(shares) if not any(math.isnan(s) for s in shares) else None
