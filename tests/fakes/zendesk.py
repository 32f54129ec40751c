"""A loopback fake of the Zendesk tickets API (the parts opsctl uses), checking auth and request shape.

Auth is `Authorization: Basic base64("{email}/token:{api_token}")`. Like Zendesk, a repeated
`Idempotency-Key` with the same payload answers with the first ticket (and a different payload
under the same key is a 400), and `GET /api/v2/tickets.json?external_id=` lists by external id.
"""

from __future__ import annotations

import base64
import itertools
import re
import time

from tests.fakes.https import FakeHTTPSServer, Request
from tests.fakes.pagerduty import iso

PRIORITIES = ("urgent", "high", "normal", "low")


class FakeZendesk(FakeHTTPSServer):
    service = "zendesk"

    def __init__(self, ca, *, email: str, token: str, agent: bool = True, field_ids=()):
        super().__init__(ca)
        self.auth = "Basic " + base64.b64encode(f"{email}/token:{token}".encode()).decode()
        self.agent = agent
        self.field_ids = set(field_ids)
        self.tickets: dict[int, dict] = {}
        self.comments: dict[int, list[dict]] = {}
        self.users = {1001: "opsctl bot"}
        self.groups: dict[int, str] = {}
        self.idempotency: dict[str, tuple[int, bytes]] = {}
        self.requester_id = 1001
        self._ids = itertools.count(35436)
        self._cids = itertools.count(9000)

    def expire_idempotency_keys(self) -> None:
        """Zendesk keeps an Idempotency-Key for two hours only: model that time having passed."""
        with self.lock:
            self.idempotency.clear()

    def respond(self, ticket_id: int, *, agent_id: int, agent: str, at: float, status: str = "open",
                group_id: int | None = None, group: str | None = None, category: str | None = None):
        """Play the vendor's support engineer: a public reply, assignment, maybe re-routing."""
        with self.lock:
            t = self.tickets[ticket_id]
            self.users[agent_id] = agent
            t.update(assignee_id=agent_id, status=status)
            if group_id is not None:
                self.groups[group_id] = group or str(group_id)
                t["group_id"] = group_id
            if category is not None:
                for f in t["custom_fields"]:
                    if f["id"] == min(self.field_ids):
                        f["value"] = category
            self.comments[ticket_id].append({"id": next(self._cids), "author_id": agent_id, "public": True,
                                             "body": "Looking into it.", "created_at": iso(at)})

    def route(self, req: Request):
        if req.headers.get("authorization") != self.auth:
            return 401, {"error": "Couldn't authenticate you"}, {}
        if req.method == "POST" and req.path == "/api/v2/tickets.json":
            return self._create(req)
        if req.method == "GET" and req.path == "/api/v2/tickets.json":
            ext = req.q("external_id")
            found = [t for t in self.tickets.values() if ext is None or t.get("external_id") == ext]
            return 200, {"tickets": found, "count": len(found), "next_page": None, "previous_page": None}, {}
        m = re.fullmatch(r"/api/v2/tickets/(\d+)(/comments)?\.json", req.path)
        if req.method == "GET" and m:
            t = self.tickets.get(int(m.group(1)))
            if t is None:
                return 404, {"error": "RecordNotFound", "description": "Not found"}, {}
            if m.group(2):
                return 200, {"comments": self.comments[t["id"]], "next_page": None}, {}
            out = {"ticket": t}
            include = (req.q("include") or "").split(",")
            if "users" in include:
                ids = {t["requester_id"], t.get("assignee_id")} - {None}
                out["users"] = [{"id": i, "name": self.users[i]} for i in ids]
            if "groups" in include and t.get("group_id") in self.groups:
                out["groups"] = [{"id": t["group_id"], "name": self.groups[t["group_id"]]}]
            return 200, out, {}
        return 404, {"error": "InvalidEndpoint", "description": "Not found"}, {}

    def _create(self, req: Request):
        if req.headers.get("content-type") != "application/json":
            return 415, {"error": "Unsupported Media Type"}, {}
        key = req.headers.get("idempotency-key")
        if key in self.idempotency:
            ticket_id, body = self.idempotency[key]
            if body != req.body:
                return 400, {"error": "IdempotentRequestError",
                             "description": "Idempotency key was already used with a different payload"}, {}
            return 201, {"ticket": self.tickets[ticket_id]}, {"x-idempotency-lookup": "hit"}
        t = (req.json or {}).get("ticket") or {}
        errors = {}
        if not t.get("subject"):
            errors["subject"] = [{"description": "Subject: cannot be blank"}]
        if not (t.get("comment") or {}).get("body"):
            errors["comment"] = [{"description": "Description: cannot be blank"}]
        if t.get("priority") is not None and t["priority"] not in PRIORITIES:
            errors["priority"] = [{"description": f"Priority: {t['priority']} is not valid"}]
        for f in t.get("custom_fields") or []:
            if f.get("id") not in self.field_ids:
                errors["custom_fields"] = [{"description": f"unknown ticket field {f.get('id')}"}]
        if errors:
            return 422, {"error": "RecordInvalid", "description": "Record validation errors", "details": errors}, {}
        if not self.agent and (t.get("custom_fields") or t.get("group_id")):
            return 403, {"error": "Forbidden", "description": "You do not have access to this page. Please contact "
                                                              "the account owner of this help desk for further help."}, {}
        now = time.time()
        ticket = {
            "id": next(self._ids), "url": f"{self.url}/api/v2/tickets/0.json", "subject": t["subject"],
            "description": t["comment"]["body"], "status": "new", "priority": t.get("priority"),
            "requester_id": self.requester_id, "assignee_id": None, "group_id": t.get("group_id"),
            "tags": t.get("tags") or [], "custom_fields": t.get("custom_fields") or [],
            "external_id": t.get("external_id"), "created_at": iso(now),
        }
        self.tickets[ticket["id"]] = ticket
        self.comments[ticket["id"]] = [{"id": next(self._cids), "author_id": self.requester_id, "public": True,
                                        "body": t["comment"]["body"], "created_at": iso(now)}]
        if key:
            self.idempotency[key] = (ticket["id"], req.body)
        return 201, {"ticket": ticket}, {}
