"""`opsctl incident list|show|takeover`: the automation's incidents, as on-call reads and takes them.

The incidents are the ones `opsctl serve` keeps (opsctl/incident/): a file per incident under the
state dir with `state.backend: local`, one ConfigMap per incident with `kubernetes`. A takeover is
a person's write (compare-and-swapped, never fenced): from then on the automation only adds notes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from opsctl.cli import complete
from opsctl.cli.output import emit, output_option, render_table

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.incident.record import Incident
    from opsctl.incident.store import IncidentStore


@click.group()
def incident():
    """The automation's incidents: one per outage, with its alerts, page, tickets and moves.

    An incident gathers every alert of the service while it is open (15m quiet window,
    automation.incident.quiet); it owns one PagerDuty incident and at most one ticket per vendor.

    \b
    Examples:
      opsctl incident list                      # newest first, open ones marked
      opsctl incident show 20261207T031500Z-3f2a -o json
      opsctl incident takeover 20261207T031500Z-3f2a --reason "hands on: degrading by hand" --dry-run
    """


def _store(cfg: "Config") -> "IncidentStore":
    from opsctl.automation.engine_factory import incident_store

    if cfg.state.backend == "local":
        return incident_store(cfg)
    from opsctl.state import open_state_store

    return incident_store(cfg, state=open_state_store(cfg))


def _when(ts: float | None) -> str:
    from opsctl.clock import format_rfc3339

    return format_rfc3339(ts) if ts is not None else "-"


def _summary(i: "Incident") -> dict[str, Any]:
    return {
        "id": i.id, "state": i.state, "opened_at": _when(i.opened_at), "closed_at": _when(i.closed_at),
        "backends": list(i.backends), "causes": list(i.causes), "alerts_firing": len(i.firing()),
        "alerts": len(i.alerts), "page": i.page.dedup_key if i.page else None,
        "tickets": [f"{t.vendor}:{t.category}" + (f" {t.id}" if t.id else "") for t in i.tickets],
        "moves": len(i.moves), "taken_over_by": i.takeover.by if i.takeover else None,
    }


@incident.command("list")
@click.option("--open", "open_only", is_flag=True, help="Only the open incident (a service has at most one).")
@output_option
@click.pass_obj
def list_(app, open_only, output):
    """The service's recent incidents, newest first (the index keeps the last 50).

    \b
    Examples:
      opsctl incident list
      opsctl incident list --open -o json
    """
    found = sorted(_store(app.config).incidents(open_only=open_only), key=lambda i: i.opened_at, reverse=True)
    data = [_summary(i) for i in found]

    def table(rows: list[dict[str, Any]]) -> str:
        if not rows:
            return "no incidents" + (" open" if open_only else "") + f" for {app.config.service}"
        return render_table(
            ["ID", "STATE", "OPENED (UTC)", "BACKENDS", "CAUSES", "FIRING", "TICKETS", "MOVES", "TAKEN OVER BY"],
            [[r["id"], r["state"], r["opened_at"], ",".join(r["backends"]) or "-", ",".join(r["causes"]) or "-",
              r["alerts_firing"], " ".join(r["tickets"]) or "-", r["moves"], r["taken_over_by"] or "-"] for r in rows])

    emit(data, output, table)


def _get(store: "IncidentStore", ident: str) -> "Incident":
    from opsctl.errors import NoDataError

    found = store.get(ident)
    if found is None:
        raise NoDataError(f"incident {ident}: not in {store.where}",
                          hint="`opsctl incident list` names the incidents this service has")
    return found


@incident.command()
@click.argument("ident", metavar="INCIDENT_ID", shell_complete=complete.automation_incidents)
@output_option
@click.pass_obj
def show(app, ident, output):
    """One incident whole: its alerts, causes, page, tickets, moves and takeover. Exit 3 when unknown.

    \b
    Examples:
      opsctl incident show 20261207T031500Z-3f2a
      opsctl incident show 20261207T031500Z-3f2a -o json | jq '.moves'
    """
    from opsctl.model import to_dict

    found = _get(_store(app.config), ident)
    data: dict[str, Any] = to_dict(found)

    def table(_: dict[str, Any]) -> str:
        s = _summary(found)
        lines = [f"incident {found.id} ({found.service}): {found.state}, opened {s['opened_at']}"
                 + (f", closed {s['closed_at']}" if found.closed_at else ""),
                 f"backends: {', '.join(found.backends) or '-'}; causes: {', '.join(found.causes) or '-'}",
                 f"page: {found.page.dedup_key} ({found.page.severity or '-'}) {found.page.title}" if found.page
                 else "page: none sent"]
        if found.takeover:
            lines.append(f"taken over by {found.takeover.by} at {_when(found.takeover.at)}"
                         + (f": {found.takeover.reason}" if found.takeover.reason else ""))
        lines.append("alerts:")
        lines.append(render_table(["ALERT", "STATUS", "SLO", "BACKEND", "SEVERITY", "CAUSE", "STARTS AT"],
                                  [[a.alertname, a.status, a.slo or "-", a.backend or "-", a.severity or "-",
                                    a.cause or "-", a.starts_at] for a in found.alerts]) if found.alerts else "  none")
        lines.append("tickets:")
        lines.extend([f"  {t.vendor}: {t.category} {t.id or '(not filed yet)'}; causes {', '.join(t.causes) or '-'}"
                      for t in found.tickets] or ["  none"])
        lines.append("moves:")
        lines.append(render_table(["KIND", "BACKEND", "STATUS", "AT (UTC)", "OVERRIDES", "DETAIL"],
                                  [[m.kind, m.backend, m.status, _when(m.at), ",".join(m.overrides) or "-",
                                    m.detail or "-"] for m in found.moves]) if found.moves else "  none")
        return "\n".join(lines)

    emit(data, output, table)


@incident.command()
@click.argument("ident", metavar="INCIDENT_ID", shell_complete=complete.automation_incidents)
@click.option("--by", "by", default=None, metavar="NAME", help="Who takes it over (default: $USER).")
@click.option("--reason", default="", help="Why, for the incident's record and the page's notes.")
@click.option("--dry-run", is_flag=True, help="Write nothing; show what the takeover would record.")
@output_option
@click.pass_obj
def takeover(app, ident, by, reason, dry_run, output):
    """Take the incident over: the automation stops acting on it (no failover, restore, page or
    ticket of its own) and only adds notes, until the incident closes. Already taken over: exit 0,
    nothing changed. Exit 3 when the incident is unknown, 5 on a concurrent write (re-run it).

    \b
    Examples:
      opsctl incident takeover 20261207T031500Z-3f2a --reason "degrading by hand" --dry-run
      opsctl incident takeover 20261207T031500Z-3f2a --by alice
    """
    import getpass

    store = _store(app.config)
    who = by or getpass.getuser()
    current = _get(store, ident)
    if current.takeover is not None:
        data = {"id": ident, "changed": False, "taken_over_by": current.takeover.by,
                "at": _when(current.takeover.at), "reason": current.takeover.reason}
        emit(data, output, lambda d: f"incident {ident} is already taken over by {d['taken_over_by']} at {d['at']}")
        return
    if not current.is_open:
        from opsctl.errors import UsageError

        raise UsageError(f"incident {ident} is closed: there is nothing for the automation to stop",
                         hint="`opsctl incident list --open` names the open one")
    if dry_run:
        data = {"id": ident, "changed": False, "dry_run": True, "would_record": {"by": who, "reason": reason}}
        emit(data, output, lambda d: f"dry run: incident {ident} would be taken over by {who}; nothing written")
        return
    done = store.take_over(ident, by=who, reason=reason)
    assert done.takeover is not None
    data = {"id": ident, "changed": True, "taken_over_by": done.takeover.by, "at": _when(done.takeover.at),
            "reason": done.takeover.reason}
    emit(data, output, lambda d: f"incident {ident} taken over by {d['taken_over_by']} at {d['at']}:"
                                 " the automation now only adds notes")
