"""The change record that travels with the split: written in the same write as the split itself.

Every applied change appends one entry (id, operation, action, actor, reason, incident, emergency,
overrides, before, after, time) to the record stored with the split: inside the split file for the
file actuator, in an annotation on the ConfigMap / VirtualService / HTTPRoute for the Kubernetes
ones. One write holds both, so no change is ever applied without its record, and the rate guard,
which counts from this record, sees exactly what was applied: a concurrent writer's compare-and-swap
fails, and it re-reads, re-plans and re-checks the guard against the newer record.

Fencing and time (docs/design.md, "Shapes the open work shares" 2 and 3): the record keeps `term`,
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

import copy
import json
import os
from typing import TYPE_CHECKING, Any, Protocol

from opsctl.errors import NoDataError
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.traffic.base import Actuator
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


# An entry's keys as written, in order, with the type each holds; `term` and `shortfall` only when set.
_ENTRY_KEYS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("id", str), ("time", str), ("ts", (int, float)), ("operation", str), ("action", str), ("outcome", str),
    ("actor", str), ("reason", str), ("incident", str), ("emergency", bool), ("overrides", list),
    ("before", dict), ("after", dict), ("term", str), ("shortfall", dict),
)


class ChangeEntry(Model):
    """One applied change in the record, typed once where the record is read (`parse`).

    Written as it always was (`to_dict`): version 1 is the format every opsctl so far wrote, and
    is written without a `version` key; a later format writes its number. `extra` keeps what the
    entry holds beyond these fields (a drill's audit fields, keys a newer writer added, a known key
    whose value has another type), so reading and writing back loses nothing; an older entry that
    lacks one of the fields (one written before `operation` existed) gains it, with its default,
    when the record is next written."""

    version: int = 1
    id: str = ""
    time: str = ""
    ts: float = 0.0
    operation: str = ""
    action: str = ""
    outcome: str = "applied"
    actor: str = ""
    reason: str = ""
    incident: str | None = None
    emergency: bool = False
    overrides: tuple[str, ...] = ()
    before: dict[str, Any] | None = None  # Split.to_dict form
    after: dict[str, Any] | None = None
    term: str | None = None  # the leader's term it was written under (None: a person)
    shortfall: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def before_split(self) -> "Split | None":
        return _split_of(self.before)

    @property
    def after_split(self) -> "Split | None":
        return _split_of(self.after)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> "ChangeEntry":
        """An entry as stored, old or new; never fails (a value of another type stays in `extra`)."""
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        kinds = dict(_ENTRY_KEYS)
        for key, value in raw.items():
            kind = kinds.get(key)
            if key == "version" and type(value) is int:
                values["version"] = value
            elif kind is None or value is None and key not in ("incident", "before", "after", "term"):
                extra[key] = value
            elif value is None:
                values[key] = None
            elif key == "overrides":
                if isinstance(value, list) and all(isinstance(o, str) for o in value):
                    values[key] = tuple(value)
                else:
                    extra[key] = value
            elif isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
                values[key] = value  # an int `ts` stays an int: written back as it was read
            else:
                extra[key] = value
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        """The entry as stored and as `traffic history -o json` shows it."""
        out: dict[str, Any] = {}
        for key, _kind in _ENTRY_KEYS:
            value = getattr(self, key)
            if key in ("term", "shortfall") and not value:
                continue
            out[key] = list(value) if key == "overrides" else value
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


def _split_of(stored: dict[str, Any] | None) -> "Split | None":
    """A split as an entry stores it (Split.to_dict form), typed; None when unset or not a split."""
    from opsctl.traffic.split import Split

    if not stored:
        return None
    try:
        return Split.of(stored.get("weights") or {}, stored.get("shadow") or {})
    except (AttributeError, TypeError, ValueError):  # not a mapping of whole numbers: nothing to show
        return None


ANNOTATION = "opsctl.io/traffic-record"
FILE_KEY = "opsctl"  # the record's key inside the split file
MAX_BYTES = 128 * 1024  # half of Kubernetes' 256 KiB limit for all annotations of an object
MAX_OPERATIONS = 1000  # rate-window operations kept (far beyond any sane rate limit)
MAX_FAILOVERS = 50  # open failovers kept (an incident nobody restored is dropped oldest first)
TEXT_LIMIT = 300  # reason / message characters kept per entry


def empty() -> dict[str, Any]:
    """A record with no change yet, in `parse` form (`changes` holds ChangeEntry models)."""
    return {"changes": [], "operations": {}, "failovers": {}}


def now_for(actuator: "Actuator", clock: "Clock") -> float:
    """The time a change is recorded and the rate window measured at: the API server's for an
    actuator on Kubernetes (its `kube`) when the clock is the wall clock; the clock's otherwise (a
    file on one host, or simulated time in drills)."""
    from opsctl.clock import WallClock

    kube = getattr(actuator, "kube", None) or getattr(getattr(actuator, "object", None), "kube", None)
    if isinstance(clock, WallClock) and kube is not None and hasattr(kube, "server_now"):
        now: float = kube.server_now()
        return now
    return clock.now()


def find_change(record: dict[str, Any] | None, *, change_id: str | None = None, operation: str | None = None,
                action: str | None = None) -> ChangeEntry | None:
    """The newest entry with this id (or of this operation and action): a write recognising itself."""
    for entry in newest_first(record or {}):
        if change_id is not None and entry.id == change_id:
            return entry
        if change_id is None and operation is not None and entry.operation == operation and (
                action is None or entry.action == action):
            return entry
    return None


def parse(raw: object, where: str) -> dict[str, Any]:
    """A stored record, or an empty one when there is none yet; its entries typed (ChangeEntry), each
    once, here. A record that is not ours is no data; an entry that is not a JSON object is dropped."""
    if raw is None:
        return empty()
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise NoDataError(f"{where}: the change record is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise NoDataError(f"{where}: the change record is not a JSON object")
    out = empty()
    for key, kind in (("changes", list), ("operations", dict), ("failovers", dict)):
        value = raw.get(key)
        if isinstance(value, kind):
            out[key] = value
    out["changes"] = [ChangeEntry.parse(e) for e in out["changes"] if isinstance(e, dict)]
    if isinstance(raw.get("term"), str):
        out["term"] = raw["term"]
    return out


def stored(record: dict[str, Any]) -> dict[str, Any]:
    """The record as written (JSON-ready: each entry as its dict), from its `parse` form: what an
    actuator stores (`encode` for an annotation, the file actuator inside its JSON)."""
    return {**record, "changes": [e.to_dict() for e in record["changes"]]}


def encode(record: dict[str, Any]) -> str:
    return json.dumps(stored(record), sort_keys=True, separators=(",", ":"), default=str)


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


def with_change(record: dict[str, Any], entry: ChangeEntry, *, history: int, window: int,
                now: float) -> dict[str, Any]:
    """The record after one more applied change: the entry appended (history capped), its operation
    counted for the rate window, and failovers opened (first failover of an incident) or closed (a
    restore that reached the saved split). Entries are immutable: only the rest is copied."""
    out = {**copy.deepcopy({k: v for k, v in record.items() if k != "changes"}), "changes": list(record["changes"])}
    out["changes"] = (out["changes"] + [entry])[-history:]
    ops = {op: ts for op, ts in out["operations"].items() if isinstance(ts, (int, float)) and ts >= now - window}
    ops.setdefault(entry.operation, entry.ts)
    out["operations"] = dict(sorted(ops.items(), key=lambda kv: kv[1])[-MAX_OPERATIONS:])
    incident = entry.incident
    if entry.action == "failover" and incident:
        opened = out["failovers"].get(incident)
        if opened is None:
            out["failovers"][incident] = {"saved": entry.before, "opened_at": entry.time, "opened_ts": entry.ts,
                                          "operation": entry.operation, "actor": entry.actor,
                                          "after": entry.after}
        else:
            opened["after"] = entry.after
    elif entry.action in ("restore", "set") and incident in out["failovers"]:
        saved = out["failovers"][incident].get("saved")
        if saved is None or _same(saved, entry.after):
            out["failovers"].pop(incident)
    if len(out["failovers"]) > MAX_FAILOVERS:
        oldest = sorted(out["failovers"], key=lambda k: out["failovers"][k].get("opened_ts") or 0)
        for incident in oldest[:len(out["failovers"]) - MAX_FAILOVERS]:
            out["failovers"].pop(incident)
    while len(encode(out).encode()) > MAX_BYTES and len(out["changes"]) > 1:
        out["changes"] = out["changes"][1:]
    return out


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    def canon(s: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
        if not s:
            return None
        return ({k: v for k, v in (s.get("weights") or {}).items() if v},
                {k: v for k, v in (s.get("shadow") or {}).items() if v})

    return canon(a) == canon(b)


def operations_since(record: dict[str, Any], since: float, *, exclude: str | None = None) -> dict[str, float]:
    """Operation -> its first applied change, for operations applied at or after `since`."""
    return {op: ts for op, ts in record.get("operations", {}).items()
            if isinstance(ts, (int, float)) and ts >= since and op != exclude}


def newest_first(record: dict[str, Any]) -> list[ChangeEntry]:
    """The record's entries, newest first (`record` in `parse` form)."""
    return list(reversed(record.get("changes") or []))
