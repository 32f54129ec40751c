"""Jira Service Management: a customer request of the request type the category maps to.

The category picks the request type (which is how JSM routes to a team); the severity goes to the
priority or to a custom field. The idempotency key travels as a label, which `find` searches with
JQL after an interrupted run (Jira has no idempotency header, so a resend is not safe by itself).
Cloud uses basic auth (email + API token), Data Center a personal access token (bearer).
"""

from __future__ import annotations

import base64
from pathlib import Path

from opsctl.clock import parse_rfc3339
from opsctl.tickets.base import ChannelProvider, FiledTicket, TicketRequest, TicketStatus, category_name, route
from opsctl.tickets.http import HttpApi

PERM_CREATE = ("raise requests of this request type in service desk {desk} (the account must be a customer or "
               "agent of that service desk, and the request type must expose summary, description and labels)")
PERM_READ = "view requests, their comments and issues in service desk {desk} (Browse projects)"
KEY_LABEL = "opsctl-key-"


class JiraProvider(ChannelProvider):
    name = "jira"
    can_find = True
    resend_is_safe = False

    def __init__(self, settings, vendor: str, vendor_cfg, *, service: str, ca_file: Path | None = None, clock=None):
        super().__init__(settings, vendor, vendor_cfg, service=service, ca_file=ca_file, clock=clock)
        ref = settings.api_token
        note = (f"Basic <redacted: {settings.email}:<{ref.describe()}>>" if settings.deployment == "cloud"
                else f"Bearer <redacted:{ref.describe()}>")
        self.api = HttpApi("Jira", settings.url, auth=self._auth, auth_notes={"authorization": note},
                           credential=f"tickets.jira.api_token ({ref.describe()})", redactor=self.redactor,
                           ca_file=ca_file, timeout=settings.retry.timeout)
        self.perm_create = PERM_CREATE.format(desk=settings.service_desk_id)
        self.perm_read = PERM_READ.format(desk=settings.service_desk_id)

    def _auth(self) -> dict[str, str]:
        token = self.settings.api_token.resolve()
        self.redactor.add(token)
        if self.settings.deployment == "datacenter":
            return {"Authorization": f"Bearer {token}"}
        basic = base64.b64encode(f"{self.settings.email}:{token}".encode()).decode()
        self.redactor.add(basic)
        return {"Authorization": f"Basic {basic}"}

    def _create(self, request: TicketRequest):
        s = self.settings
        r = route(request, self.vendor_cfg, service=self.service, base_tags=s.labels)
        fields: dict = {"summary": r.title, "description": r.body,
                        "labels": [t.replace(" ", "_") for t in r.tags] + [KEY_LABEL + request.key]}
        if s.severity_field == "priority":
            fields["priority"] = {"name": r.severity}
        else:
            fields[s.severity_field] = {"value": r.severity}
        body = {"serviceDeskId": s.service_desk_id, "requestTypeId": r.category, "requestFieldValues": fields}
        return self.api.request("POST", "/rest/servicedeskapi/request", json=body)

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        body = self.api.send(self._create(request), action="create customer request", permission=self.perm_create,
                             timeout=timeout)
        filed_at = _jira_time(body.get("createdDate")) or self.clock.now()
        return self._filed(request, body["issueKey"], filed_at, (body.get("currentStatus") or {}).get("status"),
                           ((body.get("_links") or {}).get("web")), "filed")

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        path = "/rest/api/3/search/jql" if self.settings.deployment == "cloud" else "/rest/api/2/search"
        jql = f'labels = "{KEY_LABEL}{request.key}" ORDER BY created ASC'
        req = self.api.request("GET", path, params={"jql": jql, "fields": "created,status", "maxResults": 1})
        body = self.api.send(req, action="search requests by idempotency label", permission=self.perm_read,
                             timeout=timeout)
        issues = body.get("issues") or []
        if not issues:
            return None
        issue = issues[0]
        fields = issue.get("fields") or {}
        created = fields.get("created")
        return self._filed(request, issue["key"], parse_rfc3339(_iso(created)) if created else self.clock.now(),
                           (fields.get("status") or {}).get("name"), None, "recovered")

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        def get(path, params=None, what="read request"):
            return self.api.send(self.api.request("GET", path, params=params), action=f"{what} {ticket_id}",
                                 permission=self.perm_read, timeout=timeout)

        req = get(f"/rest/servicedeskapi/request/{ticket_id}")
        reporter = _person_id(req.get("reporter"))
        comments = get(f"/rest/servicedeskapi/request/{ticket_id}/comment", {"public": "true", "internal": "false"},
                       "read comments of").get("values") or []
        replies = [c for c in comments if _person_id(c.get("author")) != reporter]
        times = [t for t in (_jira_time(c.get("created")) for c in replies) if t is not None]
        first = min(times, default=None)
        issue = get(f"/rest/api/2/issue/{ticket_id}", {"fields": "assignee"}, "read issue")
        assignee = ((issue.get("fields") or {}).get("assignee") or {}).get("displayName")
        request_type = str(req.get("requestTypeId")) if req.get("requestTypeId") is not None else None
        return TicketStatus(
            id=req.get("issueKey", ticket_id), provider=self.name, vendor=self.vendor, readable=True,
            status=(req.get("currentStatus") or {}).get("status"), first_response_at=first, assignee=assignee,
            group=f"service desk {req.get('serviceDeskId', self.settings.service_desk_id)}",
            category_value=request_type, category=category_name(self.vendor_cfg, request_type),
            url=(req.get("_links") or {}).get("web"),
        )

    def plan(self, request: TicketRequest) -> list[dict]:
        return [self.api.show(self._create(request))]

    def _filed(self, request, key, filed_at, status, url, outcome) -> FiledTicket:
        return FiledTicket(id=key, provider=self.name, vendor=self.vendor, key=request.key, filed_at=filed_at,
                           category=request.category, severity=request.severity, subject=request.title,
                           drill=request.drill, url=url, status=status, outcome=outcome)


def _person_id(person) -> str | None:
    person = person or {}
    return person.get("accountId") or person.get("name") or person.get("emailAddress")


def _jira_time(value) -> float | None:
    """JSM dates come as {"iso8601": "...", "epochMillis": ...}."""
    if isinstance(value, dict):
        if value.get("epochMillis") is not None:
            return value["epochMillis"] / 1000.0
        value = value.get("iso8601")
    return parse_rfc3339(_iso(value)) if value else None


def _iso(value: str) -> str:
    """Jira writes offsets without a colon (2026-11-26T15:00:00.000+0000)."""
    if len(value) > 5 and value[-5] in "+-" and value[-4:].isdigit():
        return value[:-2] + ":" + value[-2:]
    return value
