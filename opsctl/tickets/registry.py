"""Ticket channel name -> factory. An unknown name is an error, never a fallback.

    from opsctl.tickets.registry import open_ticket_provider
    from opsctl.tickets.base import TicketRequest
    desk = open_ticket_provider(cfg, "databricks")            # retries + idempotency record
    ticket = desk.file(TicketRequest(vendor="databricks", category="inference", severity="Sev2",
                                     subject="Model Serving endpoint 5xx at 12%", body="..."))
    desk.status(ticket.id).first_response_at
"""

from __future__ import annotations

from typing import Callable

from opsctl.clock import Clock, WallClock
from opsctl.errors import ConfigError
from opsctl.retry import RetryPolicy
from opsctl.tickets.base import TicketProvider


def _ca(cfg, settings):
    return cfg.path(settings.ca_file) if settings.ca_file else None


def _local(cfg, vendor, vendor_cfg, clock: Clock):
    from opsctl.tickets.local import LocalTicketProvider

    return LocalTicketProvider(cfg.state_path / "tickets" / "ledger.json", vendor, vendor_cfg, service=cfg.service,
                               group=cfg.tickets.local.group, clock=clock)


def _zendesk(cfg, vendor, vendor_cfg, clock: Clock):
    from opsctl.tickets.zendesk import ZendeskProvider

    s = cfg.tickets.zendesk
    return ZendeskProvider(s, vendor, vendor_cfg, service=cfg.service, ca_file=_ca(cfg, s), clock=clock)


def _jira(cfg, vendor, vendor_cfg, clock: Clock):
    from opsctl.tickets.jira import JiraProvider

    s = cfg.tickets.jira
    return JiraProvider(s, vendor, vendor_cfg, service=cfg.service, ca_file=_ca(cfg, s), clock=clock)


def _email(cfg, vendor, vendor_cfg, clock: Clock):
    from opsctl.tickets.email import EmailProvider

    s = cfg.tickets.email
    return EmailProvider(s, vendor, vendor_cfg, service=cfg.service, ca_file=_ca(cfg, s), clock=clock)


def _webhook(cfg, vendor, vendor_cfg, clock: Clock):
    from opsctl.tickets.webhook import WebhookProvider

    s = cfg.tickets.webhook
    return WebhookProvider(s, vendor, vendor_cfg, service=cfg.service, ca_file=_ca(cfg, s), clock=clock)


PROVIDERS: dict[str, Callable] = {"local": _local, "zendesk": _zendesk, "jira": _jira, "email": _email,
                                  "webhook": _webhook}


def open_ticket_provider(cfg, vendor: str, *, dry_run: bool = False, resend: bool = False,
                         clock: Clock | None = None, on_retry: Callable | None = None) -> TicketProvider:
    """The vendor's ticket channel, wrapped in retries and the idempotency record (or a dry run)."""
    vendor_cfg = cfg.tickets.vendor(vendor)
    name = vendor_cfg.provider or cfg.tickets.provider
    factory = PROVIDERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown ticket provider {name!r} (known: {', '.join(sorted(PROVIDERS))})")
    if name != "local" and getattr(cfg.tickets, name) is None:
        raise ConfigError(f"vendor {vendor!r} files through {name}, but there is no tickets.{name} section")
    clock = clock or WallClock()
    channel = factory(cfg, vendor, vendor_cfg, clock)
    if dry_run:
        from opsctl.tickets.noop import DryRunTicketProvider

        return DryRunTicketProvider(channel, clock, ticket_records(cfg), cfg.tickets.dedup_window.seconds)
    from opsctl.tickets.desk import TicketDesk

    settings = getattr(cfg.tickets, name, None)
    policy = RetryPolicy.from_settings(settings.retry) if settings is not None and hasattr(settings, "retry") \
        else RetryPolicy()
    return TicketDesk(channel, ticket_records(cfg), policy, window=cfg.tickets.dedup_window.seconds,
                      clock=clock, resend=resend, on_retry=on_retry)


def ticket_records(cfg):
    from opsctl.tickets.records import TicketRecords

    return TicketRecords(cfg.state_path / "tickets" / "records.json")
