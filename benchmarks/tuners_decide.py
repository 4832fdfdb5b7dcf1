"""The deciding pieces of benchmarks/tuners_side_by_side.py (issue 38), with no engine in them.

Apart from the launching so that each can be tested in the fast tier on made-up numbers:

- the grid both sides search (tuners_grid.yaml) and the smaller grid that fits a session;
- the SLO, set from a measurement of the defaults so that they do not already meet it;
- goodput under that SLO from any tool's per-request records, by bringup's own rule
  (bringup/loadgen/metrics.py ``meets``: a request is good when it succeeded, its TTFT is within
  the limit and its own p99 inter-token gap is within the limit);
- the peer's pick (its own best point under the SLO, from its own measurements);
- the final round's order (every configuration once per round, rotated);
- the final round's verdicts (the ratio bringup / peer, paired by round; bringup's winner against
  the defaults beyond noise, by the rule of bringup/tuning/verdict.py);
- the table and the plot (an SVG written by hand: matplotlib is not a dependency).
"""

from __future__ import annotations

import html
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from bringup.loadgen.client import RequestRecord
from bringup.loadgen.config import SLO
from bringup.loadgen.metrics import meets, stat_value
from bringup.tuning.knobs import DEFAULT, SWITCH
from bringup.tuning.stats import mad, median, median_interval
from bringup.tuning.verdict import Arm, compare

GRID_FILE = Path(__file__).with_name("tuners_grid.yaml")


class GridError(ValueError):
    """A grid file or choice that cannot be used: what is wrong and what to do."""


@dataclass
class GridKnob:
    flag: str
    levels: list[str]
    source: str = ""


