"""The change record that travels with the split: written in the same write as the split itself.

Every applied change appends one entry (id, operation, action, actor, reason, incident, emergency,
overrides, before, after, time) to the record stored with the split: inside the split file for the
file actuator, in an annotation on the ConfigMap / VirtualService / HTTPRoute for the Kubernetes
ones. One write holds both, so no change is ever applied without its record, and the rate guard,
which counts from this record, sees exactly what was applied: a concurrent writer's compare-and-swap
fails, and it re-reads, re-plans and re-checks the guard against the newer record.

Fencing and time (docs/decisions/0006-leader-term-and-fencing.md, 0007-one-clock-hook.md): the record keeps `term`,
the newest leader term that wrote it (a write under an older term is refused, a person's write keeps
it), and each entry its writer's `term` and `operation`, chosen before the write, so a retry after a
lost answer finds its own change. Entry times and the rate window are the API server's time for the
Kubernetes actuators (`now_for`), so no laptop's clock decides what the window holds.

The record also holds the open failovers (incident -> the split saved before its first failover),
so `traffic restore` works from any laptop or replica. It is bounded: `state.history` entries (older
ones live on in Kubernetes Events, the JSON log line and the local audit log) and the operations of
the rate window, within the 256 KiB Kubernetes allows for all of an object's annotations.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from opsctl.errors import NoDataError
from opsctl.model import Model, field
from opsctl.traffic.change_entry import ChangeEntry, split_of

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.traffic.split import Split


class AppliedChange(Protocol):
    """What an entry is made of: the controller's ChangeResult has these (a protocol, so that the
    record, which the controller imports, does not import the controller back)."""

    @property
    def operation_id(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def incident(self) -> str | None: ...
    @property
    def emergency(self) -> bool: ...
    @property
    def overrides(self) -> Any: ...
    @property
    def before(self) -> Any: ...
    @property
    def after(self) -> Any: ...
    @property
    def shortfall(self) -> dict[str, Any]: ...
    @property
    def term(self) -> str | None: ...


ANNOTATION = "opsctl.io/traffic-record"
FILE_KEY = "opsctl"  # the record's key inside the split file
MAX_BYTES = 128 * 1024  # half of Kubernetes' 256 KiB limit for all annotations of an object
MAX_OPERATIONS = 1000  # rate-window operations kept (far beyond any sane rate limit)
MAX_FAILOVERS = 50  # open failovers kept (an incident nobody restored is dropped oldest first)
TEXT_LIMIT = 300  # reason / message characters kept per entry

# An open failover's keys as written, with the type each holds (`saved`, `after`: Split.to_dict form).
_FAILOVER_KEYS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("saved", dict), ("opened_at", str), ("opened_ts", (int, float)), ("operation", str), ("actor", str),
    ("after", dict),
)
_RECORD_KEYS = ("version", "changes", "operations", "failovers", "term")


class OpenFailover(Model):
    """An incident's open failover in the record: the split saved before its first applied failover
    (what `traffic restore` returns to), when and by whom it opened, and the split its latest step
    wrote. Versioned and written back as `ChangeEntry` is: version 1 (today's format) writes no
    `version` key, `extra` keeps what it holds beyond these fields, and a known key whose value has
    another type stays in `extra` (the field keeps its default)."""

    version: int = 1
    saved: dict[str, Any] | None = None
    opened_at: str | None = None
    opened_ts: float | None = None
    operation: str | None = None
    actor: str | None = None
    after: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def saved_split(self) -> "Split | None":
        return split_of(self.saved)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "OpenFailover":
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        kinds = dict(_FAILOVER_KEYS)
        for key, value in raw.items():
            kind = kinds.get(key)
            if key == "version" and type(value) is int:
                values["version"] = value
            elif kind is None:
                extra[key] = value
            elif value is None or isinstance(value, kind) and not isinstance(value, bool):
                values[key] = value
            else:
                extra[key] = value
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The open failover as stored."""
        out: dict[str, Any] = {key: getattr(self, key) for key, _kind in _FAILOVER_KEYS}
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


class ChangeRecord(Model):
    """The change record stored with the split, typed once where it is read (`parse`) and written
    back by `stored` / `encode` byte for byte: version 1 is the format every opsctl so far wrote and
    writes no `version` key; `term` is written only when set; `extra` keeps top-level keys a newer
    writer added. Immutable: `with_change` and `with_term` return a new record."""

    version: int = 1
    changes: tuple[ChangeEntry, ...] = ()  # oldest first, as stored
    operations: dict[str, float] = field(default_factory=dict)  # operation -> its first applied change's ts
    failovers: dict[str, OpenFailover] = field(default_factory=dict)  # incident -> its open failover
    term: str | None = None  # the newest leader term that wrote it (None: only people have)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: object, where: str) -> "ChangeRecord":
        """A stored record (its JSON text or the object), or an empty one when there is none yet. Not
        JSON or not an object: no data (NoDataError, one line). A part of another type reads as empty
        (`changes` not a list, `operations` or `failovers` not an object, a `term` that is not text);
        an entry or an open failover that is not an object is dropped, and so is an operation whose
        time is not a number (the rate window never counted one)."""
        if raw is None:
            return cls()
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise NoDataError(f"{where}: the change record is not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise NoDataError(f"{where}: the change record is not a JSON object")
        changes, operations, failovers = raw.get("changes"), raw.get("operations"), raw.get("failovers")
        version, term = raw.get("version"), raw.get("term")
        return cls(
            version=version if type(version) is int else 1,
            changes=tuple(ChangeEntry.parse(e) for e in changes if isinstance(e, dict))
            if isinstance(changes, list) else (),
            operations={op: ts for op, ts in operations.items() if isinstance(ts, (int, float))}
            if isinstance(operations, dict) else {},
            failovers={incident: OpenFailover.parse(f) for incident, f in failovers.items() if isinstance(f, dict)}
            if isinstance(failovers, dict) else {},
            term=term if isinstance(term, str) else None,
            extra={k: v for k, v in raw.items() if k not in _RECORD_KEYS},
        )

    def stored(self) -> dict[str, Any]:
        """The record as written (JSON-ready): what an actuator stores (`encode` for an annotation,
        the file actuator inside its JSON)."""
        out: dict[str, Any] = {"changes": [e.to_dict() for e in self.changes], "operations": dict(self.operations),
                               "failovers": {k: f.to_dict() for k, f in self.failovers.items()}}
        if self.term is not None:
            out["term"] = self.term
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out

    def encode(self) -> str:
        return json.dumps(self.stored(), sort_keys=True, separators=(",", ":"), default=str)

    def newest_first(self) -> list[ChangeEntry]:
        return list(reversed(self.changes))

    def find_change(self, *, change_id: str | None = None, operation: str | None = None,
                    action: str | None = None) -> ChangeEntry | None:
        """The newest entry with this id (or of this operation and action): a write recognising itself."""
        for entry in reversed(self.changes):
            if change_id is not None and entry.id == change_id:
                return entry
            if change_id is None and operation is not None and entry.operation == operation and (
                    action is None or entry.action == action):
                return entry
        return None

    def operations_since(self, since: float, *, exclude: str | None = None) -> dict[str, float]:
        """Operation -> its first applied change, for operations applied at or after `since`."""
        return {op: ts for op, ts in self.operations.items() if ts >= since and op != exclude}

    def with_term(self, term: str | None) -> "ChangeRecord":
        return replace(self, term=term)

    def with_change(self, entry: ChangeEntry, *, history: int, window: int, now: float) -> "ChangeRecord":
        """The record after one more applied change: the entry appended (history capped), its operation
        counted for the rate window, and failovers opened (first failover of an incident) or closed (a
        restore that reached the saved split)."""
        changes = (*self.changes, entry)[-history:]
        ops = {op: ts for op, ts in self.operations.items() if ts >= now - window}
        ops.setdefault(entry.operation, entry.ts)
        operations = dict(sorted(ops.items(), key=lambda kv: kv[1])[-MAX_OPERATIONS:])
        failovers = dict(self.failovers)
        incident = entry.incident
        if entry.action == "failover" and incident:
            opened = failovers.get(incident)
            if opened is None:
                failovers[incident] = OpenFailover(saved=entry.before, opened_at=entry.time, opened_ts=entry.ts,
                                                   operation=entry.operation, actor=entry.actor, after=entry.after)
            else:
                failovers[incident] = replace(opened, after=entry.after)
        elif entry.action in ("restore", "set") and incident in failovers:
            saved = failovers[incident].saved
            if saved is None or _same(saved, entry.after):
                failovers.pop(incident)
        if len(failovers) > MAX_FAILOVERS:
            oldest = sorted(failovers, key=lambda k: failovers[k].opened_ts or 0)
            for gone in oldest[:len(failovers) - MAX_FAILOVERS]:
                failovers.pop(gone)
        out = replace(self, changes=changes, operations=operations, failovers=failovers)
        while len(out.encode().encode()) > MAX_BYTES and len(out.changes) > 1:
            out = replace(out, changes=out.changes[1:])
        return out


def empty() -> ChangeRecord:
    """A record with no change yet."""
    return ChangeRecord()


def now_for(actuator: object, clock: "Clock") -> float:
    """The time a change is recorded and the rate window measured at: the API server's for an
    actuator on Kubernetes (its `kube`) when the clock is the wall clock; the clock's otherwise (a
    file on one host, or simulated time in drills)."""
    from opsctl.clock import WallClock

    kube = getattr(actuator, "kube", None) or getattr(getattr(actuator, "object", None), "kube", None)
    if isinstance(clock, WallClock) and kube is not None and hasattr(kube, "server_now"):
        now: float = kube.server_now()
        return now
    return clock.now()


def find_change(record: ChangeRecord | None, *, change_id: str | None = None, operation: str | None = None,
                action: str | None = None) -> ChangeEntry | None:
    """`ChangeRecord.find_change`; None without a record."""
    if record is None:
        return None
    return record.find_change(change_id=change_id, operation=operation, action=action)


def parse(raw: object, where: str) -> ChangeRecord:
    """`ChangeRecord.parse`: a stored record, typed once, here."""
    return ChangeRecord.parse(raw, where)


def stored(record: ChangeRecord) -> dict[str, Any]:
    return record.stored()


def encode(record: ChangeRecord) -> str:
    return record.encode()


def entry_of(result: AppliedChange, order: Any, now: float, extra: dict[str, Any] | None = None) -> ChangeEntry:
    from opsctl.audit import scrub, timestamp

    entry = {
        "id": f"chg-{os.urandom(6).hex()}",
        "time": timestamp(now),
        "ts": round(now, 3),
        "operation": result.operation_id,
        "action": result.action,
        "outcome": "applied",
        "actor": result.actor,
        "reason": (result.reason or "")[:TEXT_LIMIT],
        "incident": result.incident,
        "emergency": result.emergency,
        "overrides": list(result.overrides),
        "before": result.before.to_dict(order) if result.before else None,
        "after": result.after.to_dict(order),
    }
    if result.term:
        entry["term"] = str(result.term)
    if result.shortfall:
        entry["shortfall"] = result.shortfall
    if extra:
        entry.update(scrub(extra))
    return ChangeEntry.parse(entry)


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    def canon(s: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
        if not s:
            return None
        return ({k: v for k, v in (s.get("weights") or {}).items() if v},
                {k: v for k, v in (s.get("shadow") or {}).items() if v})

    return canon(a) == canon(b)


def operations_since(record: ChangeRecord | None, since: float, *, exclude: str | None = None) -> dict[str, float]:
    """`ChangeRecord.operations_since`; nothing without a record."""
    return record.operations_since(since, exclude=exclude) if record is not None else {}


def newest_first(record: ChangeRecord | None) -> list[ChangeEntry]:
    """The record's entries, newest first (none without a record)."""
    return record.newest_first() if record is not None else []
