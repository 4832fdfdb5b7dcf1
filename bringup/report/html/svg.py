"""Plot geometry for the HTML report, computed in Python and drawn by the template as inline SVG.

Nothing here writes markup: a chart is numbers (pixel positions) and plain strings (labels,
tooltips), so the template's autoescaping covers every label, and the page needs no JavaScript.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Pixel box of the plotting area inside a chart: room on the left for tick labels and the axis
# title, at the bottom for tick labels and the x title.
WIDTH, HEIGHT = 620, 340
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 70, 20, 30, 52


@dataclass
class Tick:
    pos: float  # pixel
    label: str


@dataclass
class Mark:
    """One data mark. `cls` picks the colour in the page's CSS (e.g. `status-fails`)."""

    shape: str  # rect | circle | ring | cross
    cls: str
    x: float
    y: float
    w: float = 0.0
    h: float = 0.0
    r: float = 4.0
    title: str = ""  # tooltip (the SVG <title>), the full story of the mark
    label: str = ""  # text drawn beside the mark
    label_x: float = 0.0
    label_y: float = 0.0
    href: str = ""  # in-page link (e.g. to the failure's card)


@dataclass
class Line:
    points: str  # "x,y x,y ..." for <polyline>
    cls: str
    label: str = ""
    label_x: float = 0.0
    label_y: float = 0.0


@dataclass
class Chart:
    kind: str  # timeline | pareto | sweep: a CSS class and what tests look for
    title: str
    width: int
    height: int
    x0: float  # plotting area, pixels
    y0: float
    x1: float
    y1: float
    xlabel: str
    ylabel: str
    xticks: list[Tick] = field(default_factory=list)
    yticks: list[Tick] = field(default_factory=list)
    xgrid: bool = True
    ygrid: bool = True
    marks: list[Mark] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, text)
    note: str = ""  # a caption under the chart

    @property
    def description(self) -> str:
        """What a screen reader announces for the whole chart."""
        return f"{self.title}: {self.ylabel} against {self.xlabel}" if self.ylabel else self.title


# -- scales and ticks ---------------------------------------------------------------------------


def fmt_num(v: float, step: float | None = None) -> str:
    """A tick or value label: as many decimals as the tick step needs, thousands separated."""
    if step is not None and step > 0:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9))
        if abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6:  # 2.5, 0.25 steps
            decimals += 1
        return f"{v:,.{decimals}f}"
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 × 10^k) covering [lo, hi]: the first and last tick
    enclose the data, so they become the axis domain."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"ticks need finite bounds, got {lo}, {hi}")
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:  # one value: give it a visible range around itself
        pad = abs(lo) * 0.5 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag * (1 + 1e-9))
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    n = round((end - start) / step)
    # Rounding error would print 0.30000000000000004: snap each tick to the step's grid.
    return [round(start + i * step, 12) for i in range(n + 1)]


@dataclass
class Scale:
    """Data -> pixels along one axis, linear or log2."""

    d0: float
    d1: float
    p0: float
    p1: float
    log2: bool = False

    def __call__(self, v: float) -> float:
        a, b, x = self.d0, self.d1, v
        if self.log2:
            a, b, x = math.log2(a), math.log2(b), math.log2(max(v, 1e-12))
        if b == a:
            return (self.p0 + self.p1) / 2
        return self.p0 + (x - a) / (b - a) * (self.p1 - self.p0)


def linear_axis(values: list[float], p0: float, p1: float, *, zero: bool = True) -> tuple[Scale, list[Tick]]:
    """A linear scale over the values (from 0 when `zero`: throughput and latency start at nothing)."""
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    ticks = nice_ticks(lo, hi)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else None
    scale = Scale(ticks[0], ticks[-1], p0, p1)
    return scale, [Tick(scale(t), fmt_num(t, step)) for t in ticks]


def log2_axis(values: list[float], p0: float, p1: float) -> tuple[Scale, list[Tick]]:
    """A log2 scale for concurrencies (1, 2, 4, ... 256): equal room for each doubling."""
    lo, hi = min(values), max(values)
    a, b = 2 ** math.floor(math.log2(lo)), 2 ** math.ceil(math.log2(hi))
    if a == b:
        a, b = a / 2, b * 2
    scale = Scale(a, b, p0, p1, log2=True)
    ticks = []
    k = math.floor(math.log2(a))
    while 2**k <= b * (1 + 1e-9):
        ticks.append(Tick(scale(2**k), fmt_num(2**k)))
        k += 1
    return scale, ticks


def wants_log2(values: list[float]) -> bool:
    """Concurrency sweeps usually double; a linear axis would crush the low end."""
    return bool(values) and min(values) > 0 and max(values) / min(values) >= 8


