"""Zendesk tickets API: the category and severity go into custom fields (or priority and tags).

Creation sends the idempotency key twice: as `Idempotency-Key` (Zendesk answers a repeat with the
first ticket) and as the ticket's `external_id`, which `find` searches after an interrupted run.
Status reads the ticket with its users and groups side-loaded, and the first public comment not
written by the requester as the first response.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from opsctl.clock import parse_rfc3339
from opsctl.tickets.base import ChannelProvider, FiledTicket, TicketRequest, TicketStatus, category_name, route
from opsctl.tickets.http import HttpApi

PERM_CREATE = "create tickets (an agent, or an end user allowed to use the API; custom fields and group need an agent)"
PERM_READ = "read tickets and their comments (an agent who can see the ticket's group)"


class ZendeskProvider(ChannelProvider):
    name = "zendesk"
    can_find = True
    resend_is_safe = True

    def __init__(self, settings, vendor: str, vendor_cfg, *, service: str, ca_file: Path | None = None, clock=None):
        super().__init__(settings, vendor, vendor_cfg, service=service, ca_file=ca_file, clock=clock)
        ref = settings.api_token
        self.api = HttpApi(
            "Zendesk", settings.url, auth=self._auth,
            auth_notes={"authorization": f"Basic <redacted: {settings.email}/token:<{ref.describe()}>>"},
            credential=f"tickets.zendesk.api_token ({ref.describe()}) for {settings.email}",
            redactor=self.redactor, ca_file=ca_file, timeout=settings.retry.timeout,
        )

    def _auth(self) -> dict[str, str]:
        token = self.settings.api_token.resolve()
        basic = base64.b64encode(f"{self.settings.email}/token:{token}".encode()).decode()
        self.redactor.add(token)
        self.redactor.add(basic)
        return {"Authorization": f"Basic {basic}"}

    def _create(self, request: TicketRequest):
        s = self.settings
        r = route(request, self.vendor_cfg, service=self.service, base_tags=s.tags)
        tags = [_tag(t) for t in r.tags]
        custom_fields = []
        ticket: dict = {"subject": r.title, "comment": {"body": r.body, "public": True}, "external_id": request.key}
        if s.category_field_id is not None:
            custom_fields.append({"id": s.category_field_id, "value": r.category})
        else:
            tags.append(_tag(r.category))
        if s.severity_field_id is not None:
            custom_fields.append({"id": s.severity_field_id, "value": r.severity})
        else:
            ticket["priority"] = r.severity
        if self.vendor_cfg.group_id is not None:
            ticket["group_id"] = self.vendor_cfg.group_id
        ticket["tags"] = list(dict.fromkeys(tags))
        if custom_fields:
            ticket["custom_fields"] = custom_fields
        return self.api.request("POST", "/api/v2/tickets.json", json={"ticket": ticket},
                                headers={"Idempotency-Key": request.key})

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        body = self.api.send(self._create(request), action="create ticket", permission=PERM_CREATE, timeout=timeout)
        return self._filed(request, body["ticket"], "filed")

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        req = self.api.request("GET", "/api/v2/tickets.json", params={"external_id": request.key})
        body = self.api.send(req, action="look up a ticket by external_id", permission=PERM_READ, timeout=timeout)
        tickets = sorted(body.get("tickets") or [], key=lambda t: t.get("created_at", ""))
        return self._filed(request, tickets[0], "recovered") if tickets else None

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        req = self.api.request("GET", f"/api/v2/tickets/{ticket_id}.json", params={"include": "users,groups"})
        body = self.api.send(req, action=f"read ticket {ticket_id}", permission=PERM_READ, timeout=timeout)
        t = body["ticket"]
        users = {u["id"]: u.get("name") for u in body.get("users") or []}
        groups = {g["id"]: g.get("name") for g in body.get("groups") or []}
        req = self.api.request("GET", f"/api/v2/tickets/{ticket_id}/comments.json")
        comments = self.api.send(req, action=f"read comments of ticket {ticket_id}", permission=PERM_READ,
                                 timeout=timeout).get("comments") or []
        replies = [c for c in comments if c.get("public", True) and c.get("author_id") != t.get("requester_id")]
        first = min((parse_rfc3339(c["created_at"]) for c in replies), default=None)
        category = None
        if self.settings.category_field_id is not None:
            category = next((f.get("value") for f in t.get("custom_fields") or []
                             if f.get("id") == self.settings.category_field_id), None)
        assignee = t.get("assignee_id")
        group = t.get("group_id")
        return TicketStatus(
            id=str(t["id"]), provider=self.name, vendor=self.vendor, readable=True, status=t.get("status"),
            first_response_at=first,
            assignee=users.get(assignee, str(assignee)) if assignee is not None else None,
            group=groups.get(group, str(group)) if group is not None else None,
            category_value=category, category=category_name(self.vendor_cfg, category),
            url=self._web_url(t["id"]),
        )

    def plan(self, request: TicketRequest) -> list[dict]:
        return [self.api.show(self._create(request))]

    def _filed(self, request: TicketRequest, t: dict, outcome: str) -> FiledTicket:
        filed_at = parse_rfc3339(t["created_at"]) if t.get("created_at") else self.clock.now()
        return FiledTicket(id=str(t["id"]), provider=self.name, vendor=self.vendor, key=request.key, filed_at=filed_at,
                           category=request.category, severity=request.severity, subject=t.get("subject", ""),
                           drill=request.drill, url=self._web_url(t["id"]), status=t.get("status"), outcome=outcome)

    def _web_url(self, ticket_id) -> str:
        return f"{self.settings.url.rstrip('/')}/agent/tickets/{ticket_id}"


def _tag(value: str) -> str:
    """Zendesk tags are lower case without spaces."""
    return re.sub(r"[^a-z0-9_:/.-]+", "_", value.lower()).strip("_")
