"""The repeats of a tuning in the HTML report: the verdict, each configuration's spread, and the
objective against the knobs that matter with the baseline's band.

"The knobs that matter" are the ones whose levels move the objective most over the search's
measured points (the range of the per-level medians), at most two, each plotted on its own chart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import bringup.report.html.svg as svg
from bringup.tuning.result import Spread, TuneResult
from bringup.tuning.stats import median


@dataclass
class SpreadRow:
    cells: list[str]
    best: bool


@dataclass
class RepeatsView:
    verdict: str
    facts: list[tuple[str, str]]
    cols: list[str]
    rows: list[SpreadRow]
    charts: list[svg.Chart] = field(default_factory=list)


COLS = [
    "#",
    "role",
    "knobs",
    "runs",
    "samples",
    "median",
    "MAD",
    "interval for the median",
    "search",
    "p",
    "gain",
    "note",
]


def _f(v: float | None, fmt: str = ".4g") -> str:
    return "" if v is None else format(v, fmt)


def _knobs(k: dict[str, Any]) -> str:
    return " ".join(f"{a} {b}" for a, b in k.items()) or "(the base configuration)"


def _row(s: Spread, chosen: int | None) -> SpreadRow:
    interval = (
        f"{s.ci_lo:.4g} .. {s.ci_hi:.4g} ({s.ci_coverage:.0%} coverage)"
        if s.ci_lo is not None and s.ci_hi is not None and s.ci_coverage is not None
        else ""
    )
    note = s.failed or s.dropped or ("passes the test" if s.passed else "")
    if s.beside_value is not None:
        note = (note + "; " if note else "") + f"beside the others: {s.beside_value:.4g}"
    return SpreadRow(
        [
            str(s.number or "-"),
            s.role,
            _knobs(s.knobs),
            str(s.n),
            ", ".join(f"{v:.4g}" for v in s.samples),
            _f(s.median),
            _f(s.mad),
            interval,
            _f(s.search_value),
            _f(s.p_value, ".3g"),
            _f(s.gain),
            note,
        ],
        s.number == chosen,
    )


def knobs_that_matter(t: TuneResult, most: int = 2) -> list[str]:
    """The knobs whose levels move the measured objective most (the range of the per-level
    medians over the search's measured points and the repeats' medians); the first knob when
    nothing was measured at two levels of any."""
    values = [(p.knobs, float(p.objective)) for p in t.points if p.status == "ok" and p.objective is not None]
    if t.repeats:
        values += [(s.knobs, s.median) for s in t.repeats.spreads if s.median is not None]
    effect: dict[str, float] = {}
    for flag in t.knobs:
        by: dict[str, list[float]] = {}
        for knobs, v in values:
            if flag in knobs:
                by.setdefault(str(knobs[flag]), []).append(v)
        if len(by) > 1:
            meds = [median(v) for v in by.values()]
            effect[flag] = max(meds) - min(meds)
    return sorted(effect, key=lambda f: -effect[f])[:most] or list(t.knobs)[:1]


def _chart(t: TuneResult, flag: str, chosen: int | None) -> svg.Chart:
    rep = t.repeats
    assert rep is not None
    levels = [str(v) for v in t.knobs[flag]]
    pts = [
        svg.SpreadPoint(
            levels.index(str(p.knobs[flag])),
            float(p.objective),
            title=f"#{p.number} {_knobs(p.knobs)}: {p.objective:.4g} (search)",
        )
        for p in t.points
        if p.status == "ok" and p.objective is not None and str(p.knobs.get(flag)) in levels
    ]
    band = None
    for s in rep.spreads:
        if s.median is None or str(s.knobs.get(flag)) not in levels:
            continue
        if s.role == "baseline" and s.ci_lo is not None and s.ci_hi is not None:
            band = (s.ci_lo, s.median, s.ci_hi)
        pts.append(
            svg.SpreadPoint(
                levels.index(str(s.knobs[flag])),
                s.median,
                s.ci_lo,
                s.ci_hi,
                "median",
                best=s.number == chosen,
                title=f"#{s.number} ({s.role}) {_knobs(s.knobs)}: median {s.median:.4g} of {s.n} repeats, "
                f"interval {_f(s.ci_lo)} .. {_f(s.ci_hi)}",
            )
        )
    legend = [("pt", "search (one run)"), ("median", "repeats: median and interval")]
    if band:
        legend.append(("band", "baseline's interval"))
    legend.append(("best", "chosen"))
    c = svg.spread_chart(
        levels,
        pts,
        band=band,
        xlabel=flag,
        ylabel=f"{t.objective} (higher is better)",
        title=f"{t.objective} against {flag}",
        legend=legend,
    )
    c.note = "Outside the band and above it by more than the noise is a gain; inside it is noise."
    return c


def repeats_view(t: TuneResult) -> RepeatsView | None:
    rep = t.repeats
    if rep is None:
        return None
    chosen = t.best.number if t.best else None
    facts = [
        ("rule", rep.rule),
        (
            "repeats",
            f"{rep.rounds} interleaved rounds, {rep.launches} launches"
            + ("" if rep.settled else " (budget spent before the order settled)"),
        ),
    ]
    if rep.shared_host:
        share = f"{rep.interference:.1%}" if rep.interference is not None else "not measured"
        facts.append(
            (
                "shared host",
                "points ran side by side in the search (--parallel); beside the others a configuration "
                f"measured {share} less (median) than alone; the verdict uses the alone runs only",
            )
        )
    if t.search_best is not None and chosen is not None and t.search_best != chosen:
        facts.append(("search alone", f"would have named point #{t.search_best} from one measurement"))
    return RepeatsView(
        verdict=rep.verdict,
        facts=facts,
        cols=COLS,
        rows=[_row(s, chosen) for s in rep.spreads],
        charts=[_chart(t, f, chosen) for f in knobs_that_matter(t)],
    )