# -- charts -------------------------------------------------------------------------------------


@dataclass
class Bar:
    start: float
    length: float
    row_label: str  # left of the row, e.g. "#3 screen"
    cls: str  # colour class
    label: str  # beside the bar, e.g. "nan-output"
    title: str
    href: str = ""


def timeline(bars: list[Bar], *, xlabel: str, title: str, legend: list[tuple[str, str]]) -> Chart:
    """A Gantt chart: one row per launch, time along x, a bar from its start to its end."""
    row_h, left = 24, 110
    # Leave room on the right for the last bar's label: labels sit just after their bar.
    width, top, bottom, right = 1000, 16, 48, 170
    height = top + bottom + row_h * max(1, len(bars))
    x0, x1, y0 = left, width - right, top
    end = max((b.start + b.length for b in bars), default=1.0)
    scale, ticks = linear_axis([0.0, end], x0, x1)
    c = Chart(
        kind="timeline",
        title=title,
        width=width,
        height=height,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=height - bottom,
        xlabel=xlabel,
        ylabel="",
        xticks=ticks,
        ygrid=False,
        legend=legend,
    )
    for i, b in enumerate(bars):
        y = top + i * row_h + 4
        bx, bw = (
            scale(b.start),
            max(2.0, scale(b.start + b.length) - scale(b.start)),
        )  # a 1 s screen stays visible
        c.yticks.append(Tick(y + (row_h - 8) / 2, b.row_label))
        c.marks.append(
            Mark(
                "rect",
                f"bar {b.cls}",
                bx,
                y,
                w=bw,
                h=row_h - 8,
                title=b.title,
                label=b.label,
                label_x=bx + bw + 5,
                label_y=y + (row_h - 8) / 2,
                href=b.href,
            )
        )
    c.note = "Launches in order, end to end; click a failed launch for its evidence."
    return c


@dataclass
class Point:
    x: float
    y: float
    cls: str  # pt | pt pareto | pt pruned
    title: str
    label: str = ""
    best: bool = False


def scatter(
    points: list[Point],
    *,
    front: list[tuple[float, float]],
    xlabel: str,
    ylabel: str,
    title: str,
    vline: tuple[float, str] | None = None,
    legend: list[tuple[str, str]],
) -> Chart:
    """Throughput against p99 latency: every measured point, the Pareto front as a step line
    (up and to the left is better), the best point ringed, an SLO as a dashed vertical line."""
    x0, y0, x1, y1 = MARGIN_L, MARGIN_T, WIDTH - MARGIN_R, HEIGHT - MARGIN_B
    xs = [p.x for p in points] + ([vline[0]] if vline else [])
    xscale, xticks = linear_axis(xs, x0, x1)
    yscale, yticks = linear_axis([p.y for p in points], y1, y0)
    c = Chart(
        kind="pareto",
        title=title,
        width=WIDTH,
        height=HEIGHT,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        xlabel=xlabel,
        ylabel=ylabel,
        xticks=xticks,
        yticks=yticks,
        legend=legend,
    )
    if len(front) > 1:
        # Staircase: from each front point, stay at its throughput until the next one's latency.
        f = sorted(front)
        pts = [f"{xscale(f[0][0]):.1f},{yscale(f[0][1]):.1f}"]
        for (_, ya), (xb, yb) in zip(f, f[1:], strict=False):
            pts += [f"{xscale(xb):.1f},{yscale(ya):.1f}", f"{xscale(xb):.1f},{yscale(yb):.1f}"]
        c.lines.append(Line(" ".join(pts), "front"))
    if vline:
        vx = xscale(vline[0])
        c.lines.append(Line(f"{vx:.1f},{y0:.1f} {vx:.1f},{y1:.1f}", "slo", vline[1], vx + 4, y0 + 10))
    placed: list[tuple[float, float]] = []
    # The best point's label first, so that a crowded corner keeps it and drops its neighbours'
    # (their numbers stay in the tooltip and in the points table).
    for p in sorted(points, key=lambda p: not p.best):
        px, py = xscale(p.x), yscale(p.y)
        label = p.label
        if label and any(abs(px - qx) < 26 and abs(py - qy) < 13 for qx, qy in placed):
            label = ""
        if label:
            placed.append((px, py))
        c.marks.append(
            Mark(
                "circle",
                p.cls,
                px,
                py,
                r=5 if "pareto" in p.cls else 4,
                title=p.title,
                label=label,
                label_x=px + 7,
                label_y=py - 9,
            )
        )
        if p.best:
            c.marks.append(Mark("ring", "best", px, py, r=10, title=f"best: {p.title}"))
    return c