def load_grid(profile: str, path: Path = GRID_FILE) -> list[GridKnob]:
    """A profile's knobs from the grid file (schema in its header)."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise GridError(f"{path}: cannot read the grid file: {e}") from None
    if profile not in data:
        raise GridError(f"{path}: no grid {profile!r}; the file has {', '.join(sorted(data))}")
    out = []
    for i, k in enumerate(data[profile]):
        levels = [str(v) for v in k.get("levels") or []]
        if not k.get("flag") or len(levels) < 2 or levels[0] != DEFAULT:
            raise GridError(f"{path}: {profile}[{i}]: needs a flag and levels starting with 'default'")
        out.append(GridKnob(str(k["flag"]), levels, str(k.get("source") or "")))
    return out


def with_levels(knobs: Sequence[GridKnob], overrides: Sequence[str]) -> list[GridKnob]:
    """``FLAG=default,V1,...`` items: only these knobs, at these levels (the order of the file kept)."""
    if not overrides:
        return list(knobs)
    chosen: dict[str, list[str]] = {}
    for item in overrides:
        flag, sep, levels = item.partition("=")
        vals = [v.strip() for v in levels.split(",") if v.strip()]
        if not sep or len(vals) < 2 or vals[0] != DEFAULT:
            raise GridError(
                f"--levels {item!r}: write FLAG=default,V1[,...] (the defaults first, then at least one value)"
            )
        chosen[flag] = vals
    known = {k.flag: k for k in knobs}
    unknown = [f for f in chosen if f not in known]
    if unknown:
        raise GridError(f"--levels: {', '.join(unknown)} not in this grid ({', '.join(known)})")
    return [GridKnob(k.flag, chosen[k.flag], k.source) for k in knobs if k.flag in chosen]


def size(knobs: Sequence[GridKnob]) -> int:
    return math.prod(len(k.levels) for k in knobs)


def subset(knobs: Sequence[GridKnob], max_points: int | None) -> list[GridKnob]:
    """The largest sub-grid of at most ``max_points`` points, by a fixed rule: take a level from
    the knob with the most levels (the later knob on a tie: the file lists the important first),
    the middle one of its non-default levels (the upper middle of an even count), so the smallest
    and largest values stay longest; a knob left with its default alone leaves the grid. The
    defaults point (every knob at "default") is always in it."""
    out = [GridKnob(k.flag, list(k.levels), k.source) for k in knobs]
    if max_points is None:
        return out
    if max_points < 1:
        raise GridError("--grid-points must be at least 1")
    while out and size(out) > max_points:
        most = max(len(k.levels) for k in out)
        k = [k for k in out if len(k.levels) == most][-1]
        values = k.levels[1:]
        values.pop(len(values) // 2)
        k.levels = [DEFAULT, *values]
        out = [k for k in out if len(k.levels) > 1]
    return out


def points(knobs: Sequence[GridKnob]) -> list[dict[str, str]]:
    """Every point of the grid, in order: the defaults point first."""
    return [
        dict(zip([k.flag for k in knobs], combo, strict=True))
        for combo in itertools.product(*[k.levels for k in knobs])
    ]


def flags_of(point: Mapping[str, str]) -> dict[str, str | bool]:
    """A point as engine flags: "default" is no flag, "on"/"off" a switch."""
    return {f: SWITCH.get(v, v) for f, v in point.items() if v != DEFAULT}


def describe(point: Mapping[str, str]) -> str:
    """A point as a person reads it: its non-default flags, or "(defaults)"."""
    bits = []
    for f, v in flags_of(point).items():
        bits.append(f if v is True else "--no-" + f[2:] if v is False else f"{f} {v}")
    return " ".join(bits) or "(defaults)"


# -- goodput under the SLO, from any tool's per-request records ---------------------------------
def records_from_lists(result: Mapping[str, Any]) -> list[RequestRecord]:
    """Per-request records from vLLM's `bench serve --save-detailed` or SGLang's `bench_serving
    --output-details` (both keep ``ttfts``, ``itls``, ``errors`` lists, in seconds); a request
    with an error, or without a first token, failed."""
    ttfts = result.get("ttfts") or []
    itls = result.get("itls") or [[] for _ in ttfts]
    errors = result.get("errors") or ["" for _ in ttfts]
    out = []
    for i, (ttft, itl, err) in enumerate(zip(ttfts, itls, errors, strict=False)):
        ok = not err and ttft is not None and ttft > 0
        out.append(
            RequestRecord(
                index=i, ok=ok, ttft_s=ttft if ok else None, itl_s=list(itl or []), error=err or None
            )
        )
    return out


def goodput(records: Sequence[RequestRecord], duration_s: float, slos: Sequence[SLO]) -> float:
    """Good requests per second: bringup's rule (``meets``) on any tool's records."""
    return sum(1 for r in records if meets(r, slos)) / max(duration_s, 1e-9)


@dataclass
class SloChoice:
    ttft_s: float
    itl_s: float
    quantile: float
    rule: str
    defaults_p99_ttft_s: float  # the defaults' own aggregate figures, for the record
    defaults_p99_itl_s: float
    defaults_attainment: float  # share of the defaults' requests good under the chosen SLO
    defaults_meet: bool  # the aggregate check: both p99s within the limits (must be False)

    def slos(self) -> list[SLO]:
        return [
            SLO(metric="ttft", stat="p99", target_s=self.ttft_s),
            SLO(metric="itl", stat="p99", target_s=self.itl_s),
        ]

    def text(self) -> str:
        """As `bringup tune --slo` takes it."""
        return f"ttft_p99={self.ttft_s * 1000:.1f}ms,itl_p99={self.itl_s * 1000:.2f}ms"


def slo_from_defaults(
    records: Sequence[RequestRecord], quantile: float = 0.75, measured_by: str = ""
) -> SloChoice:
    """Limits the defaults do not already meet: the TTFT limit is the ``quantile`` of the defaults'
    per-request TTFTs, the ITL limit the ``quantile`` of their per-request p99 gaps (each
    request's own, as the goodput rule reads it). Below the p99, so the defaults' aggregate p99
    is over the limit (they miss the SLO) while about ``quantile`` of their requests meet each
    limit: goodput has room to grow with a better configuration and is not zero to begin with.
    Limits are rounded up (0.1 ms TTFT, 0.01 ms ITL) as `--slo` prints them."""
    if not 0 < quantile < 1:
        raise GridError(f"--slo-quantile {quantile}: must be between 0 and 1")
    ok = [r for r in records if r.ok and r.ttft_s is not None]
    if len(ok) < 4:
        raise GridError(
            f"the defaults' measurement has {len(ok)} successful requests: too few to set an SLO from"
        )
    ttfts = [float(r.ttft_s or 0.0) for r in ok]
    itl99 = [stat_value(r.itl_s, "p99") if r.itl_s else 0.0 for r in ok]
    ttft_s = math.ceil(float(np.quantile(ttfts, quantile)) * 1e4) / 1e4
    itl_s = math.ceil(float(np.quantile(itl99, quantile)) * 1e5) / 1e5
    pooled = [g for r in ok for g in r.itl_s]
    p99_ttft, p99_itl = float(np.percentile(ttfts, 99)), float(np.percentile(pooled, 99)) if pooled else 0.0
    choice = SloChoice(
        ttft_s,
        itl_s,
        quantile,
        f"TTFT limit = the defaults' per-request TTFT p{quantile * 100:g}, ITL limit = the p{quantile * 100:g} of "
        f"their per-request p99 inter-token gaps, over {len(ok)} requests{' measured by ' + measured_by if measured_by else ''}",
        p99_ttft,
        p99_itl,
        0.0,
        p99_ttft <= ttft_s and p99_itl <= itl_s,
    )
    choice.defaults_attainment = sum(1 for r in ok if meets(r, choice.slos())) / len(records)
    return choice


# -- the peer's pick ------------------------------------------------------------------------------
@dataclass
class PeerPoint:
    name: str
    knobs: dict[str, str]
    status: str = "ok"  # ok | failed
    why: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)  # each run's figures (goodput, throughput, ...)
    seconds: float = 0.0  # from its server's start to its teardown

    @property
    def value(self) -> float | None:
        vals = [r["goodput"] for r in self.runs if r.get("goodput") is not None and not r.get("failed")]
        return median(vals) if vals else None


def peer_pick(pts: Sequence[PeerPoint]) -> PeerPoint | None:
    """The peer's own best point under the SLO: the highest median goodput over its runs (a run
    with failed requests does not count, as neither tool would keep it); the earlier point on a tie."""
    best: PeerPoint | None = None
    for p in pts:
        v = p.value
        if p.status == "ok" and v is not None and (best is None or v > (best.value or 0.0)):
            best = p
    return best


def bringup_share(launches: int, share: float, finalists: int = 1) -> tuple[int, int]:
    """bringup's search launches and repeat rounds within ``share`` of the grid's ``launches``:
    (trials, repeat rounds). A round launches the baseline and each finalist again; the exact test
    can name a winner from the third round on (3 samples each: p = 1/20), so three rounds are kept
    when the budget allows two search points besides them, and fewer (no verdict possible) below."""
    budget = max(1, math.floor(share * launches + 1e-9))
    per_round = 1 + finalists
    rounds = 3 if budget >= 2 + 3 * per_round else max(0, (budget - 2) // per_round)
    return max(1, budget - rounds * per_round), rounds


# -- the final round ----------------------------------------------------------------------------
def final_order(names: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, configuration) in launch order: every configuration once a round, the order
    rotated by one each round (D B P, B P D, P D B, ...), so each takes each place in a round
    equally often and drift in the host, or a first launch's warm-up, hits all alike."""
    if not names:
        return []
    n = len(names)
    return [(r, names[(r + i) % n]) for r in range(rounds) for i in range(n)]


