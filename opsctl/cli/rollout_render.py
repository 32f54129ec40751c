"""The tables of `opsctl rollout plan|ab|start|status|run` (rollout_cmd.py parses, calls the core
and renders with these; JSON and YAML are the documents themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.cli.output import render_table

if TYPE_CHECKING:
    from opsctl.rollout.ab_check import AbCheck, AbMetricResult
    from opsctl.rollout.calendar import PlannedRollout
    from opsctl.rollout.journey import Played


def local_minute(ts: float) -> str:
    """A time as the tables show it: UTC, to the minute."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def plan_table(planned: PlannedRollout, html_out: str | None) -> str:
    from opsctl.rollout.calendar import smaller_arm

    from opsctl.clock import format_duration

    result = planned.schedule
    rows = []
    for s in result.steps:
        notes = [f"moved after freeze {', '.join(s.moved_after)}"] if s.moved_after else []
        if [w for w in s.waited_for if not w.startswith("freeze ")]:
            notes.append(f"waits for {', '.join(w for w in s.waited_for if not w.startswith('freeze '))}")
        if s.held:
            notes.append(f"holds {s.load_held}: {', '.join(s.held_because)}")
        note = "; ".join(notes)
        rows.append([s.index, s.stage, s.label, local_minute(s.start), local_minute(s.end), format_duration(s.seconds), note])
    lines = [render_table(["#", "STAGE", "STEP", "START (UTC)", "END (UTC)", "LASTS", "NOTE"], rows), ""]
    for f in result.freezes:
        lines.append(f"freeze {f.name}: {f.local(f.start)} until {f.local(f.end)}"
                     + (f" ({f.reason})" if f.reason else ""))
    for _, metric, size in planned.sizes:
        small = smaller_arm(size.per_arm, size.share or 0.5)
        lines.append(f"A/B {metric}: {size.per_arm} trials per arm for ±{size.margin * 100:g} points with equal arms, {small} in the"
                     f" {size.share:.0%} arm of unequal ones ({size.days:.1f} days at {size.daily_trials}/day;"
                     f" {size.variance})")
    if planned.hours:
        lines.append(f"steps start in {planned.hours}")
    lines.append(f"earliest completion: {local_minute(result.end)} UTC")
    if html_out:
        lines.append(f"timeline written to {html_out}")
    return "\n".join(lines)


def _days_text(r: AbMetricResult) -> str:
    if r.days is None:
        return ""
    return f"; the horizon takes {r.days:g} days at {r.daily_trials:,} trials a day ({r.daily_basis})"


def ab_table(check: AbCheck) -> str:
    return "\n".join(f"{r.metric}: {r.verdict.verdict} ({r.verdict.outcome}): {r.verdict.reason}"
                     + (f"; difference {r.verdict.difference * 100:+.2f} points" if r.verdict.difference is not None
                        else "")
                     + (f"; margin {r.margin.describe()}" if r.margin else "")
                     + _days_text(r) for r in check.results)


def state_text(d: dict) -> str:
    from opsctl.clock import format_rfc3339

    lines = [f"rollout {d['id']}: {d['status']} at step {d['step'] + 1} ({d['phase']})"
             + (f"; paused: {d['paused_because']}" if d.get("paused_because") else "")
             + (f"; held by incident {d['incident']}" if d.get("incident") else "")]
    if d.get("planned_end") and d["status"] not in ("completed", "aborted"):
        lines.append(f"planned end: {format_rfc3339(d['planned_end'])} (re-planned when step {d['step'] + 1}"
                     " was applied, around the freezes)")
    if d.get("term"):
        lines.append(f"written under term {d['term']}")
    for o in d.get("objects", []):
        lines.append(f"  {o['role']:<10}  {o['actuator']:<11}  at step {o['step']}  {o['split']}"
                     f"  ({'last written during step ' + str(o['written_step']) if o['written_step'] else 'not written'})"
                     f"  {o['target']}")
    for e in d.get("history", [])[-10:]:
        lines.append(f"  {format_rfc3339(e['at'])}  step {e['step']}  {e['what']}: {e['detail']}")
    pending = [i for i in d.get("intents", []) if i["id"] not in d.get("handled", [])]
    for i in pending:
        lines.append(f"  pending: {i['action']} by {i['by']}")
    return "\n".join(lines)


def run_table(played: Played) -> str:
    from opsctl.clock import format_rfc3339

    r = played.result
    lines = [f"  {e['at']}  step {e['step']:>2}  {e['what']}: {e['detail']}" for e in r.history]
    lines.append(f"{r.status} at step {r.step} on {format_rfc3339(r.end)} (simulated; started"
                 f" {format_rfc3339(r.start)}); {r.measurements} windows simulated in {r.wall_seconds:.1f} s")
    if r.data is not None:
        lines.append(r.data.describe())
    if played.problems:
        lines.append("not as the journey expects: " + "; ".join(played.problems))
    return "\n".join(lines)
