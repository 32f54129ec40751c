"""The live executor under the leader's term (`FencedExecutor`, issue 22): what `opsctl serve` and the
drills hand the policy engine, so no action happens once this replica no longer leads, and the
failover and restore carry an operation id chosen before their write (a retry after a lost answer
finds its own change).
"""

from __future__ import annotations

from typing import Callable

from opsctl.automation.actions import (
    Executor, FailoverRequest, NoteRequest, Outcome, PageRequest, RestoreRequest, TicketNoteRequest, TicketRequest,
)
from opsctl.fencing import FencedError


class FencedExecutor:
    """The live executor under the leader's term (team mode): the term is read before every action
    (not leading: FencedError, nothing happens); failover and restore carry it to the traffic
    controller (every write attempt re-reads it and is refused once a newer term is recorded) with
    an operation id chosen from the incident's response before the write; a page, ticket or note
    happens only after its intent, keyed by the action's idempotency key, was written under the
    term on the incident (`PolicyEngine.intend`: a stale leader's intent write is refused)."""

    def __init__(self, inner: Executor, term: Callable[[], object] | None = None,
                 intent: Callable[[str, str, str], None] | None = None):
        self.inner = inner
        self.name = inner.name
        self.term = term  # None: one replica, nothing to fence (operation ids still chosen before the write)
        self.intent = intent or (lambda action, key, detail: None)

    def _writer(self) -> Callable[[], object] | None:
        """What the controller reads before every write attempt (the first, and each retry after a 409)."""
        return self.term

    def _leading(self, what: str) -> None:
        if self.term is not None and self.term() is None:
            raise FencedError(f"{what}: this replica no longer leads; it does not act")

    @staticmethod
    def operation(action: str, incident: str | None, backend: str, episode: str = "") -> str:
        from opsctl.automation.actions import operation_id

        return operation_id(action, incident, backend, episode)

    def failover(self, request: FailoverRequest) -> Outcome:
        from dataclasses import replace

        self._leading("failover")
        return self.inner.failover(replace(
            request, term=self._writer(),
            operation_id=request.operation_id or self.operation("failover", request.incident, request.backend,
                                                                request.episode)))

    def restore(self, request: RestoreRequest) -> Outcome:
        from dataclasses import replace

        self._leading("restore")
        return self.inner.restore(replace(
            request, term=self._writer(),
            operation_id=request.operation_id or self.operation("restore", request.incident, request.backend,
                                                                request.episode)))

    def page(self, request: PageRequest) -> Outcome:
        self._leading("page")
        self.intent("page", request.dedup_key, request.summary)
        return self.inner.page(request)

    def file_ticket(self, request: TicketRequest) -> Outcome:
        self._leading("ticket")
        self.intent("ticket", request.idempotency_key, request.summary)
        return self.inner.file_ticket(request)

    def note(self, request: NoteRequest) -> Outcome:
        import hashlib

        self._leading("note")
        self.intent("note", hashlib.sha256(f"{request.incident}|{request.text}".encode()).hexdigest()[:24],
                    request.text)
        return self.inner.note(request)

    def ticket_note(self, request: TicketNoteRequest) -> Outcome:
        import hashlib

        self._leading("ticket note")
        self.intent("ticket_note", hashlib.sha256(f"{request.ticket}|{request.text}".encode()).hexdigest()[:24],
                    request.text)
        return self.inner.ticket_note(request)


__all__ = ["FencedExecutor"]
