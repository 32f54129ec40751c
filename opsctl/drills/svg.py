"""The pictures of a drill report, as inline SVG (no scripts, no external assets).

`burn_chart`: two panels over minutes since the fault. Above, the burn rate of each charted SLO
over the 5m (dashed) and the 1h (solid) windows on a log scale, one gridline per decade, with the
page thresholds dashed and labelled in the right margin. Below, the share of the period's error
budget the drill spent, ticks at round values (0/10/20%...), with the budget stop conditions drawn
as dashed lines (labelled in the margin). The drill's events (fault, detection, page, ack,
failover, ticket, recovery...) are dotted verticals whose labels sit in a lane above the panels, in
staggered rows placed so that no label overlaps another label or another event's line; nothing is
written over the data.

`hop_waterfall`: a chain drill's hops, one bar each from the fault to when the hop happened.

`svg_trend.trend_chart` (`opsctl drill history`'s chart) draws with the helpers here.
"""

from __future__ import annotations

import math
from html import escape

from opsctl.drills.report_model import Chart, Hop, Threshold
from opsctl.drills.text import duration_text, threshold_text

WIDTH = 900
LEFT, RIGHT = 70, 140  # the right margin holds the threshold and stop labels
PLOT_RIGHT = WIDTH - RIGHT
COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")
LANE_ROW = 13  # px per row of event labels
MAX_LANE_ROWS = 8
BURN_HEIGHT, SPENT_HEIGHT = 180, 120
FONT = 11


def text_width(text: str, size: int = FONT) -> float:
    """A generous estimate of a sans-serif label's width (wide enough for capitals and digits)."""
    return len(text) * size * 0.62 + 2


def _empty(message: str) -> str:
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="400" height="40" role="img">'
            f'<text x="10" y="25" font-size="13">{escape(message)}</text></svg>')


def place_labels(items: list[tuple[float, str]], left: float, right: float,
                 rows: int = MAX_LANE_ROWS) -> list[tuple[float, float, int, str]]:
    """Labels for vertical event lines at x, in rows of a lane: returns (x, label_x0, row, anchor)
    per item, where the label spans [label_x0, label_x0 + width]. A label starts just right of its
    line, or ends just left of it (near the right edge, or when that fits a higher row); a label in
    row r overlaps no other label in row r, no line that comes down from a label in a row above it,
    and its own line crosses no label in the rows below. When no row fits, a new top row is opened
    above the others (every line then starts lower, so nothing placed before is crossed); only past
    `rows` rows is the last row used regardless."""
    placed: list[list] = []  # [line x, x0, x1, row, anchor]

    def fits(x, x0, x1, r) -> bool:
        for px, p0, p1, prow, _ in placed:
            if prow == r and not (x1 + 4 <= p0 or x0 >= p1 + 4):
                return False  # overlaps a label in the same row
            if prow < r and x0 - 1 <= px <= x1 + 1:
                return False  # a line from a label above comes down through this one
            if prow > r and p0 - 1 <= x <= p1 + 1:
                return False  # this label's line would come down through a label below
        return True

    for x, label in items:
        w = text_width(label)
        candidates = []
        if x + 3 + w <= right:
            candidates.append((x + 3, "start"))
        if x - 3 - w >= left or not candidates:
            candidates.append((max(left, x - 3 - w), "end"))
        used = max([p[3] for p in placed], default=-1) + 1
        choice = None
        for r in range(min(used + 1, rows)):
            for x0, anchor in candidates:
                if fits(x, x0, x0 + w, r):
                    choice = (x0, anchor, r)
                    break
            if choice:
                break
        if choice is None and used < rows:
            x0, anchor = candidates[0]
            if fits(x, x0, x0 + w, -1):  # a new top row: only its own line can cross something
                for p in placed:
                    p[3] += 1
                choice = (x0, anchor, 0)
        if choice is None:
            x0, anchor = candidates[0]
            choice = (x0, anchor, rows - 1)
        placed.append([x, choice[0], choice[0] + w, choice[2], choice[1]])
    return [(x, x0, row, anchor) for x, x0, _, row, anchor in placed]


