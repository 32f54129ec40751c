"""The no-op for `--dry-run`: files nothing, shows the exact request the channel would send.

Ticket requests are built by opsctl's own channel code, so the dry run calls the same builder
(`plan`) that `file` sends, with credentials replaced by a note saying where they live. Secrets
are not even read.
"""

from __future__ import annotations

from opsctl.tickets.base import FiledTicket, TicketRequest, TicketStatus

DRY_RUN_ID = "(dry-run)"


class DryRunTicketProvider:
    def __init__(self, inner, clock, records=None, window: float | None = None):
        self.inner = inner
        self.clock = clock
        self.records = records
        self.window = window
        self.name = inner.name
        self.vendor = inner.vendor
        self.can_find = False
        self.resend_is_safe = True

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        rec = self.records.get(request.key) if self.records is not None else None
        if rec and rec.get("state") == "filed" and (
                not request.key_is_derived or self.window is None or self.clock.now() - rec["filed_at"] <= self.window):
            # The real run would return this ticket and send nothing.
            return FiledTicket(id=rec["ticket_id"], provider=self.name, vendor=self.vendor, key=request.key,
                               filed_at=rec["filed_at"], category=request.category, severity=request.severity,
                               subject=rec.get("subject") or request.title, drill=request.drill, url=rec.get("url"),
                               status="already filed: nothing would be sent", outcome="dry-run")
        return FiledTicket(id=DRY_RUN_ID, provider=self.name, vendor=self.vendor, key=request.key,
                           filed_at=self.clock.now(), category=request.category, severity=request.severity,
                           subject=request.title, drill=request.drill, outcome="dry-run",
                           requests=tuple(self.inner.plan(request)))

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        return None

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        return self.inner.status(ticket_id, timeout=timeout)

    def plan(self, request: TicketRequest) -> list[dict]:
        return self.inner.plan(request)
