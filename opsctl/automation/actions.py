"""What a policy can do, behind one small interface: the Executor protocol.

The policy engine decides; an Executor acts. `executors.py` wires the real one to the traffic
controller, the pager and the vendor ticket provider; `DryRunExecutor` decides the same way and
changes nothing (global and per-policy dry run).

Every call returns an Outcome rather than raising for expected refusals: `refused` is a guard
saying no (freeze, capacity, budget, rate limit), `noop` is "already so" (traffic already away from
the backend), `skipped` is "does not apply" (an internal backend has no vendor to file a ticket
with). Unexpected errors raise and the engine records them as `failed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

if TYPE_CHECKING:
    from opsctl.traffic.canary import RestoreProgress

STATUSES = ("applied", "noop", "refused", "skipped", "failed", "dry_run")


@dataclass(frozen=True)
class Outcome:
    status: str  # one of STATUSES
    detail: str = ""
    # What the action produced, for the next actions and the record: incident, dedup_key, ticket, split.
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown outcome status {self.status!r}")

    @property
    def changed(self) -> bool:
        return self.status == "applied"

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "detail": self.detail, **({"data": dict(self.data)} if self.data else {})}


@dataclass(frozen=True)
class Context:
    """Why the automation acts: the policy and the alert behind it, for audit and notes."""

    policy: str
    alertname: str
    labels: Mapping[str, str]
    summary: str  # one line: what fired, on what
    event_key: str  # the idempotency key of the delivery that caused this
    generator_url: str = ""


@dataclass(frozen=True)
class FailoverRequest:
    context: Context
    backend: str  # move all user traffic away from this backend
    emergency_in_freeze: bool  # during a freeze, make it an emergency tied to `incident`
    incident: str | None  # the incident the policy opened (page), if any
    # A replica taking over a response whose failover was started by one that died: an unchanged
    # split may be that failover's own work (the executor then reports it as applied).
    resumed: bool = False
    # Chosen before the write (from the incident's response): a retry after a lost answer finds its own change.
    operation_id: str = ""
    # The leader's term, read before every write attempt (None from it: no longer leading, fenced).
    term: Callable[[], Any] | None = None
    episode: str = ""  # the incident response's key (the per-policy episode's before 0215): its operation id names it
    # The alert behind it pages (severity=page): when the receiving side has no data to judge its
    # budget by, the move away is taken as the emergency it is, recorded with the override (issue 36 item 6).
    paging: bool = False


@dataclass(frozen=True)
class RestoreRequest:
    context: Context
    backend: str  # the backend the automation failed over from, to get its traffic back
    incident: str | None
    saved: Mapping[str, Any] = field(default_factory=dict)  # the failover's Outcome.data (split before/after)
    operation_id: str = ""  # chosen before the write (from the response): a retry finds its own change
    # A failover whose result was never recorded (its worker was fenced or died between the split
    # write and the incident write): the operation ids it was written under. The restore adopts the
    # failover from the change record by them, or finds nothing to restore when none was applied.
    failover_operations: tuple[str, ...] = ()
    term: Callable[[], Any] | None = None  # the leader's term, read before every write attempt
    hold_down: float = 0.0  # the policy's hold-down, the unit of the re-failover backoff
    # automation.restore set: one look at the canary restore from this progress (None: the first
    # look, or a progress not kept); the outcome's data["restore"] is the progress to keep.
    canary: bool = False
    progress: "RestoreProgress | None" = None
    episode: str = ""  # the incident response's key (see FailoverRequest.episode)


def operation_id(action: str, incident: str | None, backend: str, episode: str = "") -> str:
    """The id a failover or restore is written under, the same on every attempt and replica. One
    incident may fail a backend over more than once (a response each): the response's key is part
    of it unless the incident's key already ends with it (the per-episode keys before incidents)."""
    import hashlib

    basis = incident or ""
    if episode and not basis.endswith(episode):
        basis = f"{basis}/{episode}"
    digest = hashlib.sha256(f"{basis}|{backend}".encode()).hexdigest()[:16]
    return f"{action}-{digest}"


@dataclass(frozen=True)
class PageRequest:
    context: Context
    summary: str
    severity: str
    dedup_key: str  # stable per policy and target: repeated alerts fold into one incident
    details: Mapping[str, Any] = field(default_factory=dict)
    title: str | None = None  # what the incident is now (paging/title.py), set on the open incident


@dataclass(frozen=True)
class TicketRequest:
    context: Context
    backend: str
    category: str
    severity: str  # Sev1..Sev4
    summary: str
    description: str
    incident: str | None
    idempotency_key: str  # stable per episode: a retried filing is the same ticket


@dataclass(frozen=True)
class TicketNoteRequest:
    """A note on a ticket already filed (a later cause of the same incident, never a second ticket)."""

    context: Context
    backend: str
    ticket: str  # the ticket's id as filed
    text: str
    idempotency_key: str  # the ticket's own key


@dataclass(frozen=True)
class NoteRequest:
    context: Context
    incident: str  # the incident's dedup key or id, as returned by page()
    text: str


class Executor(Protocol):
    name: str  # "live" or "dry-run"

    def failover(self, request: FailoverRequest) -> Outcome: ...

    def restore(self, request: RestoreRequest) -> Outcome: ...

    def page(self, request: PageRequest) -> Outcome:
        """Open (or fold into) an incident; Outcome.data carries `incident` (dedup key or id)."""
        ...

    def file_ticket(self, request: TicketRequest) -> Outcome: ...

    def note(self, request: NoteRequest) -> Outcome: ...

    def ticket_note(self, request: TicketNoteRequest) -> Outcome: ...


class DryRunExecutor:
    """Changes nothing: says what the live executor would be asked to do."""

    name = "dry-run"

    def failover(self, request: FailoverRequest) -> Outcome:
        how = " (emergency during a freeze)" if request.emergency_in_freeze else ""
        return Outcome("dry_run", f"would fail over all traffic away from {request.backend}{how}")

    def restore(self, request: RestoreRequest) -> Outcome:
        return Outcome("dry_run", f"would restore traffic to {request.backend}")

    def page(self, request: PageRequest) -> Outcome:
        return Outcome("dry_run", f"would page ({request.severity}): {request.summary}",
                       {"incident": request.dedup_key})

    def file_ticket(self, request: TicketRequest) -> Outcome:
        return Outcome("dry_run", f"would file a {request.severity} {request.category} ticket about {request.backend}")

    def note(self, request: NoteRequest) -> Outcome:
        return Outcome("dry_run", f"would add a note to {request.incident}: {request.text[:120]}")

    def ticket_note(self, request: TicketNoteRequest) -> Outcome:
        return Outcome("dry_run", f"would add a note to ticket {request.ticket}: {request.text[:120]}")
