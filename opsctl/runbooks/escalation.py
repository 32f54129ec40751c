"""Escalation a runbook quotes: how a backend's vendor ticket is routed (channel, category,
severities) and who is paged. Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsctl.config import Config


@dataclass(frozen=True)
class TicketRoute:
    """How a vendor backend's support ticket is filed: the opsctl names and what the vendor sees."""

    backend: str
    vendor: str
    channel: str | None  # local, zendesk, jira, email, webhook; None: no route configured
    category: str
    category_value: str | None
    severities: dict[str, tuple[str, str | None]]  # situation -> (Sev, the vendor's value)
    problem: str | None  # why no ticket can be filed as configured

    def sev(self, situation: str) -> str:
        return self.severities[situation][0]

    def sev_value(self, situation: str) -> str | None:
        return self.severities[situation][1]


def ticket_route(cfg: "Config", backend: str, *, auth: bool = False, capacity: bool = False) -> TicketRoute:
    """Where a runbook files the vendor ticket: the serving category, or the auth (`auth`) or the
    capacity (`capacity`: the vendor's throttling) category of runbooks.tickets."""
    b = cfg.backends[backend]
    vendor = b.vendor or backend
    settings = cfg.runbooks.tickets
    cause = "auth" if auth else "capacity" if capacity else None
    category = settings.category_for(cause)
    own = {"auth": settings.auth_category, "capacity": settings.capacity_category}.get(cause or "")
    key = f"runbooks.tickets.{cause}_category" if own else "runbooks.tickets.category"
    situations = {s: getattr(settings.severity, s) for s in ("outage", "page", "ticket")}
    route = cfg.tickets.vendors.get(vendor)
    if route is None:
        known = ", ".join(sorted(cfg.tickets.vendors)) or "none"
        return TicketRoute(backend, vendor, None, category, None, {s: (v, None) for s, v in situations.items()},
                           f"no ticket route for vendor {vendor!r}: add tickets.vendors.{vendor} (configured: {known})")
    problem = None
    if category not in route.categories:
        problem = (f"{key} {category!r} is not a category of tickets.vendors.{vendor}"
                   f" (known: {', '.join(route.categories)})")
    return TicketRoute(
        backend, vendor, route.provider or cfg.tickets.provider, category, route.categories.get(category),
        {s: (v, route.severities.get(v)) for s, v in situations.items()}, problem,
    )


@dataclass(frozen=True)
class Paging:
    provider: str
    service_id: str | None
    escalation_policy_id: str | None
    oncall: tuple[str, ...]  # local provider: who the ledger reports, by level


def paging(cfg: "Config") -> Paging:
    p = cfg.paging
    if p.provider == "pagerduty":
        return Paging("pagerduty", p.pagerduty.service_id, p.pagerduty.escalation_policy_id, ())
    return Paging(p.provider, None, None, tuple(p.local.oncall))
