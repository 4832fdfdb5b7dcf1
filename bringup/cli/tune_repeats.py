"""``bringup tune``'s repeat phase: where the repeats run, and what the terminal shows of them.

The rule and the bookkeeping live in bringup/tuning/repeats.py and verdict.py; this module only
wires them to the launch evaluator and the executors of the CLI: alone, a repeat is one launch
with nothing else in flight (on this machine, or one job at a time on the Ray cluster); beside,
every configuration of a round is launched at once, on its own GPUs and port, as the search ran
them, to measure what a neighbour costs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.table import Table

from bringup.cli._common import err_console, out_console

if TYPE_CHECKING:  # every cli module is imported at start: the tuner (Optuna, numpy) only when tuning
    from bringup.tuning.result import RepeatReport, RepeatRun
    from bringup.tuning.tuner import Evaluation


def alone(
    ev: Any, make_executor: Callable[[], Any] | None
) -> tuple[Callable[[dict[str, str]], Evaluation], Callable[[], None]]:
    """Measure one configuration with nothing else running: the evaluator itself, or (a cluster)
    one job at a time through an executor of width 1. Returns the function and its closer."""
    if make_executor is None:
        return (lambda knobs: ev(knobs, None)), (lambda: None)
    ex = make_executor()

    def measure(knobs: dict[str, str]) -> Evaluation:
        job = ev.job(ev.seq + 1, knobs, None)
        ex.submit(job)
        d = ex.wait()
        while d.run is None:  # lost with its node: the machine's failure, not the point's; again
            ex.submit(d.job)
            d = ex.wait()
        return d.run.value

    return measure, ex.close


def beside(ev: Any, make_executor: Callable[[], Any]) -> Callable[[list[dict[str, str]]], list[Evaluation]]:
    """Measure several configurations at once, side by side, as the search ran its points."""

    def measure(group: list[dict[str, str]]) -> list[Evaluation]:
        ex = make_executor()
        try:
            jobs = [ev.job(ev.seq + 1 + i, knobs, None) for i, knobs in enumerate(group)]
            queue = list(jobs)
            got: dict[int, Evaluation] = {}
            while len(got) < len(jobs):
                while queue and len(ex.in_flight()) < ex.width and ex.fits(queue[0]):
                    ex.submit(queue.pop(0))
                d = ex.wait()
                if d.run is None:  # lost with its node: again
                    queue.insert(0, d.job)
                    continue
                got[d.job.seq] = d.run.value
            return [got[j.seq] for j in jobs]
        finally:
            ex.close()

    return measure


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


def print_repeats(rep: RepeatReport) -> None:
    """Each configuration's spread over its repeats, and the verdict with its test."""
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
    out_console.print(t)
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
