"""A local pager: a JSON ledger in the state dir with PagerDuty's semantics, for the embedded environment.

Triggering a dedup key whose incident is still open adds to that incident instead of opening a
second one; after it is resolved the same key opens a new incident. Level 1 on-call is "notified"
at trigger time so responder times can be measured in drills. Times come from the injected clock
(drills on the embedded environment run in simulated time). Writes are atomic and locked; the
ledger is written compact (one line, keys sorted): JSON's C encoder, where an indented file took the
pure-Python one, about 3x as long, on every page event of a growing ledger (issue 22).
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any, Iterator

from opsctl.clock import WallClock, format_rfc3339
from opsctl.errors import NoDataError, UsageError
from opsctl.paging.base import (
    ChangeEvent,
    Incident,
    LogEntry,
    MaintenanceWindow,
    OnCall,
    PageEvent,
    PageResult,
    prepared,
    prepared_change,
)
from opsctl.statefile import locked, read_json, write_text_atomic

EMPTY = {"version": 1, "next_id": 1, "incidents": [], "changes": [], "maintenance_windows": []}


class LocalPager:
    name = "local"

    def __init__(self, path: Path, *, service: str, oncall: tuple[str, ...], clock=None, dry_run: bool = False):
        self.path = Path(path)
        self.service = service
        self.oncall_users = tuple(oncall)
        self.clock = clock or WallClock()
        self.dry_run = dry_run

    # -- events -------------------------------------------------------------------------------

    def trigger(self, event: PageEvent) -> PageResult:
        event = prepared(self.service, event)
        now = self.clock.now()
        with self._ledger() as data:
            incident = _open_incident(data, event.dedup_key)
            if incident is not None:
                incident["log"].append(_entry("trigger", now, None, "event deduplicated into the open incident"))
                detail = "deduplicated into the open incident"
                if _rank(event.severity) > _rank(incident.get("severity")):  # a later alert raises it, as PagerDuty's alert does
                    incident["log"].append(_entry("severity", now, None,
                                                  f"severity raised {incident.get('severity')} -> {event.severity}"))
                    incident["severity"] = event.severity
                    detail += f"; severity raised to {event.severity}"
                if event.title and event.title != incident["title"]:  # what the incident is now (paging/title.py)
                    incident["log"].append(_entry("title", now, None, f"title changed to {event.title!r}"))
                    incident["title"] = event.title
                    detail += "; title updated"
            else:
                incident = {
                    "id": f"LP{data['next_id']:05d}",
                    "dedup_key": event.dedup_key,
                    "title": event.title or event.summary,
                    "source": event.source,
                    "severity": event.severity,
                    "component": event.component,
                    "custom_details": dict(event.custom_details),
                    "links": [link.to_dict() for link in event.links],
                    "drill": event.drill,
                    "status": "triggered",
                    "created_at": now,
                    "log": [_entry("trigger", now, None, "triggered through opsctl")],
                }
                if self.oncall_users:
                    incident["log"].append(_entry("notify", now, self.oncall_users[0], "notified level 1 on-call"))
                data["next_id"] += 1
                data["incidents"].append(incident)
                detail = "opened a new incident"
            request = {"ledger": str(self.path), "action": "trigger", "incident": copy.deepcopy(incident)}
        return self._result("trigger", now, request, dedup_key=event.dedup_key, incident_id=incident["id"],
                            summary=event.summary, drill=event.drill, detail=detail)

    def acknowledge(self, dedup_key: str, by: str | None = None) -> PageResult:
        return self._transition(dedup_key, "acknowledge", "acknowledged", by)

    def resolve(self, dedup_key: str, by: str | None = None) -> PageResult:
        return self._transition(dedup_key, "resolve", "resolved", by)

    def escalate(self, dedup_key: str) -> PageResult:
        """Move the open incident to the next on-call level (what a missed acknowledgement does)."""
        now = self.clock.now()
        with self._ledger() as data:
            incident = self._need_open(data, dedup_key)
            level = 1 + sum(1 for e in incident["log"] if e["type"] == "escalate")
            target = self.oncall_users[min(level, len(self.oncall_users) - 1)] if self.oncall_users else None
            incident["log"].append(_entry("escalate", now, target, f"escalated to level {level + 1}"))
            if target:
                incident["log"].append(_entry("notify", now, target, f"notified level {level + 1} on-call"))
            request = {"ledger": str(self.path), "action": "escalate", "dedup_key": dedup_key}
        return self._result("escalate", now, request, dedup_key=dedup_key, incident_id=incident["id"])

    def _transition(self, dedup_key: str, action: str, status: str, by: str | None) -> PageResult:
        now = self.clock.now()
        with self._ledger() as data:
            incident = self._need_open(data, dedup_key)
            agent = by or (self.oncall_users[0] if self.oncall_users else "opsctl")
            if not (action == "acknowledge" and incident["status"] == "acknowledged"):
                incident["status"] = status
            incident["log"].append(_entry(action, now, agent, f"{status} through opsctl"))
            request = {"ledger": str(self.path), "action": action, "dedup_key": dedup_key, "by": agent}
        return self._result(action, now, request, dedup_key=dedup_key, incident_id=incident["id"],
                            summary=incident["title"], drill=incident.get("drill", False))

    def change_event(self, change: ChangeEvent) -> PageResult:
        change = prepared_change(change)
        now = self.clock.now()
        record = {"summary": change.summary, "source": change.source, "timestamp": change.timestamp,
                  "custom_details": dict(change.custom_details), "links": [link.to_dict() for link in change.links],
                  "drill": change.drill, "recorded_at": now}
        with self._ledger() as data:
            data["changes"].append(record)
        return self._result("change", now, {"ledger": str(self.path), "action": "change", "change": record},
                            summary=change.summary, drill=change.drill)

    # -- reads --------------------------------------------------------------------------------

    def get_incident(self, key: str) -> Incident:
        data = read_json(self.path, EMPTY)
        matches = [i for i in data["incidents"] if key in (i["id"], i["dedup_key"])]
        if not matches:
            raise NoDataError(f"local pager: no incident with dedup key or id {key!r} in {self.path}",
                              hint="`opsctl page status` lists recent pages")
        return self._incident(max(matches, key=lambda m: m["created_at"]))

    def incidents(self) -> list[Incident]:
        return [self._incident(i) for i in read_json(self.path, EMPTY)["incidents"]]

    def open_incidents(self) -> list[Incident]:
        """Incidents not yet resolved (triggered or acknowledged), oldest first."""
        return [i for i in self.incidents() if i.status != "resolved"]

    def _incident(self, i: dict) -> Incident:
        return Incident(
            id=i["id"], dedup_key=i["dedup_key"], title=i["title"], status=i["status"], created_at=i["created_at"],
            provider=self.name, url=None,
            log=tuple(LogEntry(e["type"], e["at"], e.get("agent"), e.get("summary", "")) for e in i["log"]),
        )

    def oncall(self) -> list[OnCall]:
        return [OnCall(user=u, escalation_level=n, schedule="local") for n, u in enumerate(self.oncall_users, start=1)]

    # -- maintenance windows ------------------------------------------------------------------

    def create_maintenance_window(self, start: float, end: float, description: str) -> MaintenanceWindow:
        if end <= start:
            raise UsageError("a maintenance window must end after it starts")
        with self._ledger() as data:
            window = {"id": f"LM{len(data['maintenance_windows']) + 1:05d}", "start": start, "end": end,
                      "description": description, "services": [self.service], "deleted": False}
            data["maintenance_windows"].append(window)
        request = {"ledger": str(self.path), "action": "maintenance-create", "window": window}
        return MaintenanceWindow(id=str(window["id"]), start=start, end=end, description=description,
                                 services=(self.service,), provider=self.name, dry_run=self.dry_run,
                                 requests=(request,) if self.dry_run else ())

    def delete_maintenance_window(self, window_id: str) -> PageResult:
        now = self.clock.now()
        with self._ledger() as data:
            windows = [w for w in data["maintenance_windows"] if w["id"] == window_id and not w["deleted"]]
            if not windows:
                raise NoDataError(f"local pager: no maintenance window {window_id!r}")
            windows[0]["deleted"] = True
            windows[0]["end"] = min(windows[0]["end"], now)
        return self._result("maintenance-delete", now,
                            {"ledger": str(self.path), "action": "maintenance-delete", "id": window_id},
                            detail=f"maintenance window {window_id}")

    # -- plumbing -----------------------------------------------------------------------------

    def _ledger(self):
        """Locked read-modify-write of the ledger; a dry run works on a copy and writes nothing."""
        if self.dry_run:
            return _DryRunLedger(read_json(self.path, copy.deepcopy(EMPTY)))
        return _updating(self.path, copy.deepcopy(EMPTY))

    def _need_open(self, data: dict, dedup_key: str) -> dict:
        incident = _open_incident(data, dedup_key)
        if incident is None:
            raise NoDataError(f"local pager: no open incident with dedup key or incident id {dedup_key!r}",
                              hint="`opsctl page status` lists recent pages and their state")
        return incident

    def _result(self, action: str, at: float, request: dict, **kw) -> PageResult:
        return PageResult(action=action, provider=self.name, at=at, dry_run=self.dry_run,
                          requests=(_readable(request),) if self.dry_run else (), **kw)


@contextlib.contextmanager
def _updating(path: Path, default: Any) -> Iterator[Any]:
    """statefile.updating, written compact: lock, read, let the block change the data in place,
    write atomically. An error writes nothing."""
    with locked(path):
        data = read_json(path, default)
        yield data
        write_text_atomic(path, json.dumps(data, sort_keys=True, separators=(",", ":"), default=str) + "\n")


class _DryRunLedger:
    def __init__(self, data):
        self.data = data

    def __enter__(self):
        return self.data

    def __exit__(self, *exc):
        return False


def _open_incident(data: dict, dedup_key: str | None) -> dict | None:
    for incident in reversed(data["incidents"]):
        if incident["dedup_key"] == dedup_key and incident["status"] != "resolved":
            return incident
    return None


def _entry(kind: str, at: float, agent: str | None, summary: str) -> dict:
    return {"type": kind, "at": at, "agent": agent, "summary": summary}


def _readable(request: dict) -> dict:
    """Ledger records for --dry-run output, with times as RFC 3339."""
    def conv(v, key=""):
        if isinstance(v, dict):
            return {k: conv(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        if key in ("at", "created_at", "timestamp", "recorded_at", "start", "end") and isinstance(v, (int, float)):
            return format_rfc3339(v)
        return v

    return conv(request)


SEVERITY_RANK = ("info", "warning", "error", "critical")  # PagerDuty Events API v2 severities, lowest first


def _rank(severity: object) -> int:
    return SEVERITY_RANK.index(severity) if severity in SEVERITY_RANK else -1
