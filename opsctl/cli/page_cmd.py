"""`opsctl page trigger|ack|resolve|status|change|oncall|maintenance`."""

from __future__ import annotations

import click

from opsctl.cli import complete
from opsctl.cli.output import emit, emit_dry_run, output_option, render_table
from opsctl.cli.params import choice

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Send nothing; show the exact request that would be sent (secrets redacted).")
drill_option = click.option(
    "--drill", is_flag=True, help="Mark as a drill: [DRILL] in the title, a drill tag and drill=true in the details.")


@click.group()
def page():
    """Page on-call, follow an incident, see who is on call.

    The pager is paging.provider in the config: local (a ledger in the state dir) or pagerduty.
    A page's dedup key is stable, so re-running a command never opens a second incident.

    \b
    Examples:
      opsctl page trigger -s "databricks error ratio 12% over 5m" --component databricks
      opsctl page trigger -s "game day: vendor outage" --drill --dry-run
      opsctl page ack opsctl-llm-inference-3f2a9c...
      opsctl page resolve opsctl-llm-inference-3f2a9c...
      opsctl page status opsctl-llm-inference-3f2a9c... -o json
      opsctl page status                       # pages opsctl sent, newest first
      opsctl page oncall
    """


def _pager(app, dry_run: bool):
    from opsctl.paging.registry import open_pager

    return open_pager(app.config, dry_run=dry_run)


def _dedup_key(app, pager, key: str) -> str:
    """The dedup key for KEY, which may also be the incident id that `trigger` printed (LP00001, PT4KHLK).

    A key opsctl recorded as a dedup key is used as is; a recorded incident id maps to its dedup
    key; a key shaped like an incident id (short upper-case letters and digits) is looked up on
    the pager; anything else, or a pager that cannot say, leaves KEY as given (an ack during an
    incident never waits on the REST API for a plain dedup key)."""
    from opsctl.errors import OpsctlError
    from opsctl.paging.registry import page_records

    records = page_records(app.config).list()
    if any(r["dedup_key"] == key for r in records):
        return key
    for r in records:
        if r.get("incident_id") == key:
            return r["dedup_key"]
    if not (5 <= len(key) <= 20 and key.isascii() and key.isalnum() and key.upper() == key):
        return key
    try:
        incident = pager.get_incident(key)
    except OpsctlError:
        return key
    return incident.dedup_key if incident.id == key and incident.dedup_key else key


def _details(pairs) -> dict:
    from opsctl.errors import UsageError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--detail {pair!r}: use KEY=VALUE")
        out[key] = value
    return out


def _links(urls):
    from opsctl.paging.base import Link

    return tuple(Link(u) for u in urls)


def _emit_result(data: dict, output: str) -> None:
    if data.get("dry_run") and output == "table":
        emit_dry_run(data, output)
        return
    emit({k: v for k, v in data.items() if v is not None}, output)


@page.command()
@click.option("-s", "--summary", required=True, help="What is wrong, in one line (the incident title).")
@click.option("--severity", type=choice(["critical", "error", "warning", "info"]), default="critical",
              show_default=True)
@click.option("--source", help="The affected system (default: the service name in the config).")
@click.option("--component", help="The affected component, e.g. a backend name.")
@click.option("--dedup-key", help="Dedup key (default: derived from service, source, component and summary).")
@click.option("--link", "links", multiple=True, metavar="URL", help="A link for responders (repeatable).")
@click.option("--detail", "details", multiple=True, metavar="KEY=VALUE", help="A custom detail (repeatable).")
@drill_option
@dry_run_option
@output_option
@click.pass_obj
def trigger(app, summary, severity, source, component, dedup_key, links, details, drill, dry_run, output):
    """Page on-call. Prints the dedup key (and, when the pager gives one, the incident id) that ack,
    resolve and status take.

    \b
    Example:
      opsctl page trigger -s "databricks p99 latency 2.3s" --component databricks \\
          --link https://grafana.example.com/d/llm --detail burn_rate_1h=14.4
    """
    from opsctl.errors import UsageError
    from opsctl.paging.base import PageEvent

    try:
        event = PageEvent(summary=summary, source=source or app.config.service, severity=severity,
                          dedup_key=dedup_key, component=component, custom_details=_details(details),
                          links=_links(links), drill=drill)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    _emit_result(_pager(app, dry_run).trigger(event).to_dict(), output)


@page.command()
@click.argument("key", metavar="DEDUP_KEY|INCIDENT_ID", shell_complete=complete.pages)
@dry_run_option
@output_option
@click.pass_obj
def ack(app, key, dry_run, output):
    """Acknowledge the incident with this dedup key or incident id (both are printed by `trigger`).

    Exit 3 when no open incident has that key or id.

    \b
    Examples:
      opsctl page ack opsctl-llm-inference-3f2a9c...
      opsctl page ack LP00001
    """
    pager = _pager(app, dry_run)
    _emit_result(pager.acknowledge(_dedup_key(app, pager, key)).to_dict(), output)


@page.command()
@click.argument("key", metavar="DEDUP_KEY|INCIDENT_ID", shell_complete=complete.pages)
@dry_run_option
@output_option
@click.pass_obj
def resolve(app, key, dry_run, output):
    """Resolve the incident with this dedup key or incident id.

    Exit 3 when no open incident has that key or id.

    \b
    Examples:
      opsctl page resolve opsctl-llm-inference-3f2a9c...
      opsctl page resolve LP00001
    """
    pager = _pager(app, dry_run)
    _emit_result(pager.resolve(_dedup_key(app, pager, key)).to_dict(), output)


