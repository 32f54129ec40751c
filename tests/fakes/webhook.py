"""A loopback webhook receiver honouring opsctl's webhook contract: bearer token, HMAC-SHA256 signature
of the raw body, repeats of an Idempotency-Key answered with the first ticket, and a status URL."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re

from tests.fakes.https import FakeHTTPSServer, Request


class FakeWebhook(FakeHTTPSServer):
    service = "webhook"

    def __init__(self, ca, *, token: str, signing_secret: str):
        super().__init__(ca)
        self.token = token
        self.secret = signing_secret.encode()
        self.tickets: dict[str, dict] = {}
        self.by_key: dict[str, str] = {}
        self._n = itertools.count(1)

    def route(self, req: Request):
        if req.headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"error": "bad token"}, {}
        if req.method == "POST" and req.path == "/hooks/tickets":
            expected = "sha256=" + hmac.new(self.secret, req.body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(req.headers.get("x-opsctl-signature", ""), expected):
                return 403, {"error": "signature mismatch"}, {}
            key = req.headers.get("idempotency-key")
            body = req.json
            if not key or body.get("idempotency_key") != key:
                return 400, {"error": "Idempotency-Key header missing or not matching the body"}, {}
            if key in self.by_key:
                return 200, self.tickets[self.by_key[key]]["answer"], {}
            ticket_id = f"WH-{next(self._n)}"
            answer = {"id": ticket_id, "url": f"{self.url}/t/{ticket_id}", "status": "received"}
            self.tickets[ticket_id] = {"body": body, "answer": answer, "status": "received"}
            self.by_key[key] = ticket_id
            return 201, answer, {}
        m = re.fullmatch(r"/hooks/tickets/(WH-\d+)", req.path)
        if req.method == "GET" and m and m.group(1) in self.tickets:
            t = self.tickets[m.group(1)]
            return 200, {"status": t["status"], "first_response_at": t.get("first_response_at"),
                         "assignee": t.get("assignee"), "group": "inference-oncall",
                         "category": t["body"]["category"]}, {}
        return 404, {"error": "not found"}, {}
