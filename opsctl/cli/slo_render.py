"""The tables of `opsctl slo validate|report|alerts` (slo_cmd.py parses, calls the core, and
renders with these; JSON and YAML are the documents themselves)."""

from __future__ import annotations

from opsctl.cli.output import render_table


def validate_table(rows):
    lines = []
    for r in rows:
        lines.append(f"ok  {r['file']}  {r['name']} ({r['kind']}, goal {r['goal']:g}, backend {r['backend'] or '-'})")
        lines.extend(f"    note: {note}" for note in r["notes"])
    return "\n".join(lines)


def _pct(value, digits=4):
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def _why(row) -> str:
    if row["status"] == "ok":
        return ""
    if row["alerts"]:
        more = len(row["alerts"]) - 1
        return row["alerts"][0] + (f" (+{more} more)" if more else "")
    return row["reason"]


def report_table(rows):
    table_rows = []
    for r in rows:
        rated = {w: v for w, v in r["burn_rate"].items() if v is not None}
        worst = max(rated.items(), key=lambda kv: kv[1]) if rated else None
        table_rows.append([
            r["name"],
            r["backend"] or "-",
            f"{r['goal'] * 100:g}%",
            _pct(r["sli"]),
            _pct(r["error_budget_remaining"], 1),
            f"{worst[1]:.2f}x ({worst[0]})" if worst else "-",
            r["status"].upper() if r["status"] != "ok" else "ok",
            _why(r),
        ])
    headers = ["SLO", "BACKEND", "GOAL", "SLI", "BUDGET LEFT", "WORST BURN", "STATUS", "WHY"]
    if rows and "drill_budget_spent" in rows[0]:  # --exclude-drills
        headers[5:5] = ["DRILLS SPENT", "LEFT WITHOUT DRILLS"]
        for row, r in zip(table_rows, rows):
            row[5:5] = [_pct(r["drill_budget_spent"], 1), _pct(r["error_budget_remaining_excluding_drills"], 1)]
    notes = list(dict.fromkeys(n for r in rows for n in r.get("notes", [])))
    # the SLO name is never cut; on a narrow terminal these go first (-o wide shows them)
    drop = ("LEFT WITHOUT DRILLS", "DRILLS SPENT", "GOAL", "BACKEND", "WORST BURN", "SLI")
    return (instant_line("SLOs", rows) + "\n" + render_table(headers, table_rows, drop=drop)
            + "".join(f"\nnote: {n}" for n in notes))


def instant_line(what: str, rows, at: str | None = None) -> str:
    """`SLOs at 2026-11-26T15:00:00Z, period 28d`: the instant a report evaluated at and its period(s)."""
    instants = list(dict.fromkeys(r["at"] for r in rows if r.get("at"))) or ([at] if at else [])
    periods = list(dict.fromkeys(r["period"] for r in rows if r.get("period")))
    when = f" at {', '.join(instants)}" if instants else ""
    over = f", period{'s' if len(periods) > 1 else ''} {', '.join(periods)}" if periods else ""
    return f"{what}{when}{over}"


def alerts_table(data):
    from opsctl.slo.conventions import format_factor

    periods = list(dict.fromkeys(data.get("periods") or []))
    over = f", period{'s' if len(periods) > 1 else ''} {', '.join(periods)}" if periods else ""
    lines = [f"alerts at {data['at']}{over}: {len(data['firing'])} firing"]
    if data["firing"]:
        rows = [
            [a["slo"], a["alertname"], a["severity"], a["backend"], f"{a['long_window']}/{a['short_window']}",
             f"{a['burn_rate']:.2f}x / {a['short_burn_rate']:.2f}x", f"{format_factor(a['factor'])}x",
             f"{a['request_rate']:.4g}/s" if a['request_rate'] is not None else "-", a.get("cause") or "-"]
            for a in data["firing"]
        ]
        # SLO first and never cut (which SLO pages); on a narrow terminal these go first (-o wide shows them)
        lines.append(render_table(["SLO", "ALERT", "SEVERITY", "BACKEND", "WINDOWS", "BURN (LONG / SHORT)", "ABOVE",
                                   "TRAFFIC", "CAUSE"], rows,
                                  drop=("ABOVE", "TRAFFIC", "BACKEND", "BURN (LONG / SHORT)", "ALERT")))
    for a in data.get("absent", []):
        lines.append(f"absent   {a['slo']}: {a['alertname']} ({a['severity']}): no sample of {a['selector']}")
    quality = data.get("quality")
    if quality:
        lines.append(f"quality alerts: {len(quality['firing'])} firing")
        lines += [f"firing   {q['alertname']} ({q['severity']}) {q['backend']}: {q['annotations']['summary']}"
                  for q in quality["firing"]]
        lines += [f"suppressed  {q['alertname']} {q['backend']}: {q['reason']}" for q in quality["suppressed"]]
    for u in data["unknown"]:
        lines.append(f"unknown  {u['slo']}: {u['reason']}")
    lines.extend(f"note: {n}" for n in data.get("notes", []))
    return "\n".join(lines)