@dataclass
class Sample:
    round: int
    goodput: float | None  # None: the launch or its bench failed
    figures: dict[str, Any] = field(default_factory=dict)


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    iv = median_interval(values)
    return {
        "n": len(values),
        "samples": [round(v, 4) for v in values],
        "median": median(values),
        "mad": mad(values),
        "ci": [iv.lo, iv.hi],
        "ci_coverage": iv.coverage,
    }


def judge_final(
    samples: Mapping[str, Sequence[Sample]], roles: Mapping[str, str], alpha: float = 0.05
) -> dict[str, Any]:
    """What the final round says. ``samples``: configuration key -> its samples; ``roles``: role
    (defaults, bringup, peer) -> configuration key (two roles may share one configuration).
    The ratio bringup / peer is taken round by round (the two measured in the same round), its
    median and range over the rounds; bringup's winner beats the defaults when the one-sided exact
    Mann-Whitney test passes at ``alpha`` and the median gain exceeds the noise (the larger 1.4826 x
    MAD), bringup/tuning/verdict.py's rule with one comparison and one look."""
    good = {k: [s for s in v if s.goodput is not None] for k, v in samples.items()}
    out: dict[str, Any] = {
        "configs": {k: spread([s.goodput for s in v if s.goodput is not None]) for k, v in good.items()}
    }
    b, p, d = roles.get("bringup"), roles.get("peer"), roles.get("defaults")
    if b is not None and p is not None:
        if b == p:
            out["ratio"] = {
                "median": 1.0,
                "min": 1.0,
                "max": 1.0,
                "rounds": 0,
                "note": "the same configuration",
            }
        else:
            by_round = {s.round: s.goodput for s in good[p]}
            ratios = [s.goodput / by_round[s.round] for s in good[b] if by_round.get(s.round)]
            out["ratio"] = (
                {"median": median(ratios), "min": min(ratios), "max": max(ratios), "rounds": len(ratios)}
                if ratios
                else {"rounds": 0, "note": "no round measured both"}
            )
    if b is not None and d is not None:
        if b == d:
            out["beats_defaults"] = {"beats": False, "note": "bringup kept the defaults"}
        else:
            bv, dv = [s.goodput for s in good[b]], [s.goodput for s in good[d]]
            c = compare(Arm(1, {}, "finalist", values=bv), Arm(0, {}, "baseline", values=dv), alpha)
            out["beats_defaults"] = {
                "beats": c.passed,
                "p_value": c.p_value,
                "gain": c.gain,
                "noise": c.noise,
                "level": alpha,
                "gain_share": c.gain / median(dv) if dv and median(dv) else None,
            }
    return out


