"""The incident as a typed record (`Incident`) and its parts, read from and written to one state
document per incident.

Frozen: a change is a new record (`Incident.changed`). Versioned (`version`): 2 adds `responses`
(what each policy does about its target in this incident: docs/decisions/0215-responses-on-the-incident.md);
a version 1 document reads as one with no responses. Keys a newer writer added are kept in `extra`
and written back as read. A stored document that does not
read as the model is refused with one line naming it (`MalformedIncident`, exit 3), never acted on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from opsctl.errors import ConfigError, NoDataError
from opsctl.model import Model, build, field, to_dict

STATES = ("open", "mitigated", "restoring", "resolved", "closed")
MOVE_KINDS = ("failover", "top-up", "degrade", "restore-canary", "restore-step", "restore")
RESPONSE_STATES = ("open", "restore_pending", "closed")
VERSION = 2


class MalformedIncident(NoDataError):
    """A stored incident document that does not read as `Incident` (exit 3)."""


class IncidentAlert(Model):
    """One alert of the incident, as its latest notification said."""

    fingerprint: str
    alertname: str
    starts_at: str
    status: str = "firing"  # firing | resolved
    slo: str = ""
    backend: str = ""
    severity: str = ""
    cause: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.fingerprint, self.starts_at)


class IncidentPage(Model):
    """The one PagerDuty incident of this incident: its dedup key, what it says now."""

    dedup_key: str
    severity: str = ""
    title: str = ""
    sent_at: float | None = None
    updated_at: float | None = None
    failed_sent: bool = False  # the one "FAILED; act now" page went out: later failures only add notes
    notes: int = 0
    # PagerDuty's webhooks v3 about this page (docs/decisions/0216-deliveries-not-persisted.md): who
    # acknowledged it and when, and the signed ids of the last events taken in (a replay writes nothing).
    acknowledged_by: str = ""
    acknowledged_at: float | None = None
    events: tuple[str, ...] = ()


class IncidentTicket(Model):
    """The one ticket filed with one vendor for this incident."""

    vendor: str  # the backend the ticket is about (one ticket per vendor backend)
    category: str
    id: str = ""
    causes: tuple[str, ...] = ()  # the causes the ticket speaks of, first one at filing
    filed_at: float | None = None


class IncidentMove(Model):
    """One traffic move the incident made."""

    kind: str  # MOVE_KINDS
    backend: str
    op_id: str
    status: str
    at: float
    detail: str = ""
    # Guards an emergency move overrode, as the audit records them (e.g. the budget guard's no data
    # on the receiving side, for a failover away from a paging backend).
    overrides: tuple[str, ...] = ()


class IncidentIntent(Model):
    """An action written before it is taken (idempotency key), and how it ended."""

    key: str
    action: str
    at: float
    status: str = "intended"  # intended | applied | noop | dry_run | skipped | refused | failed


class IncidentTakeover(Model):
    """On-call took the incident over: the automation stops acting and only adds notes."""

    by: str
    at: float
    reason: str = ""


class ResponseAlert(Model):
    """One alert a policy acts on, as its response last saw it: a late or replayed copy of an
    earlier firing (an older startsAt, or a firing copy after the resolve) changes nothing."""

    fingerprint: str
    starts_at: str  # canonical RFC 3339 (sorts as text)
    status: str = "firing"  # firing | resolved


class IncidentResponse(Model):
    """What one policy does about one target (the backend it fails over from) in this incident:
    the record the per-policy episode was (docs/decisions/0215-responses-on-the-incident.md).

    It opens with the first matching alert that fires, holds whether it moved traffic (`failover`,
    "started" written before the failover is tried, so a successor knows it may have moved; `owned`,
    `saved`: the split before and after), the ticket it decided, and once every matching alert
    resolved waits out the hold-down (`restore_due`) before the restore; closed when the traffic is
    back or there was nothing to return. At most one open response per policy and target."""

    policy: str
    target: str
    key: str  # from the opening alert (episode_key): operation ids and ticket keys derive from it
    opened_at: float
    state: str = "open"  # RESPONSE_STATES
    alerts: tuple[ResponseAlert, ...] = ()
    failover: str | None = None  # the failover's outcome ("started" while under way); None before one
    owned: bool = False  # this automation moved the traffic (so it may restore it)
    saved: dict[str, Any] = field(default_factory=dict)  # what the failover returned (split before/after)
    ticket: str | None = None  # the ticket's id, or the outcome that settled it ("skipped")
    restore_due: float | None = None
    restore_refusals: int = 0  # unsuccessful tries of the current restore step
    closed_at: float | None = None
    closed_because: str | None = None

    def changed(self, **fields: Any) -> "IncidentResponse":
        return dataclasses.replace(self, **fields)

    @property
    def is_open(self) -> bool:
        return self.state != "closed"

    @property
    def traffic_moved(self) -> bool:
        return self.failover in ("applied", "dry_run") and self.owned

    @property
    def failover_unrecorded(self) -> bool:
        """Its failover was started but its outcome never written (the replica was fenced or died
        between the split write and the incident write): the traffic may have moved."""
        return self.failover == "started"

    @property
    def may_have_moved_traffic(self) -> bool:
        return self.traffic_moved or self.failover_unrecorded

    def firing(self) -> tuple[ResponseAlert, ...]:
        return tuple(a for a in self.alerts if a.status == "firing")

    def seen(self, fingerprint: str, starts_at: str, status: str) -> tuple["IncidentResponse", bool]:
        """This response with the alert's state taken in, and whether the copy was late (stale)."""
        known = next((a for a in self.alerts if a.fingerprint == fingerprint), None)
        if known is not None and known.starts_at == starts_at and known.status == status:
            return self, False  # a copy of what it holds: nothing to change
        if known is not None and (known.starts_at > starts_at
                                  or (known.starts_at == starts_at and known.status == "resolved")):
            return self, True
        alert = ResponseAlert(fingerprint=fingerprint, starts_at=starts_at, status=status)
        return self.changed(alerts=tuple(a for a in self.alerts if a.fingerprint != fingerprint) + (alert,)), False


