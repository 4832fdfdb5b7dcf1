"""The HTML report of a run: the bring-up (headline, attempts, timeline, failures) and its tuning.

The page is one self-contained file, `<run_dir>/report.html`: inline CSS, inline SVG drawn from
geometry computed in `svg.py`, no JavaScript at all and a Content-Security-Policy that forbids
it, so a log line can never become code. Every string reaches the page through Jinja2 with
autoescaping on. Links to each trial's server.log are relative, so the run folder can be copied
or served as a whole.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

import bringup.report.html.svg as svg
from bringup.core.datafiles import classes
from bringup.engines.base import display_name
from bringup.guard import secrets
from bringup.guard.safetext import safe_text
from bringup.observe.outcome import Outcome, OverrideRecord, ProbeResult
from bringup.report.findings import describe_machine, describe_model  # the same wording as FINDINGS.md
from bringup.report.html.repeats import repeats_view

if TYPE_CHECKING:
    from bringup.record.results import Attempt, RunResult
    from bringup.tuning.result import TunePoint, TuneResult

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
REPORT_NAME = "report.html"
STATUSES = ("works", "fails", "wrong-output", "timeout", "cancelled")
KINDS = {"search": "full", "screen": "screen", "minimize": "minimize", "dry-run": "dry-run"}
KIND_LONG = {
    "search": "full launch",
    "screen": "screen (dummy weights, fewer layers)",
    "minimize": "minimize (full launch)",
}
EVIDENCE_CHARS = 200  # in the attempt table; the failure cards show every line in full

# Tuning metrics in the points table, in this order (keys ending in _s are seconds).
METRICS: list[tuple[str, str]] = [
    ("output_tps", "output tok/s"),
    ("goodput_rps", "goodput req/s"),
    ("ttft_p99_s", "TTFT p99"),
    ("itl_p99_s", "ITL p99"),
    ("e2e_p99_s", "E2E p99"),
]
# The best point's numbers, in this order.
BEST_METRICS = ["output_tps", "goodput_rps", "rps", "ttft_p50_s", "ttft_p99_s", "itl_p99_s", "e2e_p99_s"]
LABELS = dict(METRICS) | {"rps": "req/s", "ttft_p50_s": "TTFT p50", "tpot_p99_s": "TPOT p99"}
# The Pareto plot: throughput against the p99 latency the tuner built its front on (the tuner's
# default is e2e_p99_s; TuneResult does not name it, so it is recognised from the front itself).
PARETO_Y = "output_tps"
PARETO_X = ("e2e_p99_s", "ttft_p99_s", "itl_p99_s", "tpot_p99_s")


# -- small formatting helpers -----------------------------------------------------------------


def _secs(v: float | None) -> str:
    if v is None:
        return ""
    if v < 1:
        return f"{v * 1000:.3g} ms"
    if v < 120:
        return f"{v:.3g} s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.2f} h"


def _metric(key: str, v: float | None) -> str:
    if v is None:
        return ""
    return _secs(v) if key.endswith("_s") else svg.fmt_num(v)


def _clip(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _status_cls(status: str) -> str:
    return f"status-{status}" if status in STATUSES else "status-other"


def _duration(a: Attempt) -> str:
    if a.simulated_s is not None:
        return f"{_secs(a.simulated_s)} sim. ({a.wall_s:.0f} s real)"
    return _secs(a.wall_s) or "0 s"


def _trial_path(trial_dir: str, roots: list[Path]) -> Path | None:
    """The trial folder as it is now. findings.json keeps absolute paths; when the run folder was
    moved or copied, the trial is found again by its name under the run's own folders."""
    if not trial_dir:
        return None
    p = Path(trial_dir)
    if not p.is_absolute():
        p = roots[0] / p
    if p.is_dir():
        return p
    for root in roots:
        for moved in (root / "trials" / p.name, root / p.name):
            if moved.is_dir():
                return moved
    return None


