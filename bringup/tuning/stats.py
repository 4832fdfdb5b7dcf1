"""Small exact statistics for repeated measurements: spread, an interval, a rank test.

A tuning point measured a few times (3 to 10 runs) is summarised robustly: its median, its MAD
(median absolute deviation, unscaled) and a distribution-free interval for its median from order
statistics, with the interval's exact coverage (binomial), so a report never claims 95% from four
samples. Two configurations are compared with the one-sided Mann-Whitney U test, whose p-value is
computed exactly (every split of the pooled ranks, ties as mid-ranks, counted by dynamic
programming), not from the normal approximation, which is wrong at these sample sizes. Nothing
here draws random numbers: the same samples always give the same numbers (the tests check exact
values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAD_TO_SIGMA = 1.4826  # MAD x this estimates a normal distribution's standard deviation


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no samples")
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def mad(xs: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    m = median(xs)
    return median([abs(x - m) for x in xs])


def robust_sigma(xs: Sequence[float]) -> float:
    """The noise of the samples as a standard deviation: 1.4826 x MAD (0 for one sample)."""
    return MAD_TO_SIGMA * mad(xs) if len(xs) > 1 else 0.0


def _binom_cdf_half(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2**n


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    coverage: float  # the exact probability that [lo, hi] holds the true median


def median_interval(xs: Sequence[float], level: float = 0.95) -> Interval:
    """A distribution-free interval for the median: the order statistics x(k) .. x(n-k+1) with
    the largest k whose coverage 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2), is at least ``level``;
    with too few samples for ``level``, the range min..max and its (lower) coverage."""
    if not xs:
        raise ValueError("interval of no samples")
    s = sorted(xs)
    n = len(s)
    best = Interval(s[0], s[-1], 1 - 2 * 0.5**n if n > 1 else 0.0)
    for k in range(2, n // 2 + 1):
        cov = 1 - 2 * _binom_cdf_half(k - 1, n)
        if cov < level:
            break
        best = Interval(s[k - 1], s[n - k], cov)
    return best


def _midranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float:
    """Exact one-sided p-value of the Mann-Whitney U test that ``x`` tends to be larger than
    ``y``: the share of the C(n+m, n) equally likely splits of the pooled mid-ranks whose rank sum
    for x is at least the observed one. 1.0 when either side has no samples."""
    if not x or not y:
        return 1.0
    pooled = [*x, *y]
    ranks2 = [round(2 * r) for r in _midranks(pooled)]  # twice the mid-ranks: integers
    observed = sum(ranks2[: len(x)])
    n = len(x)
    # ways[k][s]: subsets of size k of the ranks seen so far with doubled rank sum s
    total = sum(ranks2)
    ways = [[0] * (total + 1) for _ in range(n + 1)]
    ways[0][0] = 1
    for r in ranks2:
        for k in range(n, 0, -1):
            row, prev = ways[k], ways[k - 1]
            for s in range(total, r - 1, -1):
                if prev[s - r]:
                    row[s] += prev[s - r]
    hits = sum(ways[n][s] for s in range(observed, total + 1))
    return hits / math.comb(len(pooled), n)


def min_p_value(n: int, m: int) -> float:
    """The smallest p-value the exact one-sided test can give with n and m samples (no ties):
    every x above every y, 1 / C(n+m, n)."""
    return 1.0 / math.comb(n + m, n)