class Incident(Model):
    """One outage of one service: its alerts, causes, page, tickets and traffic moves."""

    id: str
    service: str
    opened_at: float
    last_alert_at: float
    state: str = "open"
    backends: tuple[str, ...] = ()
    closed_at: float | None = None
    term: str | None = None  # the fencing term of its last writer
    alerts: tuple[IncidentAlert, ...] = ()
    causes: tuple[str, ...] = ()  # first seen first
    page: IncidentPage | None = None
    tickets: tuple[IncidentTicket, ...] = ()
    moves: tuple[IncidentMove, ...] = ()
    intents: tuple[IncidentIntent, ...] = ()
    takeover: IncidentTakeover | None = None
    retry: dict[str, float] = field(default_factory=dict)  # action -> next attempt (no attempt counter)
    # The canary restores' progress, by response key (each traffic/canary.RestoreProgress's data), so
    # a restarted serve or a new leader resumes a canary from the record, not from memory.
    restore: dict[str, Any] | None = None
    responses: tuple[IncidentResponse, ...] = ()  # per policy and target (version 2)
    version: int = VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def changed(self, **fields: Any) -> "Incident":
        return dataclasses.replace(self, **fields)

    @property
    def is_open(self) -> bool:
        return self.state != "closed"

    def firing(self) -> tuple[IncidentAlert, ...]:
        return tuple(a for a in self.alerts if a.status == "firing")

    def alert(self, fingerprint: str, starts_at: str) -> IncidentAlert | None:
        return next((a for a in self.alerts if a.key == (fingerprint, starts_at)), None)

    def ticket(self, vendor: str) -> IncidentTicket | None:
        return next((t for t in self.tickets if t.vendor == vendor), None)

    def intent(self, key: str) -> IncidentIntent | None:
        return next((i for i in self.intents if i.key == key), None)

    def with_alert(self, alert: IncidentAlert, at: float) -> "Incident":
        """The alert taken in (or its status updated): its backend and cause joined, in order."""
        known = self.alert(alert.fingerprint, alert.starts_at)
        if known == alert:
            return self  # a resend of what it holds changes nothing (its window counts from the first)
        alerts = tuple(a for a in self.alerts if a.key != alert.key) + (alert,)
        backends = self.backends + ((alert.backend,) if alert.backend and alert.backend not in self.backends else ())
        causes = self.causes + ((alert.cause,) if alert.cause and alert.cause not in self.causes else ())
        last = at if alert.status == "firing" else self.last_alert_at
        return self.changed(alerts=alerts, backends=backends, causes=causes, last_alert_at=last)

    def with_intent(self, intent: IncidentIntent) -> "Incident":
        return self.changed(intents=tuple(i for i in self.intents if i.key != intent.key) + (intent,))

    def with_ticket(self, ticket: IncidentTicket) -> "Incident":
        return self.changed(tickets=tuple(t for t in self.tickets if t.vendor != ticket.vendor) + (ticket,))

    def with_move(self, move: IncidentMove) -> "Incident":
        return self.changed(moves=self.moves + (move,))

    def response(self, policy: str, target: str) -> IncidentResponse | None:
        """The open response of `policy` about `target`, if any."""
        return next((r for r in self.responses if r.policy == policy and r.target == target and r.is_open), None)

    def response_by_key(self, key: str) -> IncidentResponse | None:
        return next((r for r in reversed(self.responses) if r.key == key), None)

    def with_response(self, response: IncidentResponse) -> "Incident":
        """`response` stored in place of the one with its key (or added)."""
        if any(r.key == response.key for r in self.responses):
            responses = tuple(response if r.key == response.key else r for r in self.responses)
        else:
            responses = self.responses + (response,)
        return self.changed(responses=responses, version=max(self.version, VERSION))

    def open_responses(self) -> tuple[IncidentResponse, ...]:
        return tuple(r for r in self.responses if r.is_open)

    def moved(self) -> bool:
        """Whether it moved traffic that is not returned yet: an applied failover, top-up or
        degradation since the last restore that ended (applied, nothing to do, or left to a human),
        or a response whose failover may have moved it and is not closed yet."""
        if any(r.is_open and r.may_have_moved_traffic for r in self.responses):
            return True
        moved = False
        for m in self.moves:
            if m.kind in ("failover", "top-up", "degrade") and m.status == "applied":
                moved = True
            elif m.kind == "restore" and m.status in ("applied", "noop", "skipped"):
                moved = False
        return moved

    # -- stored form -------------------------------------------------------------------------

    def to_data(self) -> dict[str, Any]:
        data = to_dict(self)
        extra = data.pop("extra", {}) or {}
        return {**extra, **data}

    @classmethod
    def from_data(cls, data: dict[str, Any], where: str) -> "Incident":
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        extra = {k: v for k, v in data.items() if k not in known}

        try:
            return build(cls, {**{k: v for k, v in data.items() if k in known}, "extra": extra}, where)
        except ConfigError as exc:
            problem = str(exc).splitlines()[-1].strip(" -")
            raise MalformedIncident(f"{where}: not an incident record ({problem})",
                                    hint="repair or delete it; the automation does not act on it meanwhile") from exc


__all__ = ["MOVE_KINDS", "RESPONSE_STATES", "STATES", "VERSION", "Incident", "IncidentAlert", "IncidentIntent",
           "IncidentMove", "IncidentPage", "IncidentResponse", "IncidentTakeover", "IncidentTicket", "MalformedIncident",
           "ResponseAlert"]