def _href(target: Path, report_dir: Path) -> str:
    rel = os.path.relpath(target, report_dir).replace(os.sep, "/")
    return quote(rel)  # a space or '#' in a folder name must not break the link


def _load_outcome(trial: Path | None) -> Outcome | None:
    if trial is None or not (trial / "outcome.json").is_file():
        return None
    try:
        return Outcome.model_validate_json((trial / "outcome.json").read_text())
    except (OSError, ValueError):  # a trial cut short may leave a partial file: the card says less
        return None


@dataclass
class Links:
    log: str = ""
    outcome: str = ""


def _links(trial: Path | None, report_dir: Path) -> Links:
    if trial is None:
        return Links()
    return Links(
        log=_href(trial / "server.log", report_dir) if (trial / "server.log").is_file() else "",
        outcome=_href(trial / "outcome.json", report_dir) if (trial / "outcome.json").is_file() else "",
    )


# -- the bring-up view --------------------------------------------------------------------------


@dataclass
class AttemptRow:
    number: int | str
    changes: str
    kind: str
    kind_long: str
    status: str
    status_cls: str
    failure_class: str
    phase: str
    evidence: str
    evidence_full: str
    duration: str
    anchor: str  # the failure card's id, "" for a working launch
    links: Links
    predicted: bool = False  # row 0: the baseline judged before any launch


@dataclass
class FailureCard:
    anchor: str
    number: int
    kind_long: str
    status: str
    status_cls: str
    failure_class: str
    phase: str
    changes: str
    meaning: str
    hint: str
    signature: str
    evidence: list[str]
    failed_probes: list[ProbeResult]
    duration: str
    links: Links


@dataclass
class RunView:
    title: str
    validated: bool
    status: str
    result_line: str
    time_line: str
    minimal_fix: str
    minimal_fix_note: str
    final_command: str
    baseline_command: str
    stop_reason: str
    machine: str
    model: str
    engine: str
    facts: list[tuple[str, str]]
    rows: list[AttemptRow]
    timeline: svg.Chart | None
    failures: list[FailureCard]
    final_probes: list[ProbeResult]
    final_links: Links
    overrides: list[OverrideRecord]
    chosen: list[tuple[str, str, str]]
    run_id: str
    run_dir: str


def _engine(name: str, version: str | None) -> str:
    return f"{display_name(name)} {version or ''}".strip()


def _short_machine(r: RunResult) -> str:
    """The heading names the GPUs only; the facts list under it gives the full machine line."""
    f = r.facts
    if f.get("gpu.count") and f.get("gpu.name"):
        try:
            cc = f" (SM{round(float(f['gpu.compute_capability']) * 10)})"
        except (KeyError, TypeError, ValueError):
            cc = ""
        return f"{f['gpu.count']} × {f['gpu.name']}{cc}"
    return describe_machine(r)


