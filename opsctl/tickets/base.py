"""The TicketProvider interface, the ticket as opsctl sees it, and its routing to a vendor's values.

A ticket is `{vendor, category, severity (Sev1..Sev4), subject, body, links, drill}`. The vendor's
config maps opsctl's category and severity to the channel's values (for Databricks, `inference`
-> its Model Serving category), so the ticket reaches the team that can act on it.

One Protocol, one file per channel (zendesk, jira, email, webhook, local). Each channel makes
single attempts; `desk.TicketDesk` wraps any channel with retries and the idempotency record, and
is what `registry.open_ticket_provider` hands out. Every ticket carries an idempotency key (given,
or derived from its content) so that a retried command never files a second ticket.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from opsctl.clock import format_rfc3339
from opsctl.config import SEVERITIES
from opsctl.errors import UsageError
DRILL_PREFIX = "[DRILL] "
DRILL_TAG = "drill"
KEY_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


@dataclass(frozen=True)
class Link:
    href: str
    text: str = ""


@dataclass(frozen=True)
class TicketRequest:
    vendor: str
    category: str
    severity: str
    subject: str
    body: str = ""
    links: tuple[Link, ...] = ()
    drill: bool = False
    idempotency_key: str | None = None

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise UsageError(f"severity must be one of {', '.join(SEVERITIES)} (got {self.severity!r})")
        if not self.subject.strip():
            raise UsageError("a ticket needs a subject")
        if self.idempotency_key is not None and not KEY_PATTERN.fullmatch(self.idempotency_key):
            raise UsageError("idempotency key: 1-128 characters from letters, digits and . _ : - "
                             f"(got {self.idempotency_key!r})")

    @property
    def key(self) -> str:
        return self.idempotency_key or derive_key(self)

    @property
    def key_is_derived(self) -> bool:
        return self.idempotency_key is None

    @property
    def title(self) -> str:
        """The subject as sent: drills are marked."""
        subject = self.subject.strip()
        return subject if not self.drill or subject.startswith(DRILL_PREFIX) else DRILL_PREFIX + subject


def derive_key(request: TicketRequest) -> str:
    """The same ticket content gives the same key, so re-running a command finds the first ticket."""
    parts = [request.vendor, request.category, request.severity, request.subject.strip(), request.body.strip(),
             *(link.href for link in request.links), "drill" if request.drill else "real"]
    return "tk-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Routed:
    """A ticket in the vendor's terms: the values its channel expects."""

    title: str
    category: str  # provider value, e.g. "Model Serving" or a Jira request type id
    severity: str  # provider value
    tags: tuple[str, ...]
    body: str


def route(request: TicketRequest, vendor_cfg, *, service: str, base_tags: tuple[str, ...] = ()) -> Routed:
    """Map opsctl's category and severity to the vendor's values; an unmapped category is an error."""
    categories = vendor_cfg.categories
    if request.category not in categories:
        known = ", ".join(sorted(categories))
        raise UsageError(f"vendor {request.vendor!r} has no category {request.category!r} (known: {known})",
                         hint=f"map it under tickets.vendors.{request.vendor}.categories in the config")
    category = categories[request.category]
    severity = vendor_cfg.severities[request.severity]
    title = request.title
    tags = [*base_tags, *vendor_cfg.tags, f"opsctl_{request.category}", f"opsctl_{request.severity.lower()}"]
    if request.drill:
        tags.append(DRILL_TAG)
    lines = []
    if request.drill:
        lines += ["*** DRILL: this ticket is part of a planned exercise (game day). No production impact. ***", ""]
    if request.body.strip():
        lines += [request.body.strip(), ""]
    if request.links:
        lines += ["Links:", *(f"- {link.text + ': ' if link.text else ''}{link.href}" for link in request.links), ""]
    lines += [
        "--",
        f"Category: {category} (opsctl: {request.category}) / Severity: {severity} (opsctl: {request.severity})",
        f"Filed by opsctl for {service}; reference {request.key}",
    ]
    return Routed(title=title, category=category, severity=severity, tags=tuple(dict.fromkeys(tags)),
                  body="\n".join(lines))


@dataclass(frozen=True)
class FiledTicket:
    id: str
    provider: str
    vendor: str
    key: str
    filed_at: float
    category: str  # opsctl's
    severity: str  # opsctl's
    subject: str
    drill: bool = False
    url: str | None = None
    status: str | None = None
    # filed: just now; existing: the idempotency record already had it; recovered: found at the
    # provider after an interrupted attempt; dry-run: nothing was sent.
    outcome: str = "filed"
    requests: tuple[dict, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict:
        out = {"id": self.id, "provider": self.provider, "vendor": self.vendor, "idempotency_key": self.key,
               "outcome": self.outcome, "category": self.category, "severity": self.severity,
               "subject": self.subject, "drill": self.drill, "url": self.url, "status": self.status,
               "filed_at": format_rfc3339(self.filed_at), "dry_run": self.outcome == "dry-run"}
        if self.outcome == "dry-run":
            out["requests"] = list(self.requests)
        return out


@dataclass(frozen=True)
class TicketStatus:
    id: str
    provider: str
    vendor: str
    readable: bool  # False: the channel cannot report status (email); `note` says why
    status: str | None = None
    first_response_at: float | None = None
    assignee: str | None = None
    group: str | None = None
    category_value: str | None = None  # the category as the vendor has it routed now
    category: str | None = None  # the same, in opsctl's name (None: not one opsctl maps)
    url: str | None = None
    note: str | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "provider": self.provider, "vendor": self.vendor, "readable": self.readable,
                "status": self.status,
                "first_response_at": None if self.first_response_at is None else format_rfc3339(self.first_response_at),
                "assignee": self.assignee, "group": self.group, "category": self.category,
                "category_value": self.category_value, "url": self.url, "note": self.note}


def category_name(vendor_cfg, value: str | None) -> str | None:
    """Reverse-map a provider category value to opsctl's name (the vendor may have re-routed it)."""
    for name, mapped in vendor_cfg.categories.items():
        if value is not None and str(mapped) == str(value):
            return name
    return None


class ChannelProvider:
    """What every vendor channel (Zendesk, Jira, email, webhook) is constructed with, written once:
    its settings section, the vendor and its routing config, the service, an extra CA bundle, the
    clock and the redactor its errors and dry runs are scrubbed with."""

    def __init__(self, settings, vendor: str, vendor_cfg, *, service: str, ca_file: Path | None = None,
                 clock=None):
        from opsctl.clock import WallClock
        from opsctl.remote import Redactor

        self.settings = settings
        self.vendor = vendor
        self.vendor_cfg = vendor_cfg
        self.service = service
        self.ca_file = ca_file
        self.clock = clock or WallClock()
        self.redactor = Redactor()


class TicketProvider(Protocol):
    name: str  # zendesk | jira | email | webhook | local
    vendor: str
    can_find: bool  # can look a filed ticket up by its idempotency key
    resend_is_safe: bool  # the channel itself drops a second request with the same key

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket: ...

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None: ...

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus: ...

    def plan(self, request: TicketRequest) -> list[dict]:
        """The exact requests `file` would send, secrets redacted (for --dry-run)."""
        ...
