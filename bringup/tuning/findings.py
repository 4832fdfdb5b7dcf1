"""A tuning in FINDINGS.md: what it ends with, whether that beats the baseline beyond noise, the
test that says so, and every repeated configuration's spread.

Markdown lines only, from the saved result (bringup/tuning/result.py); it imports neither Optuna
nor the tuner, so `bringup report` renders it where those are not installed.
"""

from __future__ import annotations

from bringup.guard.safetext import md_code, md_text
from bringup.tuning.result import Spread, TuneResult

_md = md_text  # text from outside as Markdown prose or a cell (bringup/guard/safetext.py)


def _f(v: float | None, fmt: str = ".4g") -> str:
    return "" if v is None else format(v, fmt)


def _knobs(k: dict) -> str:
    return " ".join(f"{a} {b}" for a, b in k.items()) or "(the base configuration)"


def _row(s: Spread) -> str:
    interval = (
        f"{s.ci_lo:.4g} .. {s.ci_hi:.4g} ({s.ci_coverage:.0%})"
        if s.ci_lo is not None and s.ci_hi is not None and s.ci_coverage is not None
        else ""
    )
    note = s.failed or s.dropped or ("passes the test" if s.passed else "")
    if s.beside_value is not None:
        note = (note + "; " if note else "") + f"beside the others: {s.beside_value:.4g}"
    return (
        f"| {s.number or '-'} | {s.role} | {md_code(_knobs(s.knobs))} | {s.n} | {_f(s.median)} | {_f(s.mad)} "
        f"| {interval} | {_f(s.search_value)} | {_f(s.p_value, '.3g')} | {_f(s.gain)} | {_md(note)} |"
    )


def tune_markdown(t: TuneResult, level: int = 2) -> list[str]:
    h = "#" * level
    L = [f"{h} Tuning {t.tune_id}", ""]
    L.append(
        f"{t.launches} search launches of a {t.grid_size}-point grid, objective {t.objective}"
        + (" under " + ", ".join(f"{k} <= {v:g} s" for k, v in t.slo.items()) if t.slo else "")
        + "."
    )
    rep = t.repeats
    if rep is None:
        if t.best:
            L += [
                "",
                f"Best (one measurement per point, no repeats): point {t.best.number}: {md_code(t.best_command or '')}",
            ]
        return L
    L += ["", f"**Verdict: {_md(rep.verdict)}.**", ""]
    L.append(f"Rule: {_md(rep.rule)}.")
    spent = "" if rep.settled else " (the repeat budget ran out before the order settled)"
    L.append(f"Repeats: {rep.rounds} interleaved rounds, {rep.launches} launches{spent}.")
    if rep.shared_host:
        share = f"{rep.interference:.1%}" if rep.interference is not None else "not measured"
        L.append(
            "Points shared this host during the search (`--parallel`): beside the others, a configuration "
            f"measured {share} less (median) than alone; the finalists were re-measured alone and only those "
            "runs count."
        )
    if t.search_best is not None and t.best is not None and t.search_best != t.best.number:
        L.append(f"The search alone (one measurement each) would have named point {t.search_best}.")
    L += [
        "",
        "| # | role | knobs | runs | median | MAD | interval for the median (coverage) | search | p | gain | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    L += [_row(s) for s in rep.spreads]
    if t.best is not None:
        L += ["", f"Ends with point {t.best.number}: {md_code(t.best_command or t.best.command)}"]
    return L