def _run_view(r: RunResult, report_dir: Path) -> RunView:
    roots = [report_dir, Path(r.run_dir)]
    meaning = classes()
    engine = _engine(r.engine, r.engine_version)
    full = sum(1 for a in r.attempts if a.purpose == "search")
    real = sum(a.wall_s for a in r.attempts)
    time_line = (
        f"{r.simulated_hours:.2f} simulated hours of launches ({real:.0f} s real)"
        if r.simulated_hours is not None
        else f"{_secs(real) or '0 s'} of launches"
    )
    plural = "es" if r.launches != 1 else ""
    result_line = (
        f"{r.launches} launch{plural} ({r.screening_launches} screening with dummy weights, {full} full)"
        + (f" + {r.minimize_launches} to minimize the fix" if r.minimize_launches else "")
    )
    if r.minimal_fix_str:
        note = (
            "verified by removing each change in turn"
            if r.minimal_fix_verified
            else "not minimised: the minimize budget ran out"
        )
    elif (
        r.validated
        and r.attempts
        and r.attempts[0].status == "works"
        and r.attempts[0].changes == "(baseline)"
    ):
        note = "the baseline itself works: no fix was needed"
    else:
        note = ""

    rows: list[AttemptRow] = []
    risky = [p for p in r.predictions if p.verdict in ("incompatible", "risky")]
    if risky and not any(a.changes == "(baseline)" for a in r.attempts):
        why = "; ".join(f"{p.flag} {p.level}: {p.reason}" for p in risky[:2])
        rows.append(
            AttemptRow(
                0,
                "(baseline, not launched)",
                "plan",
                "plan: judged before any launch",
                "predicted fail",
                "status-predicted",
                "",
                "",
                _clip(why, EVIDENCE_CHARS),
                why,
                "0 s",
                "",
                Links(),
                predicted=True,
            )
        )
    failures: list[FailureCard] = []
    final_probes: list[ProbeResult] = []
    final_links = Links()
    for a in r.attempts:
        trial = _trial_path(a.trial_dir, roots)
        links = _links(trial, report_dir)
        works = a.status == "works"
        anchor = "" if works else f"attempt-{a.number}"
        ev = "all probes passed" if works else a.evidence
        rows.append(
            AttemptRow(
                a.number,
                a.changes,
                KINDS.get(a.purpose, a.purpose),
                KIND_LONG.get(a.purpose, a.purpose),
                a.status,
                _status_cls(a.status),
                a.failure_class or "",
                a.phase or "",
                _clip(ev, EVIDENCE_CHARS),
                ev,
                _duration(a),
                anchor,
                links,
            )
        )
        outcome = _load_outcome(trial)
        if works:
            if outcome and (a.purpose == "search" or not final_probes):  # full launch beats a screen
                final_probes, final_links = outcome.probes, links
            continue
        evidence = outcome.evidence if outcome and outcome.evidence else [a.evidence] if a.evidence else []
        failures.append(
            FailureCard(
                anchor=anchor,
                number=a.number,
                kind_long=KIND_LONG.get(a.purpose, a.purpose),
                status=a.status,
                status_cls=_status_cls(a.status),
                failure_class=a.failure_class or a.status,
                phase=a.phase or "?",
                changes=a.changes,
                meaning=meaning.get(a.failure_class or "", ""),
                hint=a.hint or (outcome.hint if outcome and outcome.hint else ""),
                signature=a.signature or "",
                evidence=evidence,
                failed_probes=[p for p in (outcome.probes if outcome else []) if not p.passed],
                duration=_duration(a),
                links=links,
            )
        )

    overrides: dict[str, OverrideRecord] = {}
    for a in r.attempts:
        for o in a.overrides:
            overrides.setdefault(o.flag, o)
    chosen = [(flag, d.value, d.why) for flag, d in r.strategy_state.defaults.items()]
    return RunView(
        title=f"Bring-up: {r.model} on {_short_machine(r)}, {engine}",
        validated=r.validated,
        status=r.status,
        result_line=result_line,
        time_line=time_line,
        minimal_fix=r.minimal_fix_str or "",
        minimal_fix_note=note,
        final_command=r.final_command or "",
        baseline_command=r.baseline_command,
        stop_reason=r.stop_reason,
        machine=describe_machine(r),
        model=describe_model(r),
        engine=engine,
        facts=[(k, str(v)) for k, v in sorted(r.facts.items())],
        rows=rows,
        timeline=_timeline(r),
        failures=failures,
        final_probes=final_probes,
        final_links=final_links,
        overrides=list(overrides.values()),
        chosen=chosen,
        run_id=r.run_id,
        run_dir=r.run_dir,
    )


