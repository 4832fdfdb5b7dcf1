"""``bringup tune``'s repeat phase as the terminal shows it: each repeat launch, and the verdict.

The rule and the bookkeeping live in bringup/tuning/repeats.py and verdict.py; where the repeats
run (alone, or beside each other) in bringup/tuning/evaluator.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from bringup.cli._common import err_console, out_console

if TYPE_CHECKING:  # every cli module is imported at start: the tuner (Optuna, numpy) only when tuning
    from bringup.tuning.result import RepeatReport, RepeatRun


def on_run(r: RepeatRun) -> None:
    where = "beside the others" if r.beside else f"round {r.round}"
    err_console.print(
        f"  repeat #{r.number} ({where}): {r.status}"
        + (f" objective {r.value:.4g}" if r.value is not None else "")
        + (f" ({r.why})" if r.why else ""),
        markup=False,
        highlight=False,
    )


def _f(v: float | None, fmt: str = ".4g") -> str:
    return "" if v is None else format(v, fmt)


def _spreads(rep: RepeatReport) -> Table:
    """Each configuration's spread over its repeats, with its test against the baseline."""
    t = Table(box=None, header_style="bold", title="repeats (interleaved)")
    for c in (
        "#",
        "role",
        "knobs",
        "runs",
        "median",
        "MAD",
        "interval (coverage)",
        "search",
        "p",
        "gain",
        "note",
    ):
        t.add_column(c, overflow="fold")
    for s in rep.spreads:
        interval = (
            f"{s.ci_lo:.4g} .. {s.ci_hi:.4g} ({s.ci_coverage:.0%})"
            if s.ci_lo is not None and s.ci_hi is not None and s.ci_coverage is not None
            else ""
        )
        note = s.failed or s.dropped or ("passes" if s.passed else "")
        if s.beside_value is not None:
            note = (note + "; " if note else "") + f"beside others {s.beside_value:.4g}"
        t.add_row(
            str(s.number or "-"),
            s.role,
            str(s.n),
            _f(s.median),
            _f(s.mad),
            interval,
            _f(s.search_value),
            _f(s.p_value, ".3g"),
            _f(s.gain),
            note,
        )
    return t


def print_repeats(rep: RepeatReport) -> None:
    """Each configuration's spread over its repeats, and the verdict with its test."""
    out_console.print(_spreads(rep))
    out_console.print(f"rule: {rep.rule}", markup=False, highlight=False)
    if rep.shared_host:
        share = f"{rep.interference:.1%}" if rep.interference is not None else "not measured"
        out_console.print(
            "points shared this host during the search (--parallel): measured beside the others, a "
            f"configuration lost {share} of its objective (median) against alone; the verdict uses "
            "the alone runs only",
            markup=False,
        )
    spent = "" if rep.settled else " (the repeat budget ran out before the order settled)"
    out_console.print(
        f"[bold]verdict[/] after {rep.rounds} round{'s' if rep.rounds != 1 else ''}, "
        f"{rep.launches} repeat launches{spent}: ",
        end="",
    )
    out_console.print(rep.verdict, markup=False, highlight=False)
