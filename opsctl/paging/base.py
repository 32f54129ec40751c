"""The Pager interface and the data it speaks: events, results, incidents with their timelines.

One Protocol, one file per implementation (`pagerduty.py`, `local.py`), chosen by name in
`registry.py`. Dedup keys are stable: the same page (or a retried command) carries the same key,
so the pager folds it into the open incident instead of opening a second one. Drills get their
own keys, so a drill page never merges into a real incident.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol

from opsctl.clock import format_rfc3339

PAGE_SEVERITIES = ("critical", "error", "warning", "info")  # PagerDuty's Events API v2 values
DRILL_PREFIX = "[DRILL] "
DRILL_TAG = "drill"


@dataclass(frozen=True)
class Link:
    href: str
    text: str = ""

    def to_dict(self) -> dict:
        return {"href": self.href, "text": self.text or self.href}


@dataclass(frozen=True)
class PageEvent:
    """A page to on-call. `dedup_key` None: derived from service, source, component and summary."""

    summary: str
    source: str
    severity: str = "critical"
    dedup_key: str | None = None
    component: str | None = None
    group: str | None = None
    custom_details: Mapping[str, Any] = field(default_factory=dict)
    links: tuple[Link, ...] = ()
    drill: bool = False
    # What the incident is now (paging/title.py): set on the open incident when it differs, since a
    # deduplicated trigger leaves its title (and urgency) as the first alert's. None: the summary.
    title: str | None = None

    def __post_init__(self):
        if self.severity not in PAGE_SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(PAGE_SEVERITIES)} (got {self.severity!r})")
        if not self.summary.strip():
            raise ValueError("summary must not be empty")
        if self.dedup_key is not None and not 0 < len(self.dedup_key) <= 255:
            raise ValueError("dedup_key must be 1 to 255 characters")


@dataclass(frozen=True)
class ChangeEvent:
    """A change worth seeing next to incidents: every traffic change sends one."""

    summary: str
    source: str
    timestamp: float
    custom_details: Mapping[str, Any] = field(default_factory=dict)
    links: tuple[Link, ...] = ()
    drill: bool = False


def dedup_key_for(service: str, event: PageEvent) -> str:
    """Stable dedup key: same page, same key; a drill never shares a key with a real page."""
    parts = [service, event.source, event.component or "", event.summary.strip(), "drill" if event.drill else "real"]
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]
    return f"opsctl-{'drill-' if event.drill else ''}{service}-{digest}"


def prepared(service: str, event: PageEvent) -> PageEvent:
    """The event as sent: dedup key filled in, and drills marked in the title and the details."""
    details = dict(event.custom_details)
    summary, title = event.summary, event.title
    if event.drill:
        if not summary.startswith(DRILL_PREFIX):
            summary = DRILL_PREFIX + summary
        if title is not None and not title.startswith(DRILL_PREFIX):
            title = DRILL_PREFIX + title
        details["drill"] = True
        details.setdefault("tags", [DRILL_TAG])
    details.setdefault("sent_by", "opsctl")
    return replace(event, summary=summary, title=title, custom_details=details,
                   dedup_key=event.dedup_key or dedup_key_for(service, event))


def prepared_change(change: ChangeEvent) -> ChangeEvent:
    details = dict(change.custom_details)
    summary = change.summary
    if change.drill:
        if not summary.startswith(DRILL_PREFIX):
            summary = DRILL_PREFIX + summary
        details["drill"] = True
        details.setdefault("tags", [DRILL_TAG])
    details.setdefault("sent_by", "opsctl")
    return replace(change, summary=summary, custom_details=details)


@dataclass(frozen=True)
class PageResult:
    action: str  # trigger | acknowledge | resolve | change | maintenance-create | maintenance-delete
    provider: str
    at: float
    dedup_key: str | None = None
    incident_id: str | None = None
    summary: str | None = None
    drill: bool = False
    dry_run: bool = False
    # --dry-run: the exact requests that would be sent, secrets redacted.
    requests: tuple[dict, ...] = ()
    detail: str | None = None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "action": self.action,
            "provider": self.provider,
            "dedup_key": self.dedup_key,
            "incident_id": self.incident_id,
            "summary": self.summary,
            "drill": self.drill,
            "at": format_rfc3339(self.at),
            "dry_run": self.dry_run,
        }
        if self.detail:
            out["detail"] = self.detail
        if self.dry_run:
            out["requests"] = list(self.requests)
        return out


@dataclass(frozen=True)
class LogEntry:
    """One incident log entry, normalised: type is trigger|notify|assign|acknowledge|escalate|resolve|..."""

    type: str
    at: float
    agent: str | None = None  # who acted (acknowledge, resolve) or was reached (notify, assign)
    summary: str = ""


@dataclass(frozen=True)
class Responder:
    name: str
    first_notified_at: float | None
    acknowledged_at: float | None


@dataclass(frozen=True)
class Incident:
    id: str
    dedup_key: str | None
    title: str
    status: str  # triggered | acknowledged | resolved
    created_at: float
    provider: str
    url: str | None = None
    log: tuple[LogEntry, ...] = ()

    @property
    def acknowledged_at(self) -> float | None:
        return _first(self.log, "acknowledge")

    @property
    def resolved_at(self) -> float | None:
        return _first(self.log, "resolve")

    @property
    def escalated_at(self) -> tuple[float, ...]:
        return tuple(sorted(e.at for e in self.log if e.type == "escalate"))

    @property
    def responders(self) -> tuple[Responder, ...]:
        """Everyone reached (notified or assigned), with when they were first reached and when they acked."""
        names: list[str] = []
        for e in sorted(self.log, key=lambda e: e.at):
            if e.type in ("notify", "assign", "acknowledge") and e.agent and e.agent not in names:
                names.append(e.agent)
        out = []
        for name in names:
            reached = [e.at for e in self.log if e.agent == name and e.type in ("notify", "assign")]
            acked = [e.at for e in self.log if e.agent == name and e.type == "acknowledge"]
            out.append(Responder(name, min(reached) if reached else None, min(acked) if acked else None))
        return tuple(out)

    def to_dict(self) -> dict:
        ack, res = self.acknowledged_at, self.resolved_at
        return {
            "id": self.id,
            "provider": self.provider,
            "dedup_key": self.dedup_key,
            "title": self.title,
            "status": self.status,
            "url": self.url,
            "created_at": format_rfc3339(self.created_at),
            "acknowledged_at": _fmt(ack),
            "resolved_at": _fmt(res),
            "seconds_to_acknowledge": None if ack is None else round(ack - self.created_at, 3),
            "seconds_to_resolve": None if res is None else round(res - self.created_at, 3),
            "escalations": len(self.escalated_at),
            "escalated_at": [format_rfc3339(t) for t in self.escalated_at],
            "seconds_to_first_escalation": (
                round(self.escalated_at[0] - self.created_at, 3) if self.escalated_at else None
            ),
            "responders": [
                {
                    "name": r.name,
                    "first_notified_at": _fmt(r.first_notified_at),
                    "acknowledged_at": _fmt(r.acknowledged_at),
                    "seconds_to_notify": None if r.first_notified_at is None else round(r.first_notified_at - self.created_at, 3),
                    "seconds_to_acknowledge": None if r.acknowledged_at is None else round(r.acknowledged_at - self.created_at, 3),
                }
                for r in self.responders
            ],
            "log": [{"type": e.type, "at": format_rfc3339(e.at), "agent": e.agent, "summary": e.summary} for e in self.log],
        }


@dataclass(frozen=True)
class OnCall:
    user: str
    escalation_level: int
    schedule: str | None = None
    start: str | None = None
    end: str | None = None  # None: on call indefinitely (no schedule)

    def to_dict(self) -> dict:
        return {"user": self.user, "escalation_level": self.escalation_level, "schedule": self.schedule,
                "start": self.start, "end": self.end}


@dataclass(frozen=True)
class MaintenanceWindow:
    id: str
    start: float
    end: float
    description: str
    services: tuple[str, ...]
    provider: str
    dry_run: bool = False
    requests: tuple[dict, ...] = ()

    def to_dict(self) -> dict:
        out = {"id": self.id, "provider": self.provider, "start": format_rfc3339(self.start),
               "end": format_rfc3339(self.end), "description": self.description, "services": list(self.services),
               "dry_run": self.dry_run}
        if self.dry_run:
            out["requests"] = list(self.requests)
        return out


class Pager(Protocol):
    name: str

    def trigger(self, event: PageEvent) -> PageResult: ...

    def acknowledge(self, dedup_key: str) -> PageResult: ...

    def resolve(self, dedup_key: str) -> PageResult: ...

    def change_event(self, change: ChangeEvent) -> PageResult: ...

    def get_incident(self, key: str) -> Incident:
        """By dedup key (the most recent incident with it) or by incident id."""
        ...

    def oncall(self) -> list[OnCall]: ...

    def create_maintenance_window(self, start: float, end: float, description: str) -> MaintenanceWindow: ...

    def delete_maintenance_window(self, window_id: str) -> PageResult: ...


def _first(log: tuple[LogEntry, ...], kind: str) -> float | None:
    times = [e.at for e in log if e.type == kind]
    return min(times) if times else None


def _fmt(ts: float | None) -> str | None:
    return None if ts is None else format_rfc3339(ts)