def _timeline(r: RunResult) -> svg.Chart | None:
    """Launches laid end to end (the run launches one at a time): simulated time when every
    launch has it (a scenario's wall time says nothing about the GPU story), else wall time."""
    if not r.attempts:
        return None
    simulated = all(a.simulated_s is not None for a in r.attempts)
    lengths = [
        float(a.simulated_s if simulated and a.simulated_s is not None else a.wall_s) for a in r.attempts
    ]
    minutes = sum(lengths) > 180
    div = 60.0 if minutes else 1.0
    unit = ("simulated " if simulated else "") + ("minutes" if minutes else "seconds")
    bars, t = [], 0.0
    for a, length in zip(r.attempts, lengths, strict=True):
        label = "works" if a.status == "works" else (a.failure_class or a.status)
        bars.append(
            svg.Bar(
                start=t / div,
                length=length / div,
                row_label=f"#{a.number} {KINDS.get(a.purpose, a.purpose)}",
                cls=f"{_status_cls(a.status)} kind-{KINDS.get(a.purpose, 'other')}",
                label=label,
                title=f"#{a.number} {KIND_LONG.get(a.purpose, a.purpose)}: {a.status}"
                + (f", {a.failure_class} in {a.phase}" if a.failure_class else "")
                + f"; {a.changes}; {_duration(a)}",
                href=f"#attempt-{a.number}" if a.status != "works" else "",
            )
        )
        t += length
    legend = [(_status_cls(s), s) for s in STATUSES if any(a.status == s for a in r.attempts)]
    legend.append(("kind-screen legend-screen", "paler: screening launch"))
    return svg.timeline(
        bars, xlabel=f"{unit} since the first launch", title="Launches over time", legend=legend
    )


# -- the tuning view ----------------------------------------------------------------------------


@dataclass
class TuneRow:
    number: int
    knobs: list[str]
    status: str
    status_cls: str
    failure_class: str
    evidence: str
    evidence_full: str
    objective: str
    metrics: list[str]
    launch: str
    pareto: bool
    best: bool
    links: Links
    measured: bool  # has numbers; else its class and evidence fill the numbers' columns


@dataclass
class TuneView:
    anchor: str
    tune_id: str
    heading: str
    summary: list[tuple[str, str]]
    knob_cols: list[str]
    metric_cols: list[tuple[str, str]]
    rows: list[TuneRow]
    best_command: str
    best_numbers: list[tuple[str, str]]
    best_knobs: str
    best_number: int | None
    launch_header: str
    pareto_chart: svg.Chart | None
    not_plotted: list[TuneRow]
    sweep_charts: list[svg.Chart] = field(default_factory=list)
    sweep_cols: list[str] = field(default_factory=list)
    sweep_rows: list[list[str]] = field(default_factory=list)
    repeats: Any = None  # bringup.report.html.repeats.RepeatsView, when the tuning repeated points


def _slo_text(slo: dict[str, float]) -> str:
    return ", ".join(f"{k} ≤ {_secs(v)}" for k, v in slo.items())


def _knob_text(knobs: dict[str, Any]) -> str:
    return " ".join(f"{k} {v}" for k, v in knobs.items()) or "(the base configuration)"


