"""A local ticket ledger in the state dir, for the embedded environment and drills.

Behaves like a vendor that honours idempotency keys: filing the same key twice returns the first
ticket. `respond` lets a drill play the vendor (first response, assignee, re-routing).
"""

from __future__ import annotations

import copy
from pathlib import Path

from opsctl.clock import WallClock, format_rfc3339
from opsctl.errors import NoDataError
from opsctl.statefile import read_json, updating
from opsctl.tickets.base import FiledTicket, TicketRequest, TicketStatus, category_name, route

EMPTY = {"version": 1, "next_id": 1, "tickets": []}


class LocalTicketProvider:
    name = "local"
    can_find = True
    resend_is_safe = True
    takes_notes = True

    def __init__(self, path: Path, vendor: str, vendor_cfg, *, service: str, group: str, clock=None):
        self.path = Path(path)
        self.vendor = vendor
        self.vendor_cfg = vendor_cfg
        self.service = service
        self.group = group
        self.clock = clock or WallClock()

    def _record(self, request: TicketRequest, ticket_id: str, now: float) -> dict:
        r = route(request, self.vendor_cfg, service=self.service)
        return {
            "id": ticket_id, "vendor": request.vendor, "key": request.key, "subject": r.title, "body": r.body,
            "category": r.category, "severity": r.severity, "opsctl_category": request.category,
            "opsctl_severity": request.severity, "tags": list(r.tags),
            "links": [{"href": link.href, "text": link.text} for link in request.links], "drill": request.drill,
            "status": "new", "group": self.group, "assignee": None, "first_response_at": None, "created_at": now,
        }

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        now = self.clock.now()
        with updating(self.path, copy.deepcopy(EMPTY)) as data:
            existing = _by_key(data, request.key)
            if existing is not None:
                return self._filed(request, existing, "existing")
            record = self._record(request, f"LT{data['next_id']:05d}", now)
            data["next_id"] += 1
            data["tickets"].append(record)
        return self._filed(request, record, "filed")

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        record = _by_key(read_json(self.path, EMPTY), request.key)
        return self._filed(request, record, "recovered") if record else None

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        t = self._get(read_json(self.path, EMPTY), ticket_id)
        return TicketStatus(id=t["id"], provider=self.name, vendor=t["vendor"], readable=True, status=t["status"],
                            first_response_at=t["first_response_at"], assignee=t["assignee"], group=t["group"],
                            category_value=t["category"], category=category_name(self.vendor_cfg, t["category"]))

    def respond(self, ticket_id: str, *, assignee: str, status: str = "open", category: str | None = None,
                at: float | None = None) -> TicketStatus:
        """Play the vendor: first response (kept from the first call), assignee, status, re-routing."""
        with updating(self.path, copy.deepcopy(EMPTY)) as data:
            t = self._get(data, ticket_id)
            if t["first_response_at"] is None:
                t["first_response_at"] = self.clock.now() if at is None else at
            t["assignee"] = assignee
            t["status"] = status
            if category is not None:
                t["category"] = self.vendor_cfg.categories.get(category, category)
        return self.status(ticket_id)

    def add_note(self, ticket_id: str, text: str) -> None:
        """A note on a ticket filed already (what a later cause of the same incident adds)."""
        now = self.clock.now()
        with updating(self.path, copy.deepcopy(EMPTY)) as data:
            t = self._get(data, ticket_id)
            t.setdefault("notes", []).append({"at": now, "text": text[:4000]})

    def tickets(self) -> list[dict]:
        return read_json(self.path, EMPTY)["tickets"]

    def plan(self, request: TicketRequest) -> list[dict]:
        record = self._record(request, "(assigned when filed)", self.clock.now())
        record["created_at"] = format_rfc3339(record["created_at"])
        return [{"ledger": str(self.path), "action": "file", "ticket": record}]

    def _get(self, data: dict, ticket_id: str) -> dict:
        for t in data["tickets"]:
            if ticket_id in (t["id"], t["key"]):
                return t
        raise NoDataError(f"local ticket ledger: no ticket {ticket_id!r} in {self.path}",
                          hint="`opsctl ticket list` shows the tickets opsctl filed")

    def _filed(self, request: TicketRequest, t: dict, outcome: str) -> FiledTicket:
        return FiledTicket(id=t["id"], provider=self.name, vendor=t["vendor"], key=t["key"], filed_at=t["created_at"],
                           category=t["opsctl_category"], severity=t["opsctl_severity"], subject=t["subject"],
                           drill=t["drill"], url=None, status=t["status"], outcome=outcome)


def _by_key(data: dict, key: str) -> dict | None:
    return next((t for t in data["tickets"] if t["key"] == key), None)