def nice_ceiling(top: float) -> tuple[float, float]:
    """(axis maximum, tick step) for a share 0..top: a step of 1, 2, 2.5 or 5 x 10^k, at most 6 steps."""
    top = max(top, 1e-4)
    for exp in range(-5, 4):
        for base in (1, 2, 2.5, 5):
            step = base * 10 ** exp
            n = math.ceil(round(top / step, 9))
            if n <= 6:
                return max(n, 1) * step, step
    return top, top / 4


def decade_text(exp: int) -> str:
    """A log axis' decade: `0.01x`, `1x`, `10000x` (never `1e+04x`)."""
    return f"{10 ** exp:.{max(0, -exp)}f}x"


def percent_text(share: float) -> str:
    """`0%`, `25%`, `2.5%`, `0.05%`: a share as a round percentage, no more digits than it needs."""
    pct = share * 100
    for digits in range(0, 4):
        if abs(round(pct, digits) - pct) < 1e-9:
            return f"{pct:.{digits}f}%"
    return f"{pct:.3g}%"


def burn_chart(chart: Chart | None) -> str:
    """The report's `Chart` (None: nothing to chart): the SLOs drawn with their short labels, each
    point's burn_5m, burn_1h and spent per SLO, the event markers, the page thresholds (or the
    1h page factor) and the budget-spent stop conditions."""
    points = chart.points if chart else ()
    slos = chart.slos if chart else ()
    if chart is None or not points or not slos:
        return _empty("no samples to chart")
    labels = chart.labels
    markers = chart.markers
    xs = [p.offset for p in points]
    x_min, x_max = min(xs + [m.offset for m in markers]), max(xs + [m.offset for m in markers])
    if x_max <= x_min:
        x_max = x_min + 60

    def x(offset: float) -> float:
        return LEFT + (offset - x_min) / (x_max - x_min) * (PLOT_RIGHT - LEFT)

    thresholds = list(chart.thresholds)
    if not thresholds and chart.page_factor:
        thresholds = [Threshold(window="1h", factor=chart.page_factor)]
    stops = chart.stops

    # event labels in a lane above the panels
    placed = place_labels([(x(m.offset), m.label) for m in markers], LEFT, PLOT_RIGHT)
    lane_rows = max([row for _, _, row, _ in placed], default=-1) + 1
    lane_top = 34
    burn_top = lane_top + lane_rows * LANE_ROW + 8
    burn_bottom = burn_top + BURN_HEIGHT
    spent_top = burn_bottom + 52
    spent_bottom = spent_top + SPENT_HEIGHT

    burns = [p.value(s, k) for p in points for s in p.values if s in slos for k in ("burn_5m", "burn_1h")]
    positive = [b for b in burns if b is not None and b > 0]
    top = max(positive + [t.factor for t in thresholds] + [1.0])
    lo_exp, hi_exp = -2, max(1, math.ceil(math.log10(top * 1.5)))

    def y_burn(value: float) -> float:
        v = min(max(value, 10 ** lo_exp), 10 ** hi_exp)
        frac = (math.log10(v) - lo_exp) / (hi_exp - lo_exp)
        return burn_bottom - frac * (burn_bottom - burn_top)

    spent = [p.value(s, "spent") for p in points for s in p.values if s in slos]
    top_spent = max([s for s in spent if s is not None] + [st.above for st in stops] + [0.0])
    spent_max, spent_step = nice_ceiling(top_spent * 1.02)

    def y_spent(value: float) -> float:
        return spent_bottom - min(max(value, 0.0), spent_max) / spent_max * (spent_bottom - spent_top)

    # legend rows (wrapped by width)
    legend, ly = [], spent_bottom + 52
    lx: float = LEFT
    entries: list[tuple[str, str, str | None]] = [(COLORS[n % len(COLORS)], _short(labels.get(slo, slo)), None)
                                                  for n, slo in enumerate(slos)]
    entries += [("#555555", "1h window", None), ("#555555", "5m window", "3 2")]
    entries += [("#e65100", f"stop condition: {st.label or st.slo or 'budget'} at"
                 f" {percent_text(st.above)} spent", "6 4") for st in stops]
    for color, label, dash in entries:
        w = 22 + text_width(label) + 18
        if lx + w > WIDTH - 10 and lx > LEFT:
            lx, ly = LEFT, ly + 16
        legend.append((lx, ly, color, label, dash))
        lx += w
    height = ly + 14

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
           f' height="{height}" role="img" aria-label="error budget burn chart" font-family="sans-serif"'
           f' font-size="{FONT}">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="18" font-size="13" font-weight="bold">Burn rate over the 5m and 1h windows'
           ' (log scale)</text>',
           f'<text x="{LEFT}" y="{spent_top - 14}" font-size="13" font-weight="bold">'
           'Error budget spent by the drill (share of the period)</text>']
    # grids and axes
    for e in range(lo_exp, hi_exp + 1):
        yy = y_burn(10 ** e)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{PLOT_RIGHT}" y2="{yy:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{decade_text(e)}</text>')
    steps = int(round(spent_max / spent_step))
    for i in range(steps + 1):
        value = spent_step * i
        yy = y_spent(value)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{PLOT_RIGHT}" y2="{yy:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{percent_text(value)}</text>')
    for y0, y1 in ((burn_top, burn_bottom), (spent_top, spent_bottom)):
        out.append(f'<line x1="{LEFT}" y1="{y1}" x2="{PLOT_RIGHT}" y2="{y1}" stroke="#333"/>')
        out.append(f'<line x1="{LEFT}" y1="{y0}" x2="{LEFT}" y2="{y1}" stroke="#333"/>')
    step = _tick_step(x_max - x_min)
    t = math.ceil(x_min / step) * step
    while t <= x_max:
        xx = x(t)
        for yb in (burn_bottom, spent_bottom):
            out.append(f'<line x1="{xx:.1f}" y1="{yb}" x2="{xx:.1f}" y2="{yb + 4}" stroke="#333"/>')
        out.append(f'<text x="{xx:.1f}" y="{spent_bottom + 16}" text-anchor="middle">{t / 60:+.0f}m</text>')
        t += step
    out.append(f'<text x="{(LEFT + PLOT_RIGHT) / 2}" y="{spent_bottom + 32}" text-anchor="middle">'
               'minutes since the fault</text>')
    # thresholds and stops: dashed lines, labels in the right margin (apart from each other)
    margin = []
    for th in thresholds:
        yy = y_burn(th.factor)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{PLOT_RIGHT}" y2="{yy:.1f}" stroke="#d62728"'
                   ' stroke-dasharray="6 4"/>')
        margin.append((yy, f"page {th.window} {threshold_text(th.factor)}", "#d62728", burn_top, burn_bottom))
    for st in stops:
        yy = y_spent(st.above)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{PLOT_RIGHT}" y2="{yy:.1f}" stroke="#e65100"'
                   f' stroke-dasharray="6 4"><title>{escape(st.name or "")}</title></line>')
        margin.append((yy, f"stop {percent_text(st.above)}", "#e65100", spent_top, spent_bottom))
    for yy, label, color, _, _ in _spread(margin):
        out.append(f'<text x="{PLOT_RIGHT + 6}" y="{yy + 4:.1f}" fill="{color}">{escape(_fit(label, RIGHT - 10))}</text>')
    # event markers: a dotted line from the label's row down through both panels (not through the titles)
    for (xx, x0, row, anchor), m in zip(placed, markers):
        base = lane_top + row * LANE_ROW + 10
        out.append(f'<path class="event" d="M{xx:.1f},{base - 9} V{burn_bottom} M{xx:.1f},{spent_top} V{spent_bottom}"'
                   ' stroke="#888" stroke-dasharray="2 3" fill="none"/>')
        out.append(f'<text x="{x0:.1f}" y="{base}" fill="#444">{escape(m.label)}</text>')
    # series
    for n, slo in enumerate(slos):
        color = COLORS[n % len(COLORS)]
        for key, width, dash in (("burn_1h", 2, None), ("burn_5m", 1.5, "3 2")):
            pts = [(x(p.offset), y_burn(v)) for p in points if (v := p.value(slo, key)) is not None]
            out.append(_polyline(pts, color, width, dash))
        pts = [(x(p.offset), y_spent(v)) for p in points if (v := p.value(slo, "spent")) is not None]
        out.append(_polyline(pts, color, 2, None))
    for lx, ly, color, label, dash in legend:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" stroke="{color}" stroke-width="2"{d}/>')
        out.append(f'<text x="{lx + 22}" y="{ly}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(p for p in out if p)


def _polyline(pts, color, width, dash) -> str:
    if len(pts) < 2:
        return ""
    d = f' stroke-dasharray="{dash}"' if dash else ""
    path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
    return f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="{width}"{d}/>'


def _spread(labels: list[tuple], gap: float = 13) -> list[tuple]:
    """Margin labels moved apart (at least `gap` px) within their panel, in y order."""
    out: list[tuple] = []
    for item in sorted(labels, key=lambda t: t[0]):
        yy, label, color, y0, y1 = item
        if out and yy < out[-1][0] + gap:
            yy = out[-1][0] + gap
        out.append((min(max(yy, y0 + 4), y1 + 4), label, color, y0, y1))
    return out


def _fit(label: str, width: float) -> str:
    while len(label) > 4 and text_width(label) > width:
        label = label[:-2] + "…"
    return label


def _tick_step(span: float) -> int:
    for step in (60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= 12:
            return step
    return 14400


def _short(slo: str) -> str:
    return slo if len(slo) <= 32 else "..." + slo[-29:]


# ---------------------------------------------------------------------------------------------
# A chain drill's hops


def hop_waterfall(hops: tuple[Hop, ...] | list[Hop]) -> str:
    """One row per hop, a bar from the fault (0) to when the hop happened, its time at the bar's
    end; a hop that never happened is named so in red (required) or grey (optional)."""
    if not hops:
        return _empty("no hops to chart")
    label_w = min(420, max(text_width(f"{h.title} ({h.component})") for h in hops) + 10)
    left, right_pad, row_h, top = label_w + 10, 90, 24, 40
    plot_right = WIDTH - right_pad
    times = [h.seconds for h in hops if h.seconds is not None]
    span = max(times + [1.0])
    step = _round_step(span)
    axis_max = math.ceil(span / step) * step

    def x(sec: float) -> float:
        return left + max(sec, 0.0) / axis_max * (plot_right - left)

    height = top + len(hops) * row_h + 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
           f' height="{height}" role="img" aria-label="hop waterfall" font-family="sans-serif" font-size="{FONT}">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">Each hop\'s time from the fault</text>']
    bottom = top + len(hops) * row_h
    t = 0.0
    while t <= axis_max + 1e-9:
        xx = x(t)
        out.append(f'<line x1="{xx:.1f}" y1="{top - 4}" x2="{xx:.1f}" y2="{bottom}" stroke="#eeeeee"/>')
        out.append(f'<text x="{xx:.1f}" y="{bottom + 16}" text-anchor="middle">{duration_text(t)}</text>')
        t += step
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{plot_right}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{top - 4}" x2="{left}" y2="{bottom}" stroke="#333"/>')
    out.append(f'<text x="{(left + plot_right) / 2}" y="{bottom + 34}" text-anchor="middle">time since the fault</text>')
    for i, h in enumerate(hops):
        y = top + i * row_h
        name = _fit(f"{h.title} ({h.component})", label_w)
        out.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(name)}</text>')
        if h.seconds is None:
            color = "#c62828" if h.required else "#757575"
            out.append(f'<text class="missing" x="{left + 6}" y="{y + 15}" fill="{color}">never happened'
                       + (f": {escape(_fit(h.failed, plot_right - left - 110))}" if h.failed else "")
                       + "</text>")
            continue
        color = "#2e7d32" if h.passed else "#c62828"
        x1 = x(h.seconds)
        out.append(f'<rect class="hop" x="{left}" y="{y + 5}" width="{max(x1 - left, 2):.1f}" height="{row_h - 10}"'
                   f' fill="{color}"><title>{escape(h.hop)}: {duration_text(h.seconds)}</title></rect>')
        out.append(f'<text x="{max(x1, left + 2) + 5:.1f}" y="{y + 15}">{duration_text(h.seconds)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _round_step(span: float) -> float:
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600):
        if span / step <= 8:
            return step
    return 7200