def _tune_view(t: TuneResult, report_dir: Path, run_dir: Path) -> TuneView:
    roots = [report_dir, run_dir / "tune" / t.tune_id, Path(t.run_dir) / "tune" / t.tune_id]
    knob_cols = list(t.knobs) + sorted({k for p in t.points for k in p.knobs} - set(t.knobs))
    metric_cols = [(k, h) for k, h in METRICS if any(k in p.metrics for p in t.points)]
    pareto = set(t.pareto)
    best_no = t.best.number if t.best else None
    rows: list[TuneRow] = []
    for p in sorted(t.points, key=lambda p: p.number):
        ev = p.evidence or ""
        rows.append(
            TuneRow(
                number=p.number,
                knobs=[str(p.knobs[k]) if k in p.knobs else "·" for k in knob_cols],
                status=p.status,
                status_cls={"ok": "status-works", "infeasible": "status-fails"}.get(
                    p.status, "status-pruned"
                ),
                failure_class=p.failure_class or "",
                evidence=_clip(ev, 160),
                evidence_full=ev,
                objective="" if p.objective is None else svg.fmt_num(p.objective),
                metrics=[_metric(k, p.metrics.get(k)) for k, _ in metric_cols],
                launch=(_secs(p.simulated_s) if p.simulated_s is not None else _secs(p.launch_s) or "0 s")
                if p.launch_s or p.simulated_s or p.trial_dir
                else "not launched",  # ruled out by the tuner
                pareto=p.number in pareto,
                best=p.number == best_no,
                links=_links(_trial_path(p.trial_dir, roots), report_dir),
                measured=p.objective is not None or any(k in p.metrics for k, _ in metric_cols),
            )
        )

    objective = {
        "goodput": "goodput (requests per second meeting the SLOs)",
        "throughput": "output throughput",
        "pareto": "the throughput / p99 latency trade-off",
    }.get(t.objective, t.objective)
    feasible = sum(1 for p in t.points if p.status == "ok")
    summary = [("objective", objective + (f" under {_slo_text(t.slo)}" if t.slo else ""))]
    if t.workload:
        summary.append(("workload", ", ".join(f"{k}={v}" for k, v in t.workload.items())))
    if t.knobs:
        summary.append(("searched", "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in t.knobs.items())))
    summary.append(
        (
            "launches",
            f"{t.launches}"
            + (f" of a {t.grid_size}-point grid" if t.grid_size else "")
            + f"; {feasible} measured, {sum(1 for p in t.points if p.status == 'infeasible')} infeasible, "
            f"{sum(1 for p in t.points if p.status == 'pruned')} pruned",
        )
    )
    summary.append(
        (
            "time",
            (
                f"{t.simulated_hours:.2f} simulated hours ({t.wall_seconds:.0f} s real)"
                if t.simulated_hours is not None
                else _secs(t.wall_seconds) or "0 s"
            ),
        )
    )
    nodes = sorted({p.where for p in t.points if p.where})
    if nodes or t.lost_trials:  # points ran on a Ray cluster (bringup tune --ray)
        lost = "; lost with their node and run again: " + "; ".join(t.lost_trials) if t.lost_trials else ""
        summary.append(("ran on", f"Ray nodes {', '.join(nodes) or '(none came back)'}{lost}"))
    summary.append(("base command", t.base_command))
    if t.reference_verdict:  # the winner against the model's own output (bringup/verify/reference.py)
        summary.append(("reference", f"{t.reference_verdict} ({t.reference})"))

    best_numbers: list[tuple[str, str]] = []
    if t.best:
        if t.best.objective is not None:
            best_numbers.append((f"objective ({t.objective})", svg.fmt_num(t.best.objective)))
        best_numbers += [
            (LABELS[k], _metric(k, t.best.metrics[k])) for k in BEST_METRICS if k in t.best.metrics
        ]
    chart, not_plotted = _pareto(t, rows)
    view = TuneView(
        anchor=f"tune-{t.tune_id}",
        tune_id=t.tune_id,
        heading=f"Tuning {t.tune_id}: {t.model}, {_engine(t.engine, t.engine_version)}",
        summary=summary,
        knob_cols=knob_cols,
        metric_cols=metric_cols,
        rows=rows,
        best_command=t.best_command or (t.best.command if t.best else ""),
        best_numbers=best_numbers,
        best_knobs=_knob_text(t.best.knobs) if t.best else "",
        best_number=best_no,
        launch_header="launch (sim.)" if any(p.simulated_s is not None for p in t.points) else "launch",
        pareto_chart=chart,
        not_plotted=not_plotted,
    )
    _sweep(t, view)
    view.repeats = repeats_view(t)
    return view


def _front(points: list[TunePoint], xkey: str) -> set[int]:
    """The points no other point beats on both throughput (higher) and latency (lower)."""
    ok = [p for p in points if p.status == "ok" and xkey in p.metrics and PARETO_Y in p.metrics]
    return {
        p.number
        for p in ok
        if not any(
            q.metrics[PARETO_Y] >= p.metrics[PARETO_Y]
            and q.metrics[xkey] <= p.metrics[xkey]
            and (q.metrics[PARETO_Y] > p.metrics[PARETO_Y] or q.metrics[xkey] < p.metrics[xkey])
            for q in ok
        )
    }


def _front_latency(t: TuneResult) -> str | None:
    """The latency metric whose front is the tuner's front; else the first one measured."""
    present = [k for k in PARETO_X if any(k in p.metrics for p in t.points)]
    if t.pareto:
        for k in present:
            if _front(t.points, k) == set(t.pareto):
                return k
    return present[0] if present else None


def _pareto(t: TuneResult, rows: list[TuneRow]) -> tuple[svg.Chart | None, list[TuneRow]]:
    """Throughput against p99 latency for every measured point; the rest are listed instead."""
    have = [p for p in t.points if p.status != "infeasible"]
    ykey = PARETO_Y if any(PARETO_Y in p.metrics for p in have) else None
    xkey = _front_latency(t)
    by_no = {r.number: r for r in rows}
    plotted: list[TunePoint] = (
        [p for p in have if xkey in p.metrics and ykey in p.metrics] if xkey and ykey else []
    )
    not_plotted = [by_no[p.number] for p in sorted(t.points, key=lambda p: p.number) if p not in plotted]
    if not plotted or not xkey or not ykey:
        return None, not_plotted
    pareto = set(t.pareto)
    best_no = t.best.number if t.best else None
    pts = []
    for p in plotted:
        cls = "pt pruned" if p.status == "pruned" else "pt pareto" if p.number in pareto else "pt"
        pts.append(
            svg.Point(
                x=p.metrics[xkey],
                y=p.metrics[ykey],
                cls=cls,
                best=p.number == best_no,
                label=f"#{p.number}" if p.number in pareto else "",
                title=f"#{p.number} {_knob_text(p.knobs)}: {LABELS[ykey]} {_metric(ykey, p.metrics[ykey])}, "
                f"{LABELS[xkey]} {_metric(xkey, p.metrics[xkey])}"
                + (" (on the Pareto front)" if p.number in pareto else "")
                + (" (pruned early)" if p.status == "pruned" else ""),
            )
        )
    front = [(p.metrics[xkey], p.metrics[ykey]) for p in plotted if p.number in pareto]
    slo_key = xkey.removesuffix("_s")
    vline = (t.slo[slo_key], f"SLO {LABELS[xkey]} {_secs(t.slo[slo_key])}") if slo_key in t.slo else None
    legend = [("pt", "measured"), ("pt pareto", "Pareto front"), ("best", "best")]
    if any(p.status == "pruned" for p in plotted):
        legend.append(("pt pruned", "pruned early"))
    chart = svg.scatter(
        pts,
        front=front,
        xlabel=f"{LABELS[xkey]} latency (s)",
        ylabel=LABELS[ykey],
        title=f"{LABELS[ykey]} against {LABELS[xkey]}",
        vline=vline,
        legend=legend,
    )
    infeasible = sum(1 for r in not_plotted if r.status == "infeasible")
    chart.note = f"{len(plotted)} measured points; up and to the left is better." + (
        f" {infeasible} infeasible point{'s' if infeasible != 1 else ''} (no numbers) listed below."
        if infeasible
        else ""
    )
    return chart, not_plotted


def _sweep(t: TuneResult, view: TuneView) -> None:
    if not t.sweep:
        return
    rate = t.sweep[0].mode == "rate"
    xlabel = "request rate (req/s)" if rate else "concurrency (requests in flight)"
    pts = sorted(t.sweep, key=lambda s: s.concurrency)
    xs = [s.concurrency for s in pts]
    titles = [
        f"{'rate' if rate else 'concurrency'} {svg.fmt_num(s.concurrency)}: {svg.fmt_num(s.output_tps)} "
        f"output tok/s, {svg.fmt_num(s.rps)} req/s"
        + (f", TTFT p99 {_secs(s.ttft_p99_s)}" if s.ttft_p99_s is not None else "")
        for s in pts
    ]
    view.sweep_charts.append(
        svg.line_chart(
            xs,
            [s.output_tps for s in pts],
            xlabel=xlabel,
            ylabel="output tok/s",
            title="Throughput under rising load",
            titles=titles,
        )
    )
    lat = [(s, s.ttft_p99_s) for s in pts if s.ttft_p99_s is not None]
    if lat:
        hline = (t.slo["ttft_p99"], f"SLO {_secs(t.slo['ttft_p99'])}") if "ttft_p99" in t.slo else None
        view.sweep_charts.append(
            svg.line_chart(
                [s.concurrency for s, _ in lat],
                [v for _, v in lat],
                xlabel=xlabel,
                ylabel="TTFT p99 (s)",
                title="TTFT p99 under rising load",
                hline=hline,
                titles=[f"{svg.fmt_num(s.concurrency)}: TTFT p99 {_secs(v)}" for s, v in lat],
            )
        )
    cols = [
        ("output_tps", "output tok/s"),
        ("rps", "req/s"),
        ("goodput_rps", "goodput req/s"),
        ("ttft_p50_s", "TTFT p50"),
        ("ttft_p99_s", "TTFT p99"),
        ("itl_p99_s", "ITL p99"),
    ]
    cols = [(k, h) for k, h in cols if any(getattr(s, k) is not None for s in pts)]
    view.sweep_cols = ["request rate" if rate else "concurrency"] + [h for _, h in cols]
    view.sweep_rows = [
        [svg.fmt_num(s.concurrency)] + [_metric(k, getattr(s, k)) for k, _ in cols] for s in pts
    ]


# -- the page -----------------------------------------------------------------------------------


def _shown(value: Any) -> Any:
    """Every value a template writes, before autoescape: control, bidi and invisible characters
    shown as escapes (bringup/guard/safetext.py). Markup the page built itself (an SVG chart) stays
    Markup; its text from outside went through here as values of its own."""
    if isinstance(value, Markup):
        return Markup(safe_text(str(value)))
    return safe_text(value) if isinstance(value, str) else value


def _env() -> jinja2.Environment:
    # autoescape=True for every template, whatever its name; StrictUndefined makes a misspelt
    # field an error in the tests rather than an empty cell in a report. `finalize` passes every
    # {{ value }} through `_shown` first, and `shown` is the same as a filter for a value a
    # template builds itself (issue 40: LRM, RLM, ALM, zero-width space and BOM reached the page).
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    env.filters["shown"] = _shown
    return env


def render_html(run_dir: Path, result: RunResult | None, tunes: list[TuneResult]) -> str:
    """The page as text; links are relative to `run_dir`, where write_html puts it."""
    run_dir = Path(run_dir)
    if result is None and not tunes:
        raise ValueError("nothing to report: give a bring-up result, a tuning result, or both")
    run = _run_view(result, run_dir) if result else None
    views = [_tune_view(t, run_dir, run_dir) for t in tunes]
    if run:
        title = run.title
    else:
        t = tunes[0]
        title = f"Tuning: {t.model}, {_engine(t.engine, t.engine_version)}"
    return _env().get_template("report.html.j2").render(title=title, run=run, tunes=views)


def write_html(run_dir: Path, result: RunResult | None, tunes: list[TuneResult]) -> Path:
    """Write `<run_dir>/report.html` (self-contained, no scripts) and return its path."""
    run_dir = Path(run_dir)
    path = run_dir / REPORT_NAME
    # (renamed over the old one: a browser open on it never sees half a page)
    secrets.write_text(path, safe_text(render_html(run_dir, result, tunes)), encoding="utf-8")
    return path


def load_tunes(run_dir: Path) -> list[TuneResult]:
    """Every tuning session saved under `<run_dir>/tune/<tune_id>/tune.json`, oldest first."""
    from bringup.tuning.result import load_tunes as load

    return load(run_dir)