@page.command()
@click.argument("key", required=False, shell_complete=complete.pages)
@output_option
@click.pass_obj
def status(app, key, output):
    """An incident's timeline (by dedup key or incident id), or the pages opsctl sent.

    With KEY: status, time to acknowledge, escalations, responders and their times.
    Without: the pages recorded in the state dir, newest first.

    \b
    Examples:
      opsctl page status opsctl-llm-inference-3f2a9c... -o json
      opsctl page status
    """
    if key is None:
        from opsctl.paging.registry import page_records

        rows = page_records(app.config).list()
        emit(rows, output, table=lambda r: render_table(
            ["DEDUP KEY", "PROVIDER", "LAST", "AT", "DRILL", "SUMMARY"],
            [[p["dedup_key"], p["provider"], p["last_action"], p["last_at"], "yes" if p["drill"] else "",
              p["summary"]] for p in r]) if r else "no pages recorded")
        return
    emit(_pager(app, False).get_incident(key).to_dict(), output, table=_incident_table)


def _incident_table(d: dict) -> str:
    def after(seconds):
        return "" if seconds is None else f" (+{seconds:g}s)"

    lines = [
        f"incident      {d['id']} ({d['provider']})",
        f"title         {d['title']}",
        f"status        {d['status']}",
        f"dedup key     {d['dedup_key']}",
        f"created       {d['created_at']}",
        f"acknowledged  {d['acknowledged_at'] or '-'}{after(d['seconds_to_acknowledge'])}",
        f"escalations   {d['escalations']}{after(d['seconds_to_first_escalation'])}",
        f"resolved      {d['resolved_at'] or '-'}{after(d['seconds_to_resolve'])}",
    ]
    if d["url"]:
        lines.append(f"url           {d['url']}")
    if d["responders"]:
        lines += ["", render_table(["RESPONDER", "NOTIFIED", "ACKNOWLEDGED"], [
            [r["name"], f"{r['first_notified_at'] or '-'}{after(r['seconds_to_notify'])}",
             f"{r['acknowledged_at'] or '-'}{after(r['seconds_to_acknowledge'])}"] for r in d["responders"]])]
    return "\n".join(lines)


@page.command()
@click.option("-s", "--summary", required=True, help="The change, in one line.")
@click.option("--source", help="Where the change came from (default: the service name).")
@click.option("--link", "links", multiple=True, metavar="URL", help="A link (repeatable).")
@click.option("--detail", "details", multiple=True, metavar="KEY=VALUE", help="A custom detail (repeatable).")
@drill_option
@dry_run_option
@output_option
@click.pass_obj
def change(app, summary, source, links, details, drill, dry_run, output):
    """Send a change event (shown next to incidents; the traffic controller sends one per change).

    \b
    Example:
      opsctl page change -s "traffic: databricks 80% -> 0% (failover)" --detail reason=vendor-5xx
    """
    import time

    from opsctl.paging.base import ChangeEvent

    pager = _pager(app, dry_run)
    ev = ChangeEvent(summary=summary, source=source or app.config.service, timestamp=time.time(),
                     custom_details=_details(details), links=_links(links), drill=drill)
    _emit_result(pager.change_event(ev).to_dict(), output)


@page.command()
@output_option
@click.pass_obj
def oncall(app, output):
    """Who is on call now, by escalation level.

    \b
    Example:
      opsctl page oncall -o json
    """
    rows = [o.to_dict() for o in _pager(app, False).oncall()]
    emit(rows, output, table=lambda r: render_table(
        ["LEVEL", "USER", "SCHEDULE", "UNTIL"],
        [[o["escalation_level"], o["user"], o["schedule"] or "", o["end"] or ""] for o in r]) if r else "nobody on call")


@page.group()
def maintenance():
    """Open and close a maintenance window on the service (around a drill).

    \b
    Examples:
      opsctl page maintenance start --for 2h --description "[DRILL] vendor outage game day"
      opsctl page maintenance end PMW1234
    """


@maintenance.command("start")
@click.option("--for", "duration", default="1h", show_default=True, help="Length of the window (e.g. 30m, 2h).")
@click.option("--description", required=True, help="Why (shown in the pager).")
@dry_run_option
@output_option
@click.pass_obj
def maintenance_start(app, duration, description, dry_run, output):
    """Open a maintenance window starting now.

    \b
    Example:
      opsctl page maintenance start --for 90m --description "[DRILL] failover game day"
    """
    import time

    from opsctl.clock import parse_duration
    from opsctl.errors import UsageError

    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise UsageError(f"--for: {exc}") from exc
    if not 60 <= seconds <= 7 * 86400:
        raise UsageError("--for must be between 1m and 7d")
    start = time.time()
    window = _pager(app, dry_run).create_maintenance_window(start, start + seconds, description)
    _emit_result(window.to_dict(), output)


@maintenance.command("end")
@click.argument("window_id")
@dry_run_option
@output_option
@click.pass_obj
def maintenance_end(app, window_id, dry_run, output):
    """Close (delete) a maintenance window.

    \b
    Example:
      opsctl page maintenance end PMW1234
    """
    _emit_result(_pager(app, dry_run).delete_maintenance_window(window_id).to_dict(), output)
