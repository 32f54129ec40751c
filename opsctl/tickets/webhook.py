"""A generic webhook: POST the ticket as JSON to a team's own ticketing bridge.

The contract for the receiver: drop a repeat of the same `Idempotency-Key` (answer with the first
ticket), answer `{"id": ..., "url": ..., "status": ...}`, and optionally serve `status_url`
(`{id}` replaced) with `{status, first_response_at, assignee, group, category}`. With
`signing_secret` set, `X-Opsctl-Signature: sha256=<hex HMAC of the raw body>` authenticates us.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from urllib.parse import urlsplit

from opsctl.clock import parse_rfc3339
from opsctl.tickets.base import ChannelProvider, FiledTicket, TicketRequest, TicketStatus, category_name, route
from opsctl.tickets.http import HttpApi

PERM = "post tickets to the webhook (the receiver refused the bearer token or the signature)"
NOT_READABLE = "this webhook has no status_url: set tickets.webhook.status_url to read tickets back"


class WebhookProvider(ChannelProvider):
    name = "webhook"
    can_find = False
    resend_is_safe = True  # by contract: the receiver drops a repeated Idempotency-Key

    def __init__(self, settings, vendor: str, vendor_cfg, *, service: str, ca_file: Path | None = None, clock=None):
        super().__init__(settings, vendor, vendor_cfg, service=service, ca_file=ca_file, clock=clock)
        parts = urlsplit(settings.url)
        notes = {}
        if settings.bearer_token:
            notes["authorization"] = f"Bearer <redacted:{settings.bearer_token.describe()}>"
        creds = [f"tickets.webhook.bearer_token ({settings.bearer_token.describe()})"] if settings.bearer_token else []
        if settings.signing_secret:
            creds.append(f"tickets.webhook.signing_secret ({settings.signing_secret.describe()})")
        self.api = HttpApi("Webhook", f"{parts.scheme}://{parts.netloc}", auth=self._auth, auth_notes=notes,
                           credential=" and ".join(creds) or "the webhook URL (no credential configured)",
                           redactor=self.redactor, ca_file=ca_file, timeout=settings.retry.timeout)

    def _auth(self) -> dict[str, str]:
        if not self.settings.bearer_token:
            return {}
        token = self.settings.bearer_token.resolve()
        self.redactor.add(token)
        return {"Authorization": f"Bearer {token}"}

    def _sign(self, body: bytes) -> dict[str, str]:
        if not self.settings.signing_secret:
            return {}
        secret = self.settings.signing_secret.resolve()
        self.redactor.add(secret)
        return {"X-Opsctl-Signature": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}

    def _create(self, request: TicketRequest):
        r = route(request, self.vendor_cfg, service=self.service)
        body = {
            "vendor": request.vendor, "service": self.service,
            "category": r.category, "severity": r.severity,
            "opsctl_category": request.category, "opsctl_severity": request.severity,
            "subject": r.title, "body": r.body,
            "links": [{"href": link.href, "text": link.text or link.href} for link in request.links],
            "tags": list(r.tags), "drill": request.drill, "idempotency_key": request.key,
        }
        return self.api.request("POST", self.settings.url, json=body, headers={"Idempotency-Key": request.key})

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        body = self.api.send(self._create(request), action="post ticket", permission=PERM, timeout=timeout,
                             sign=self._sign) or {}
        return FiledTicket(id=str(body.get("id") or request.key), provider=self.name, vendor=self.vendor,
                           key=request.key, filed_at=self.clock.now(), category=request.category,
                           severity=request.severity, subject=request.title, drill=request.drill,
                           url=body.get("url"), status=body.get("status"), outcome="filed")

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        return None

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        if not self.settings.status_url:
            return TicketStatus(id=ticket_id, provider=self.name, vendor=self.vendor, readable=False, note=NOT_READABLE)
        req = self.api.request("GET", self.settings.status_url.replace("{id}", ticket_id))
        body = self.api.send(req, action=f"read ticket {ticket_id}", permission=PERM, timeout=timeout,
                             sign=self._sign) or {}
        first = body.get("first_response_at")
        category = body.get("category")
        return TicketStatus(
            id=ticket_id, provider=self.name, vendor=self.vendor, readable=True, status=body.get("status"),
            first_response_at=parse_rfc3339(first) if first else None, assignee=body.get("assignee"),
            group=body.get("group"), category_value=category, category=category_name(self.vendor_cfg, category),
            url=body.get("url"),
        )

    def plan(self, request: TicketRequest) -> list[dict]:
        notes = {}
        if self.settings.signing_secret:
            notes["x-opsctl-signature"] = (f"sha256=<HMAC of the body with "
                                           f"<redacted:{self.settings.signing_secret.describe()}>>")
        return [self.api.show(self._create(request), notes)]