# -- the table and the plot ---------------------------------------------------------------------
def _f(v: Any, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def table(report: Mapping[str, Any]) -> str:
    """One engine's comparison as a Markdown table, with the lines that say what it rests on."""
    final, peer, bu = report["final"], report["peer"], report["bringup"]
    cfgs, roles = final["verdict"]["configs"], final["roles"]
    rows = [
        "| side | configuration | goodput (req/s), final round: median [range] | launches | device min |",
        "|---|---|---|---|---|",
    ]
    for role, side in (("defaults", None), ("peer", peer), ("bringup", bu)):
        key = roles.get(role)
        s = cfgs.get(key, {}) if key else {}
        rng = f" [{_f(min(s['samples']))}-{_f(max(s['samples']))}]" if s.get("samples") else ""
        who = {"defaults": "defaults", "peer": f"peer: {peer['tool']}", "bringup": "bringup tune"}[role]
        launches = "-" if side is None else str(side["launches"])
        minutes = "-" if side is None else _f(side["device_s"] / 60, 1)
        rows.append(
            f"| {who} | `{final['describe'].get(key, '?')}` | {_f(s.get('median'))}{rng} | {launches} | {minutes} |"
        )
    ratio, beats = final["verdict"].get("ratio", {}), final["verdict"].get("beats_defaults", {})
    share_l = bu["launches"] / peer["launches"] if peer["launches"] else None
    share_t = bu["device_s"] / peer["device_s"] if peer["device_s"] else None
    lines = [
        *rows,
        "",
        f"- ratio bringup / peer (paired by round): **{_f(ratio.get('median'), 3)}**"
        + (
            f" (range {_f(ratio.get('min'), 3)}-{_f(ratio.get('max'), 3)} over {ratio['rounds']} rounds)"
            if ratio.get("rounds")
            else ""
        )
        + (f" ({ratio['note']})" if ratio.get("note") else ""),
        f"- bringup's launches and device time against the peer's: {_f(share_l, 2)} and {_f(share_t, 2)}"
        f" (measure: <= 0.30 and <= 0.40)",
        "- bringup's winner beats the defaults beyond noise: "
        + (
            ("**yes**" if beats.get("beats") else "no")
            + (
                f" (p = {beats['p_value']:.3g} at {beats['level']:g}, gain {_f(beats.get('gain'), 3)} vs noise {_f(beats.get('noise'), 3)})"
                if "p_value" in beats
                else f" ({beats.get('note', '')})"
            )
            if beats
            else "-"
        ),
        f"- bringup's own verdict: {bu.get('verdict') or 'none (no repeat phase at this size)'}",
        _slo_line(report["slo"]),
    ]
    return "\n".join(lines)


def _slo_line(slo: Mapping[str, Any]) -> str:
    """The SLO, how it was set, and where the defaults' own aggregate p99s stand against it."""

    def stand(v: float, limit: float) -> str:
        return "over" if v > limit else "within"

    t, i = slo["defaults_p99_ttft_s"], slo["defaults_p99_itl_s"]
    return (
        f"- SLO: TTFT p99 <= {slo['ttft_s'] * 1000:.1f} ms, ITL p99 <= {slo['itl_s'] * 1000:.2f} ms ({slo['rule']}); "
        f"the defaults' own p99s: TTFT {t * 1000:.1f} ms ({stand(t, slo['ttft_s'])}), ITL {i * 1000:.2f} ms "
        f"({stand(i, slo['itl_s'])}): the defaults {'meet' if slo.get('defaults_meet') else 'do not meet'} it"
    )


def _svg_series(
    xs: Sequence[float], ys: Sequence[float], sx: Any, sy: Any, color: str, label: str
) -> list[str]:
    out = []
    best, path = 0.0, []
    for x, y in zip(xs, ys, strict=True):
        out.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}" fill-opacity="0.5"><title>{html.escape(label)} launch {x:g}: {y:.3g}</title></circle>'
        )
        best = max(best, y)
        path.append(f"{sx(x):.1f},{sy(best):.1f}")
    if path:
        out.append(f'<polyline points="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="2"/>')
    return out


