"""`opsctl drill history`'s picture, as inline SVG (no scripts, no external assets), with the
report pictures' helpers (`drills.svg`).

`trend_chart`: detect, mitigate and budget spent across runs of a scenario, each run marked with
its mode (embedded, chain, live): a line joins only runs of one mode, a chain or live run's dot is a
ring and its bar lighter, and its label names the mode, so a chain run never reads as an
improvement on an embedded one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

from opsctl.drills.svg import FONT, WIDTH, _empty, _round_step, nice_ceiling, percent_text
from opsctl.drills.text import duration_text

# mode -> (its letter under the run, the line's colour, a dot's fill: None draws a ring, the bar's opacity)
MODES = {"embedded": ("E", "#1f77b4", None, 1.0), "chain": ("C", "#ff7f0e", "#ffffff", 0.55),
         "live": ("L", "#6a3d9a", "#ffffff", 0.8)}
OTHER = ("?", "#777777", "#ffffff", 0.5)


def _mode(run: dict) -> tuple[str, str, str | None, float]:
    return MODES.get(str(run.get("mode")), OTHER)


def trend_chart(runs: list[dict]) -> str:
    """Three panels over the runs of one scenario (oldest left): time to detect and time to
    mitigate as lines with a dot per run, and the budget spent as bars. A run that did not measure
    a value has no dot (or bar) there. `runs`: HistoryRun.to_dict() rows."""
    if not runs:
        return _empty("no runs to chart")
    left, right, panel_h, gap, top = 80, 30, 110, 46, 30
    plot_right = WIDTH - right
    n = len(runs)
    slot = (plot_right - left) / n

    def x(i: int) -> float:
        return left + slot * (i + 0.5)

    panels = (("detect", "time to detect", "duration"), ("mitigate", "time to mitigate", "duration"),
              ("budget_spent", "error budget spent (largest share of any SLO's period)", "share"))
    height = top + len(panels) * (panel_h + gap) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}"'
           f' height="{height}" role="img" aria-label="drill history trend" font-family="sans-serif"'
           f' font-size="{FONT}">', f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>']
    every = max(1, math.ceil(n * 100 / (plot_right - left)))  # a run's label is ~95px wide
    for p, (key, title, kind) in enumerate(panels):
        y0 = top + p * (panel_h + gap)
        y1 = y0 + panel_h
        values = [r.get(key) for r in runs]
        known = [v for v in values if v is not None]
        tick_text: Callable[[float], str]
        if kind == "duration":
            vmax = max(known + [1.0])
            step = _round_step(vmax)
            vmax = math.ceil(vmax / step) * step
            ticks = [step * i for i in range(int(round(vmax / step)) + 1)]
            tick_text = duration_text
        else:
            vmax, step = nice_ceiling(max(known + [0.0]) * 1.02)
            ticks = [step * i for i in range(int(round(vmax / step)) + 1)]
            tick_text = percent_text

        def y(v: float) -> float:
            return y1 - max(v, 0.0) / vmax * (y1 - y0)

        out.append(f'<text x="{left}" y="{y0 - 10}" font-size="13" font-weight="bold">{escape(title)}</text>')
        for t in ticks:
            out.append(f'<line x1="{left}" y1="{y(t):.1f}" x2="{plot_right}" y2="{y(t):.1f}" stroke="#eeeeee"/>')
            out.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{tick_text(t)}</text>')
        out.append(f'<line x1="{left}" y1="{y1}" x2="{plot_right}" y2="{y1}" stroke="#333"/>')
        out.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{y1}" stroke="#333"/>')
        if kind == "share":
            bw = min(40.0, slot * 0.6)
            for i, v in enumerate(values):
                if v is not None:
                    mode = escape(str(runs[i].get("mode")))
                    _, line, _, opacity = _mode(runs[i])
                    out.append(f'<rect class="run" data-mode="{mode}" x="{x(i) - bw / 2:.1f}" y="{y(v):.1f}"'
                               f' width="{bw:.1f}" height="{max(y1 - y(v), 0.5):.1f}" fill="{line}"'
                               f' fill-opacity="{opacity:g}"><title>{escape(runs[i]["run_id"])} ({mode}):'
                               f' {percent_text(round(v, 4))}</title></rect>')
        else:
            for mode_name in dict.fromkeys(str(r.get("mode")) for r in runs):  # one line per mode
                pts = [(x(i), y(v)) for i, v in enumerate(values) if v is not None and str(runs[i].get("mode")) == mode_name]
                if len(pts) >= 2:
                    dash = "" if mode_name == "embedded" else ' stroke-dasharray="6 3"'
                    out.append(f'<polyline data-mode="{escape(mode_name)}" points="'
                               + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
                               + f'" fill="none" stroke="{MODES.get(mode_name, OTHER)[1]}" stroke-width="2"{dash}/>')
            for i, v in enumerate(values):
                if v is not None:
                    color = "#2e7d32" if runs[i].get("outcome") == "passed" else "#c62828"
                    _, _, fill, _ = _mode(runs[i])
                    mode = escape(str(runs[i].get("mode")))
                    shape = (f'fill="{color}"' if fill is None else
                             f'fill="{fill}" stroke="{color}" stroke-width="2.5"')
                    out.append(f'<circle class="run" data-mode="{mode}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="4" {shape}>'
                               f'<title>{escape(runs[i]["run_id"])} ({mode}): {duration_text(v)}</title></circle>')
        for i, r in enumerate(runs):
            if i % every == 0 or i == n - 1:
                out.append(f'<text x="{x(i):.1f}" y="{y1 + 14}" text-anchor="middle">#{i + 1}{_mode(r)[0]}'
                           f' {escape(str(r.get("started_at", ""))[5:16].replace("T", " "))}</text>')
    out.append(f'<text x="{left}" y="{height - 6}" fill="#555">runs oldest first; a dot is green when the run'
               ' passed, red when it did not; E embedded (filled dot), C chain and L live (a ring, a dashed'
               ' line of their own): each mode is compared only with itself</text>')
    out.append("</svg>")
    return "\n".join(out)
