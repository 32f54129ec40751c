"""The schedule as an SVG timeline inside a small HTML page: one bar per step, freezes shaded.

Pure: the schedule in, the page's text out (the CLI writes it). Times shown in UTC.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html import escape

from opsctl.rollout.calendar import Schedule

COLOURS = {"shadow": "#7aa6c2", "ab": "#c29a4a", "ramp": "#5b9b6b", "cost": "#9b6b9b"}
ROW, LEFT, WIDTH, TOP = 26, 190, 900, 40


def _day(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def svg(schedule: Schedule) -> str:
    if not schedule.steps:
        raise ValueError("an empty schedule has no timeline")
    t0 = min([schedule.start] + [f.start for f in schedule.freezes])
    t1 = max([schedule.end] + [f.end for f in schedule.freezes])
    span = max(t1 - t0, 1.0)

    def x(ts: float) -> float:
        return LEFT + (ts - t0) / span * WIDTH

    height = TOP + ROW * len(schedule.steps) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
             'font-family="sans-serif" font-size="12">']
    for f in schedule.freezes:
        parts.append(f'<rect x="{x(f.start):.1f}" y="{TOP - 18}" width="{max(x(f.end) - x(f.start), 1):.1f}" '
                     f'height="{ROW * len(schedule.steps) + 22}" fill="#e8b4b4" opacity="0.6"/>')
        parts.append(f'<text x="{x(f.start) + 3:.1f}" y="{TOP - 6}" fill="#8b1a1a">freeze: {escape(f.name)}</text>')
    day = _day(t0).replace(hour=0, minute=0, second=0, microsecond=0)
    bottom = TOP + ROW * len(schedule.steps)
    for _ in range(400):  # week ticks (Mondays)
        if day.timestamp() > t1:
            break
        if day.timestamp() >= t0 and day.weekday() == 0:
            parts.append(f'<line x1="{x(day.timestamp()):.1f}" y1="{TOP - 20}" x2="{x(day.timestamp()):.1f}" '
                         f'y2="{bottom}" stroke="#ccc"/>')
            parts.append(f'<text x="{x(day.timestamp()) + 2:.1f}" y="{bottom + 16}" fill="#555">'
                         f'{day:%b %d}</text>')
        day += timedelta(days=1)
    for i, step in enumerate(schedule.steps):
        y = TOP + i * ROW
        title = f"{step.label}: {_day(step.start):%Y-%m-%d %H:%M} to {_day(step.end):%Y-%m-%d %H:%M} UTC"
        if step.moved_after:
            title += f" (moved after {', '.join(step.moved_after)})"
        parts.append(f'<text x="4" y="{y + 16}">{step.index}. {escape(step.stage)}: {escape(step.label)}</text>')
        parts.append(f'<rect x="{x(step.start):.1f}" y="{y + 4}" width="{max(x(step.end) - x(step.start), 2):.1f}" '
                     f'height="{ROW - 8}" fill="{COLOURS.get(step.stage, "#888")}"><title>{escape(title)}</title></rect>')
    parts.append(f'<text x="4" y="{bottom + 34}" font-weight="bold">earliest completion: '
                 f'{_day(schedule.end):%Y-%m-%d %H:%M} UTC</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def html(schedule: Schedule) -> str:
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>rollout {escape(schedule.plan)}</title></head>\n<body style=\"margin:16px\">\n"
            f"<h2 style=\"font-family:sans-serif\">rollout {escape(schedule.plan)}</h2>\n"
            f"{svg(schedule)}\n</body></html>\n")
