"""The error-budget burn chart of a drill report, as inline SVG (no scripts, no external assets).

Two panels over minutes since the fault: the burn rate over 1h of each charted SLO on a log scale,
with the page threshold dashed; below it, the share of the period's error budget the drill spent.
Vertical lines mark the drill's events (fault, detection, page, acknowledgement, failover, ticket,
recovery, rollback).
"""

from __future__ import annotations

import math
from html import escape

from opsctl.drills.text import threshold_text

WIDTH, HEIGHT = 860, 460
LEFT, RIGHT = 70, 20
TOP_PANEL = (40, 220)  # y from, y to
BOTTOM_PANEL = (270, 400)
COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e")


def burn_chart(chart: dict) -> str:
    """`chart`: {"slos": [...], "points": [{"offset", "values": {slo: {"burn_1h", "spent"}}}],
    "markers": [{"offset", "label"}], "page_factor": float}."""
    points = chart.get("points") or []
    slos = chart.get("slos") or []
    if not points or not slos:
        return ('<svg xmlns="http://www.w3.org/2000/svg" width="400" height="40" role="img">'
                '<text x="10" y="25" font-size="13">no samples to chart</text></svg>')
    xs = [p["offset"] for p in points]
    x_min, x_max = min(xs + [m["offset"] for m in chart.get("markers", [])]), max(xs)
    if x_max <= x_min:
        x_max = x_min + 60

    def x(offset: float) -> float:
        return LEFT + (offset - x_min) / (x_max - x_min) * (WIDTH - LEFT - RIGHT)

    burns = [v.get("burn_1h") for p in points for s, v in p["values"].items() if s in slos]
    burns = [b for b in burns if b is not None and b > 0]
    factor = chart.get("page_factor")
    top = max(burns + ([factor] if factor else []) + [1.0])
    lo_exp, hi_exp = -2, max(1, math.ceil(math.log10(top * 1.5)))

    def y_burn(value: float) -> float:
        v = min(max(value, 10 ** lo_exp), 10 ** hi_exp)
        frac = (math.log10(v) - lo_exp) / (hi_exp - lo_exp)
        return TOP_PANEL[1] - frac * (TOP_PANEL[1] - TOP_PANEL[0])

    spent = [v.get("spent") for p in points for s, v in p["values"].items() if s in slos]
    top_spent = max([s for s in spent if s is not None] + [0.0])
    spent_max = next((c for c in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0) if c >= top_spent * 1.05), 100.0)

    def y_spent(value: float) -> float:
        return BOTTOM_PANEL[1] - min(value, spent_max) / spent_max * (BOTTOM_PANEL[1] - BOTTOM_PANEL[0])

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}"'
           f' height="{HEIGHT}" role="img" aria-label="error budget burn chart" font-family="sans-serif"'
           f' font-size="11">',
           f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
           f'<text x="{LEFT}" y="20" font-size="13" font-weight="bold">Burn rate over 1h (log scale)</text>',
           f'<text x="{LEFT}" y="{BOTTOM_PANEL[0] - 12}" font-size="13" font-weight="bold">'
           f'Error budget spent by the drill (share of the period)</text>']
    # axes and grid
    for e in range(lo_exp, hi_exp + 1):
        yy = y_burn(10 ** e)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{WIDTH - RIGHT}" y2="{yy:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{threshold_text(10 ** e)}</text>')
    for i in range(5):
        value = spent_max * i / 4
        yy = y_spent(value)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{WIDTH - RIGHT}" y2="{yy:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{value * 100:.0f}%</text>')
    for panel in (TOP_PANEL, BOTTOM_PANEL):
        out.append(f'<line x1="{LEFT}" y1="{panel[1]}" x2="{WIDTH - RIGHT}" y2="{panel[1]}" stroke="#333"/>')
        out.append(f'<line x1="{LEFT}" y1="{panel[0]}" x2="{LEFT}" y2="{panel[1]}" stroke="#333"/>')
    step = _tick_step(x_max - x_min)
    t = math.ceil(x_min / step) * step
    while t <= x_max:
        xx = x(t)
        out.append(f'<line x1="{xx:.1f}" y1="{BOTTOM_PANEL[1]}" x2="{xx:.1f}" y2="{BOTTOM_PANEL[1] + 4}" stroke="#333"/>')
        out.append(f'<text x="{xx:.1f}" y="{BOTTOM_PANEL[1] + 16}" text-anchor="middle">{t / 60:+.0f}m</text>')
        t += step
    out.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{BOTTOM_PANEL[1] + 32}" text-anchor="middle">'
               'minutes since the fault</text>')
    if factor:
        yy = y_burn(factor)
        out.append(f'<line x1="{LEFT}" y1="{yy:.1f}" x2="{WIDTH - RIGHT}" y2="{yy:.1f}" stroke="#d62728"'
                   ' stroke-dasharray="6 4"/>')
        out.append(f'<text x="{WIDTH - RIGHT - 4}" y="{yy - 4:.1f}" text-anchor="end" fill="#d62728">'
                   f'page threshold {threshold_text(factor)}</text>')
    # event markers
    for i, m in enumerate(chart.get("markers") or []):
        xx = x(m["offset"])
        out.append(f'<line x1="{xx:.1f}" y1="{TOP_PANEL[0]}" x2="{xx:.1f}" y2="{BOTTOM_PANEL[1]}" stroke="#888"'
                   ' stroke-dasharray="2 3"/>')
        out.append(f'<text x="{xx + 3:.1f}" y="{TOP_PANEL[0] + 10 + (i % 4) * 11}" fill="#555">{escape(m["label"])}</text>')
    # series
    for n, slo in enumerate(slos):
        color = COLORS[n % len(COLORS)]
        burn_pts = [(x(p["offset"]), y_burn(v)) for p in points
                    if (v := (p["values"].get(slo) or {}).get("burn_1h")) is not None]
        spent_pts = [(x(p["offset"]), y_spent(v)) for p in points
                     if (v := (p["values"].get(slo) or {}).get("spent")) is not None]
        for pts in (burn_pts, spent_pts):
            if len(pts) >= 2:
                path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        lx = LEFT + n * 200
        label = (chart.get("labels") or {}).get(slo, slo)
        out.append(f'<rect x="{lx}" y="{HEIGHT - 24}" width="12" height="4" fill="{color}"/>')
        out.append(f'<text x="{lx + 16}" y="{HEIGHT - 18}">{escape(_short(label))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _tick_step(span: float) -> int:
    for step in (60, 120, 300, 600, 900, 1800, 3600, 7200):
        if span / step <= 12:
            return step
    return 14400



def _short(slo: str) -> str:
    return slo if len(slo) <= 32 else "..." + slo[-29:]
