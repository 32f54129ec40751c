"""Any ticket channel, made safe to retry: bounded retries, and never a second ticket.

    claim the key ── already filed ──────────────> return that ticket (outcome: existing)
        │ interrupted earlier, or a key of the caller's own (not derived from the content) on a
        │ channel that can look tickets up ──> ask the channel (find) ── found ──> record it (recovered)
        v                                          └ can't ask: resend only if the channel drops
    send, retrying 429/5xx/network under the policy                    repeats, or with --resend
        │ a failure after which the ticket may exist (5xx, timeout) -> find before sending again
        v
    record the ticket (outcome: filed)

A failure that surely filed nothing (401, 400, 429 to the end) forgets the claim; one that may
have filed something keeps it, so the next run checks before sending.
"""

from __future__ import annotations

from dataclasses import replace

from opsctl.errors import ConflictError, OpsctlError
from opsctl.remote import RemoteUnavailable
from opsctl.retry import RetryPolicy, call_with_retry
from opsctl.tickets.base import FiledTicket, TicketRequest, TicketStatus
from opsctl.tickets.records import TicketRecords


class TicketDesk:
    def __init__(self, channel, records: TicketRecords, policy: RetryPolicy, *, window: float, clock,
                 resend: bool = False, on_retry=None):
        self.channel = channel
        self.records = records
        self.policy = policy
        self.window = window
        self.clock = clock
        self.resend = resend
        self.on_retry = on_retry
        self.name = channel.name
        self.vendor = channel.vendor
        self.can_find = channel.can_find
        self.resend_is_safe = channel.resend_is_safe

    # -- filing -------------------------------------------------------------------------------

    def file(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket:
        key = request.key
        claim = self.records.claim(request, self.name, now=self.clock.now(),
                                   window=self.window if request.key_is_derived else None,
                                   stale_after=self.policy.deadline + 60)
        if claim.state == "filed" and claim.record is not None:
            return _from_record(claim.record, request)
        if claim.wire_key != key:
            request = replace(request, idempotency_key=claim.wire_key)
        interrupted = claim.state == "interrupted"
        # A key of the caller's own (the automation's, from the alert) is looked up at the vendor's desk
        # before creating: a record lost with a pod, or filed by another replica, never makes a second ticket.
        lookup = interrupted or (self.channel.can_find and not request.key_is_derived)
        state = {"maybe_sent": False}
        try:
            filed = self._reconcile(request) if lookup else None
            if filed is None:
                filed = self._send(request, state)
        except BaseException as exc:
            if interrupted or state["maybe_sent"] or not isinstance(exc, OpsctlError):
                self.records.release(key)
            else:
                self.records.abandon(key)
            raise
        self.records.complete(key, filed)
        return filed

    def _reconcile(self, request: TicketRequest) -> FiledTicket | None:
        """An earlier run was interrupted after claiming the key: was the ticket filed?"""
        if self.channel.can_find:
            return call_with_retry(lambda t: self.channel.find(request, timeout=t), self.policy,
                                   f"{self.name}: look up ticket {request.key}", on_retry=self.on_retry)
        if self.channel.resend_is_safe or self.resend:
            return None
        raise ConflictError(
            f"an earlier run filing this ticket (key {request.key}) was interrupted, and {self.name} cannot tell "
            "whether it went out",
            hint="check the vendor's inbox or portal; to send it again, re-run the same command with --resend",
        )

    def _send(self, request: TicketRequest, state: dict) -> FiledTicket:
        def attempt(timeout: float) -> FiledTicket:
            if state["maybe_sent"] and self.channel.can_find:
                found = self.channel.find(request, timeout=timeout)
                if found is not None:
                    return found
            try:
                return self.channel.file(request, timeout=timeout)
            except RemoteUnavailable as exc:
                if exc.maybe_sent:
                    state["maybe_sent"] = True
                    if not (self.channel.can_find or self.channel.resend_is_safe or self.resend):
                        raise OpsctlError(
                            f"{exc.message}; the ticket may have gone out, so it is not sent again",
                            hint="check the vendor's inbox or portal; re-run with --resend to send it again",
                        ) from exc
                raise

        return call_with_retry(attempt, self.policy, f"{self.name} ticket for {request.vendor}",
                               on_retry=self.on_retry)

    # -- reading ------------------------------------------------------------------------------

    def status(self, ticket_id: str, *, timeout: float | None = None) -> TicketStatus:
        status = call_with_retry(lambda t: self.channel.status(ticket_id, timeout=t), self.policy,
                                 f"{self.name}: read ticket {ticket_id}", on_retry=self.on_retry)
        rec = self.records.get(ticket_id)
        if rec is not None:
            self.records.note_status(rec["key"], status)
        return status

    def find(self, request: TicketRequest, *, timeout: float | None = None) -> FiledTicket | None:
        if not self.channel.can_find:
            return None
        return call_with_retry(lambda t: self.channel.find(request, timeout=t), self.policy,
                               f"{self.name}: look up ticket {request.key}", on_retry=self.on_retry)

    def plan(self, request: TicketRequest) -> list[dict]:
        return self.channel.plan(request)

    @property
    def takes_notes(self) -> bool:
        """Whether the channel can add a note to a ticket it filed (`add_note`)."""
        return bool(getattr(self.channel, "takes_notes", False))

    def add_note(self, ticket_id: str, text: str) -> None:
        """A note on a ticket filed already, retried as a filing is (a note repeated is harmless)."""
        call_with_retry(lambda t: self.channel.add_note(ticket_id, text), self.policy,
                        f"{self.name}: add a note to ticket {ticket_id}", on_retry=self.on_retry)


def _from_record(rec: dict, request: TicketRequest) -> FiledTicket:
    return FiledTicket(id=rec["ticket_id"], provider=rec["provider"], vendor=rec["vendor"],
                       key=rec.get("wire_key", rec["key"]),
                       filed_at=rec["filed_at"], category=rec["category"], severity=rec["severity"],
                       subject=rec.get("subject") or request.title, drill=rec.get("drill", False),
                       url=rec.get("url"), status=rec.get("last_status"), outcome="existing")