def line_chart(
    xs: list[float],
    ys: list[float],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    titles: list[str],
    hline: tuple[float, str] | None = None,
) -> Chart:
    """One measured series (a concurrency sweep): dots joined by a line, an optional SLO line."""
    x0, y0, x1, y1 = MARGIN_L, MARGIN_T, WIDTH - MARGIN_R, HEIGHT - MARGIN_B
    if wants_log2(xs):
        xscale, xticks = log2_axis(xs, x0, x1)
        xlabel += " (log scale)"
    else:
        xscale, xticks = linear_axis(xs, x0, x1)
    yscale, yticks = linear_axis(ys + ([hline[0]] if hline else []), y1, y0)
    c = Chart(
        kind="sweep",
        title=title,
        width=WIDTH,
        height=HEIGHT,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        xlabel=xlabel,
        ylabel=ylabel,
        xticks=xticks,
        yticks=yticks,
    )
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    c.lines.append(Line(" ".join(f"{xscale(xs[i]):.1f},{yscale(ys[i]):.1f}" for i in order), "series"))
    if hline:
        hy = yscale(hline[0])
        c.lines.append(Line(f"{x0:.1f},{hy:.1f} {x1:.1f},{hy:.1f}", "slo", hline[1], x0 + 4, hy - 5))
    for i in order:
        c.marks.append(Mark("circle", "pt", xscale(xs[i]), yscale(ys[i]), r=4, title=titles[i]))
    return c


@dataclass
class SpreadPoint:
    """A configuration's objective at one level of a knob: one search measurement, or the
    median and interval of its repeats."""

    level: int  # index of the knob's level on the x axis
    y: float
    lo: float | None = None  # repeats: the interval for the median
    hi: float | None = None
    cls: str = "pt"  # pt (a search measurement) | median (repeats)
    best: bool = False
    title: str = ""


def spread_chart(
    levels: list[str],
    points: list[SpreadPoint],
    *,
    band: tuple[float, float, float] | None,
    xlabel: str,
    ylabel: str,
    title: str,
    legend: list[tuple[str, str]],
) -> Chart:
    """The objective against one knob's levels: every search measurement as a dot, each repeated
    configuration as its median with its interval as a bar, the baseline's interval as a band
    across the plot (``band``: lo, median, hi), the winner ringed."""
    x0, y0, x1, y1 = MARGIN_L, MARGIN_T, WIDTH - MARGIN_R, HEIGHT - MARGIN_B
    ys = [p.y for p in points] + [v for p in points for v in (p.lo, p.hi) if v is not None]
    ys += list(band) if band else []
    yscale, yticks = linear_axis(ys, y1, y0)
    step = (x1 - x0) / max(1, len(levels))
    xpos = [x0 + step * (i + 0.5) for i in range(len(levels))]
    c = Chart(
        kind="spread",
        title=title,
        width=WIDTH,
        height=HEIGHT,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        xlabel=xlabel,
        ylabel=ylabel,
        xticks=[Tick(x, lab) for x, lab in zip(xpos, levels, strict=True)],
        yticks=yticks,
        xgrid=False,
        legend=legend,
    )
    if band:
        lo, mid, hi = band
        top, bottom = yscale(hi), yscale(lo)
        c.marks.append(
            Mark(
                "rect",
                "band",
                x0,
                top,
                w=x1 - x0,
                h=max(1.0, bottom - top),
                title=f"baseline: {fmt_num(lo)} .. {fmt_num(hi)}",
            )
        )
        my = yscale(mid)
        c.lines.append(Line(f"{x0:.1f},{my:.1f} {x1:.1f},{my:.1f}", "baseline", "baseline", x0 + 4, my - 5))
    seen: dict[int, int] = {}
    for p in sorted(points, key=lambda p: p.cls != "pt"):  # the medians on top
        n = seen.get(p.level, 0)
        seen[p.level] = n + 1
        off = ((n % 5) - 2) * min(6.0, step / 12) if p.cls == "pt" else step / 5
        px, py = xpos[p.level] + off, yscale(p.y)
        if p.lo is not None and p.hi is not None:
            top, bottom = yscale(p.hi), yscale(p.lo)
            c.marks.append(
                Mark("rect", "interval", px - 2, top, w=4, h=max(1.0, bottom - top), title=p.title)
            )
        c.marks.append(Mark("circle", p.cls, px, py, r=5 if p.cls == "median" else 3.5, title=p.title))
        if p.best:
            c.marks.append(Mark("ring", "best", px, py, r=10, title=f"chosen: {p.title}"))
    return c
