"""`opsctl ticket file|status|list`."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, emit_dry_run, output_option, render_table
from opsctl.cli.params import choice


@click.group()
def ticket():
    """File vendor support tickets in the category that reaches the right team, and read them back.

    Each vendor's channel (local, zendesk, jira, email, webhook) and its category and severity
    values are set under tickets.vendors in the config. Re-running a `ticket file` command never
    files a second ticket: the idempotency key (given, or derived from the ticket's content) finds
    the first one.

    \b
    Examples:
      opsctl ticket file --vendor databricks --category inference --severity Sev2 \\
          --subject "Model Serving endpoint returns 503 for 12% of requests" --body-file incident.md
      opsctl ticket file --vendor databricks --category inference --severity Sev3 \\
          --subject "game day: vendor outage" --drill --dry-run
      opsctl ticket status LT00001 -o json
      opsctl ticket list --vendor databricks
    """


def _vendor(cfg, vendor: str | None) -> str:
    from opsctl.errors import UsageError

    if vendor:
        return vendor
    vendors = sorted(cfg.tickets.vendors)
    if len(vendors) == 1:
        return vendors[0]
    raise UsageError(f"--vendor is required (configured vendors: {', '.join(vendors) or 'none'})")


@ticket.command("file")
@click.option("--vendor", help="Vendor name under tickets.vendors (default: the only one configured).")
@click.option("--category", help="opsctl category, e.g. inference (mapped to the vendor's); default:"
                                " runbooks.tickets.category, the serving category.")
@click.option("--severity", required=True, type=choice(["Sev1", "Sev2", "Sev3", "Sev4"]),
              help="Sev1 (service down) .. Sev4 (question); mapped to the vendor's scale.")
@click.option("--subject", required=True, help="One-line summary.")
@click.option("--body", default="", help="Details: impact, start time, what was tried.")
@click.option("--body-file", type=click.File("r"), help="Read the details from a file ('-' for stdin).")
@click.option("--link", "links", multiple=True, metavar="URL", help="A link for the vendor (repeatable).")
@click.option("--drill", is_flag=True, help="Mark as a drill: [DRILL] in the subject, a drill tag, a drill banner.")
@click.option("--idempotency-key", help="Key that makes re-runs safe (default: derived from the content).")
@click.option("--resend", is_flag=True,
              help="Send again after an interrupted run that the channel cannot check (email).")
@click.option("--dry-run", is_flag=True, help="File nothing; show the exact request (secrets redacted).")
@output_option
@click.pass_obj
def file_ticket(app, vendor, category, severity, subject, body, body_file, links, drill, idempotency_key, resend,
                dry_run, output):
    """File a support ticket with a vendor. Prints the ticket id that `status` takes.

    \b
    Example:
      opsctl ticket file --vendor databricks --category inference --severity Sev1 \\
          --subject "Serving endpoint llm-prod down" --link https://grafana.example.com/d/llm
    """
    from opsctl.errors import UsageError
    from opsctl.tickets.base import Link, TicketRequest
    from opsctl.tickets.registry import open_ticket_provider

    if body and body_file:
        raise UsageError("give --body or --body-file, not both")
    if body_file:
        body = body_file.read()
    cfg = app.config
    vendor = _vendor(cfg, vendor)
    category = category or cfg.runbooks.tickets.category
    request = TicketRequest(vendor=vendor, category=category, severity=severity, subject=subject, body=body,
                            links=tuple(Link(u) for u in links), drill=drill, idempotency_key=idempotency_key)
    filed = open_ticket_provider(cfg, vendor, dry_run=dry_run, resend=resend).file(request)
    data = filed.to_dict()
    if dry_run and output == "table":
        emit_dry_run(data, output, "filed")
        return
    emit(data, output)


@ticket.command()
@click.argument("ticket_id")
@click.option("--vendor", help="Vendor, when the ticket was not filed by opsctl from this state dir.")
@output_option
@click.pass_obj
def status(app, ticket_id, vendor, output):
    """Read a ticket back: status, first response, assignee or group, category as routed.

    TICKET_ID is the provider's id or the idempotency key. Exit 3 when no ticket has that id, or
    when the channel cannot report status (email): unknown is never shown as fine.

    \b
    Example:
      opsctl ticket status 35436 -o json
    """
    from opsctl.errors import NoDataError
    from opsctl.tickets.registry import open_ticket_provider, ticket_records

    cfg = app.config
    rec = ticket_records(cfg).get(ticket_id)
    if rec is not None and rec.get("state") != "filed":
        raise NoDataError(f"ticket {ticket_id}: the run that filed it was interrupted; it may not exist",
                          hint="re-run the same `opsctl ticket file` command: it checks and finishes the job")
    if rec is None and not vendor:
        # An id that names nothing known is "no data" (3), like an unknown page; 2 is for malformed input.
        raise NoDataError(f"no ticket {ticket_id!r} in opsctl's records",
                          hint="pass --vendor to ask the vendor's channel; `opsctl ticket list` shows the recorded ones")
    vendor = vendor or rec["vendor"]
    result = open_ticket_provider(cfg, vendor).status(rec["ticket_id"] if rec else ticket_id)
    emit(result.to_dict(), output)
    if not result.readable:
        raise NoDataError(f"ticket {result.id}: {result.note}")


@ticket.command("list")
@click.option("--vendor", help="Only this vendor's tickets.")
@output_option
@click.pass_obj
def list_tickets(app, vendor, output):
    """Tickets opsctl filed from this state dir, newest first (status as last read).

    \b
    Example:
      opsctl ticket list -o json
    """
    from opsctl.tickets.registry import ticket_records

    rows = ticket_records(app.config).list(vendor)
    emit(rows, output, table=lambda r: render_table(
        ["ID", "VENDOR", "PROVIDER", "SEV", "CATEGORY", "STATUS", "FILED", "SUBJECT"],
        [[t["id"] or f"({t['state']})", t["vendor"], t["provider"], t["severity"], t["category"], t["status"] or "",
          t["filed_at"] or "", t["subject"]] for t in r]) if r else "no tickets recorded")
