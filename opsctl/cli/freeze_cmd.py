"""`opsctl freeze status|list`."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import TIME
from opsctl.cli.main import all_services_option


@click.group()
def freeze():
    """Change freezes: windows in which routine traffic changes are refused.

    Freezes are configured under `freezes:` as fixed ranges (start/end) or cron plus duration,
    each in its own time zone. Inside one, `opsctl traffic` refuses routine changes (exit 4);
    an emergency override needs --emergency and --incident ID and is recorded, naming the freeze.

    \b
    Examples:
      opsctl freeze status
      opsctl freeze status --at 2026-11-26T15:00:00Z -o json
      opsctl freeze status --fail-if-frozen && deploy.sh   # exit 4 while a freeze is in force
      opsctl freeze list
    """


def _when(at: float | None) -> float:
    from opsctl.clock import wall_now

    return wall_now() if at is None else at


@freeze.command()
@click.option("--at", type=TIME, help="Check this instant instead of now: RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m.")
@click.option("--fail-if-frozen", is_flag=True,
              help="Exit 4 (refused by a guard) while a freeze is in force, for scripts that ask \"are we frozen?\".")
@output_option
@click.pass_obj
@all_services_option
def status(app, at, fail_if_frozen, output):
    """Is a freeze in force now (or --at)? Shows the next one otherwise.

    Exit 0 either way, unless --fail-if-frozen: then exit 4 while frozen (what the freeze guard
    of `opsctl traffic` answers a routine change with)."""
    from opsctl.freeze import FreezeCalendar

    when = _when(at)
    calendar = FreezeCalendar(app.config.freezes)
    active = calendar.active(when)
    upcoming = [s for s in calendar.upcoming(when) if not s.contains(when)]
    data = {
        "frozen": bool(active),
        "active": [s.to_dict() for s in active],
        "next": upcoming[0].to_dict() if upcoming else None,
    }

    def table(d):
        if d["active"]:
            lines = [f"FROZEN  {f['name']}: {f['start_local']} until {f['end_local']}"
                     + (f" ({f['reason']})" if f["reason"] else "") for f in d["active"]]
            lines.append("routine traffic changes are refused; emergencies: --emergency --incident ID (recorded)")
            return "\n".join(lines)
        text = "no freeze in force"
        if d["next"]:
            text += f"; next: {d['next']['name']} from {d['next']['start_local']} until {d['next']['end_local']}"
        return text

    emit(data, output, table=table)
    if fail_if_frozen and active:
        from opsctl.errors import GuardRefused

        raise GuardRefused(f"frozen: {', '.join(s.name for s in active)} in force",
                           hint="routine changes wait for its end; emergencies: --emergency --incident ID")


@freeze.command(name="list")
@click.option("--at", type=TIME, help="Show occurrences relative to this instant instead of now:"
                                                 " RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m.")
@output_option
@click.pass_obj
def list_(app, at, output):
    """Every configured freeze window, with its current or next occurrence."""
    from opsctl.freeze import FreezeCalendar

    when = _when(at)
    windows = app.config.freezes
    spans = {s.name: s for s in FreezeCalendar(windows).upcoming(when)}
    rows = []
    for w in windows:
        span = spans.get(w.name)
        rows.append({
            "name": w.name,
            "kind": "cron" if w.cron else "fixed",
            "schedule": f"{w.cron} for {w.duration}" if w.cron else f"{w.start} to {w.end}",
            "timezone": w.timezone,
            "reason": w.reason,
            "active": bool(span and span.contains(when)),
            "occurrence": span.to_dict() if span else None,
        })

    def table(items):
        return render_table(
            ["NAME", "SCHEDULE", "TIME ZONE", "STATE", "FROM", "UNTIL", "REASON"],
            [[r["name"], r["schedule"], r["timezone"],
              "ACTIVE" if r["active"] else ("upcoming" if r["occurrence"] else "past"),
              r["occurrence"]["start_local"] if r["occurrence"] else "-",
              r["occurrence"]["end_local"] if r["occurrence"] else "-", r["reason"]] for r in items])

    emit(rows, output, table=table)