def svg(report: Mapping[str, Any], width: int = 640, height: int = 360) -> str:
    """Goodput against launches for both sides: each launch's own measurement (dots) and the best
    so far (line); dashed, the final round's medians of each side's winner and of the defaults."""
    sides = [("peer", "#1f77b4"), ("bringup", "#d62728")]
    series = {s: report[s].get("curve") or [] for s, _ in sides}
    final = report["final"]
    medians = {
        role: final["verdict"]["configs"].get(key, {}).get("median") for role, key in final["roles"].items()
    }
    ys = [y for c in series.values() for _, y in c] + [m for m in medians.values() if m is not None]
    xmax = max([x for c in series.values() for x, _ in c] + [1])
    ymax = max(ys + [1e-9]) * 1.1
    left, right, top, bottom = 56, 150, 28, 40
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + pw * (x / xmax)

    def sy(y: float) -> float:
        return top + ph * (1 - y / ymax)

    title = f"{report['engine']} {report.get('version') or ''}: goodput under the SLO against launches"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="16" font-size="13">{html.escape(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#333"/>',
        f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle">launches</text>',
        f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" text-anchor="middle">goodput (req/s)</text>',
    ]
    for i in range(5):
        y = ymax * i / 4
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    for i in range(0, int(xmax) + 1, max(1, int(xmax) // 8)):
        out.append(f'<text x="{sx(i):.1f}" y="{top + ph + 14}" text-anchor="middle">{i}</text>')
    legend_y = top + 8
    for side, color in sides:
        c = series[side]
        out += _svg_series([x for x, _ in c], [y for _, y in c], sx, sy, color, side)
        out.append(
            f'<text x="{left + pw + 10}" y="{legend_y}" fill="{color}">{side}: each launch, best so far</text>'
        )
        legend_y += 16
    for role, color in (("defaults", "#555"), ("peer", "#1f77b4"), ("bringup", "#d62728")):
        m = medians.get(role)
        if m is None:
            continue
        out.append(
            f'<line x1="{left}" y1="{sy(m):.1f}" x2="{left + pw}" y2="{sy(m):.1f}" stroke="{color}" stroke-dasharray="5,4"/>'
        )
        out.append(
            f'<text x="{left + pw + 10}" y="{legend_y}" fill="{color}">final round, {role}: {m:.3g}</text>'
        )
        legend_y += 16
    out.append("</svg>")
    return "\n".join(out) + "\n"
