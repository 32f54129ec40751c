"""`opsctl drill history`: how a scenario's drills went over time, from the runs' report.json.

One `HistoryRun` per finished run (oldest first): its outcome and what it measured (time to
detect, time to mitigate, and the budget the drill spent: the largest share of any SLO's period
budget). `trend` compares the newest run with the median of the runs before it in the same mode
(embedded, chain, live: a chain run waits on real components and shortened timings, so it is never
compared with an embedded one), per measure, so a slower acknowledgement or a costlier response
shows up before it fails a deadline. Rendered as a
table (`-o table|json|yaml`) and as a self-contained HTML page with one SVG trend chart a scenario.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from statistics import median

from opsctl.clock import format_rfc3339, parse_rfc3339
from opsctl.drills.report_model import DrillReport, ReportUnreadable, read_report
from opsctl.drills.text import duration_text
from opsctl.model import Model

# (field, label, how a value is written, what "better" is)
MEASURES = (("detect", "detect", "duration", "lower"), ("mitigate", "mitigate", "duration", "lower"),
            ("budget_spent", "budget spent", "share", "lower"))
SAME_WITHIN = 0.05  # a change within 5% of the earlier median is "same"


class HistoryRun(Model):
    """One run of a scenario, as its report recorded it."""

    run_id: str
    scenario: str
    title: str
    mode: str
    started_at: float
    outcome: str
    detect: float | None = None  # seconds from the fault
    mitigate: float | None = None
    budget_spent: float | None = None  # the largest share of a period's budget any SLO spent
    budget_slo: str | None = None
    action_items: int = 0

    def to_dict(self) -> dict:
        return {"run_id": self.run_id, "scenario": self.scenario, "mode": self.mode,
                "started_at": format_rfc3339(self.started_at), "outcome": self.outcome, "detect": self.detect,
                "mitigate": self.mitigate, "budget_spent": self.budget_spent, "budget_slo": self.budget_slo,
                "action_items": self.action_items}


def _run(report: DrillReport) -> HistoryRun | None:
    try:
        started = parse_rfc3339(report.started_at or "")
    except (TypeError, ValueError):
        return None
    m = report.measurements
    spent = [(r.spent, r.slo) for r in (report.budget.slos if report.budget else ()) if r.spent is not None]
    top: tuple[float | None, str | None] = max(spent, default=(None, None))
    sc = report.scenario
    return HistoryRun(run_id=report.run_id, scenario=sc.name or "?", title=sc.title, mode=report.mode or "?",
                      started_at=started, outcome=report.outcome or "?",
                      detect=m.time_to_detect if m else None, mitigate=m.time_to_mitigate if m else None,
                      budget_spent=top[0], budget_slo=top[1], action_items=len(report.action_items))


def load_history(root: Path, scenario: str | None = None, mode: str | None = None) -> dict[str, list[HistoryRun]]:
    """Finished runs under `root` (<state_dir>/drills) by scenario name, each oldest first. A run
    without a readable report.json (still running, or interrupted before its report) is left out."""
    from opsctl.drills.state import RUN_ID

    root = Path(root)
    wanted = None if scenario is None else Path(scenario).stem if scenario.endswith((".yaml", ".yml")) else scenario
    out: dict[str, list[HistoryRun]] = {}
    if not root.is_dir():
        return out
    for run_dir in sorted(root.iterdir()):  # run ids start with the time: oldest first
        path = run_dir / "report.json"
        if not (run_dir.is_dir() and RUN_ID.match(run_dir.name) and path.is_file()):
            continue
        try:
            run = _run(read_report(path))
        except ReportUnreadable:
            continue
        if run is None or (wanted and run.scenario != wanted) or (mode and run.mode != mode):
            continue
        out.setdefault(run.scenario, []).append(run)
    for runs in out.values():
        runs.sort(key=lambda r: r.started_at)
    return out


def trend(runs: list[HistoryRun]) -> dict[str, dict]:
    """Per measure: the newest value against the median of the earlier runs of the newest run's mode
    that measured it; under `compared`, that mode, how many runs it has and how many of other modes
    were left out."""
    mode = runs[-1].mode if runs else None
    left_out = len([r for r in runs if r.mode != mode])
    runs = [r for r in runs if r.mode == mode]
    out: dict[str, dict] = {}
    for key, _, _, better in MEASURES:
        values = [(r.run_id, getattr(r, key)) for r in runs if getattr(r, key) is not None]
        if not values:
            out[key] = {"last": None, "before": None, "direction": "unknown", "runs": 0}
            continue
        last = values[-1][1]
        earlier = [v for _, v in values[:-1]]
        if not earlier:
            out[key] = {"last": last, "before": None, "direction": "first run", "runs": len(values)}
            continue
        before = median(earlier)
        scale = max(abs(before), 1e-9)
        if abs(last - before) <= SAME_WITHIN * scale:
            direction = "same"
        elif (last < before) == (better == "lower"):
            direction = "better"
        else:
            direction = "worse"
        out[key] = {"last": last, "before": before, "direction": direction, "runs": len(values)}
    out["compared"] = {"mode": mode, "runs": len(runs), "left_out": left_out}
    return out


def value_text(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    return duration_text(value) if kind == "duration" else f"{value * 100:.1f}%"


def trend_text(t: dict[str, dict]) -> str:
    """`detect 2m00s (same as the median of 3 earlier) · mitigate ... · embedded runs only (2 chain
    runs left out)`"""
    parts = []
    for key, label, kind, _ in MEASURES:
        x = t[key]
        if x["before"] is None:
            parts.append(f"{label} {value_text(x['last'], kind)} ({x['direction']})")
        else:
            parts.append(f"{label} {value_text(x['last'], kind)} ({x['direction']} than the median"
                         f" {value_text(x['before'], kind)} of {x['runs'] - 1} earlier)"
                         if x["direction"] != "same" else
                         f"{label} {value_text(x['last'], kind)} (same as the median of {x['runs'] - 1} earlier)")
    compared = t.get("compared")
    if compared and compared["left_out"]:
        parts.append(f"{compared['mode']} runs only ({compared['left_out']} of other modes left out:"
                     " like is compared with like)")
    return " · ".join(parts)


def history_data(groups: dict[str, list[HistoryRun]]) -> list[dict]:
    return [{"scenario": name, "title": runs[-1].title, "runs": [r.to_dict() for r in runs], "trend": trend(runs)}
            for name, runs in sorted(groups.items())]


def render_html(groups: dict[str, list[HistoryRun]]) -> str:
    from opsctl.drills.render import CSS, table
    from opsctl.drills.svg_trend import trend_chart

    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>Drill history</title>',
             f"<style>{CSS}</style></head><body>", "<h1>Drill history</h1>"]
    for name, runs in sorted(groups.items()):
        t = trend(runs)
        parts.append(f'<h2 id="{escape(name)}">{escape(name)}: {escape(runs[-1].title)}</h2>')
        parts.append(f"<p>{len(runs)} run(s). Newest: {escape(trend_text(t))}.</p>")
        parts.append(trend_chart([r.to_dict() for r in runs]))
        parts.append(table(["run", "mode", "outcome", "detect", "mitigate", "budget spent", "action items"], [
            [(r.run_id, "nowrap"), r.mode, (r.outcome, "pass" if r.outcome == "passed" else "fail"),
             value_text(r.detect, "duration"), value_text(r.mitigate, "duration"),
             value_text(r.budget_spent, "share") + (f" ({r.budget_slo})" if r.budget_slo else ""), r.action_items]
            for r in runs]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
