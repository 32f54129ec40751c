"""The episode as a typed record (issue 26 item 1; docs/design.md, "Shapes the open work shares" 6):
one `Episode` read back from either store, the SQLite `episodes` row (`from_row` / `columns`) or
its entry in the shared `serve-episodes` document (`from_stored` / `stored`), and the typed
document around the shared ones (`EpisodesDocument`: alerts, episodes, intents, term).

Version 1 is the format every opsctl so far wrote: no `version` column or key, and a key an older
write never set (an episode's `incident` before its first save, `closed_at` before it closed, `key`
in a row from before episode keys) stays absent (`unset`) until a write sets it, so what the code
before the model stored re-encodes to the same values and bytes. Keys beyond the known ones (a
newer writer's) are kept in `extra`. A stored entry that does not read as its model (a field of
the wrong type, an unknown state) is rejected with one line naming it (`MalformedEpisode`, exit 3):
in the shared document it is kept as stored, never acted on and written back unchanged, so nothing
else in the document is lost.

Records are frozen: a change is a new record (`Episode.changed`), and an entry a write leaves
unchanged is written back as the very object it was read as (`EpisodesDocument.encode`), so a
write encodes only what it changed.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import MISSING
from typing import Any, Callable, Mapping, TypeVar

from opsctl.errors import NoDataError
from opsctl.model import Model, field

STATES = ("open", "restore_pending", "restoring", "closed")
OPEN_STATES = ("open", "restore_pending", "restoring")


class MalformedEpisode(NoDataError):
    """A stored episode (or an entry beside it) that does not read as its record: one line, exit 3."""


class EpisodeBlocked(MalformedEpisode):
    """A firing alert's policy and target have a stored episode that does not read and may be open
    (its state is not "closed"): it may hold this very incident (its failover, its page), so no
    second episode is opened beside it. `ident` names the entry, `problem` says why it does not
    read, `hint` what to do; the engine tells a human and retries the event until it reads again
    or is removed."""

    def __init__(self, where: str, ident: str, problem: str):
        super().__init__(
            f"{where}: episode {ident} of this policy and target does not read ({problem});"
            " no second episode is opened beside it",
            hint=f"repair or delete episode {ident} in {where}; until then the alert is retried and not acted on")
        self.where = where
        self.ident = ident
        self.problem = problem


# -- the typed checks of a stored value (one home, so every record reads alike) -----------------------
# A key's check is the set of JSON types its value may have (by exact type: a bool is no number);
# the whole document is read on every read of it, so this stays a set lookup per key.

Spec = tuple[frozenset[type], str]
TEXT: Spec = (frozenset((str,)), "a string")
NUMBER: Spec = (frozenset((int, float)), "a number")
OPT_TEXT: Spec = (frozenset((str, type(None))), "a string or null")
OPT_NUMBER: Spec = (frozenset((int, float, type(None))), "a number or null")
INTEGER: Spec = (frozenset((int,)), "an integer")
BOOL: Spec = (frozenset((bool,)), "true or false")
OBJECT: Spec = (frozenset((dict,)), "an object")
ARRAY: Spec = (frozenset((list,)), "an array")


def _read(raw: Any, what: str, keys: Mapping[str, Spec],
          required: frozenset[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(known values, extra keys) of one stored entry; MalformedEpisode otherwise."""
    if type(raw) is not dict:
        raise MalformedEpisode(f"{what}: expected an object, got {type(raw).__name__}")
    if raw.keys() == keys.keys():  # as this code writes it: every key known, none missing
        for key, value in raw.items():
            if type(value) not in keys[key][0]:
                raise MalformedEpisode(f"{what}: {key}: expected {keys[key][1]}, got {type(value).__name__}")
        return dict(raw), {}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        spec = keys.get(key)
        if spec is None:
            if key == "version":
                if type(value) is not int:
                    raise MalformedEpisode(f"{what}: version: expected an integer, got {type(value).__name__}")
                values["version"] = value
            else:
                extra[key] = value
        elif type(value) in spec[0]:
            values[key] = value
        else:
            raise MalformedEpisode(f"{what}: {key}: expected {spec[1]}, got {type(value).__name__}")
    if not required.issubset(values):
        missing = [k for k in keys if k in required and k not in values]
        raise MalformedEpisode(f"{what}: {', '.join(missing)}: required, missing")
    return values, extra


R = TypeVar("R", bound=Model)


def _made(cls: type[R], values: dict[str, Any]) -> R:
    """A record from values `_read` checked, without Model.__init__'s generic loop over the fields
    (the document is read whole, on every read): the defaults, then the values (these records
    have no coercion and no __post_init__; a field with a default factory is given, or made here)."""
    record = object.__new__(cls)
    state = record.__dict__
    defaults = _DEFAULTS.get(cls)
    if defaults is None:
        defaults = _DEFAULTS[cls] = {n: f.default for n, f in cls.__dataclass_fields__.items()
                                     if f.default is not MISSING}
    state.update(defaults)
    state.update(values)
    if len(state) < len(cls.__dataclass_fields__):
        for name, f in cls.__dataclass_fields__.items():
            if name not in state:
                if f.default_factory is MISSING:
                    raise TypeError(f"{cls.__name__}: {name} is required")
                state[name] = f.default_factory()
    return record


_DEFAULTS: dict[type, dict[str, Any]] = {}


# -- an action's entry on its episode ------------------------------------------------------------------


_ENTRY_KEYS: dict[str, Spec] = {"at": NUMBER, "action": TEXT, "status": TEXT, "by": TEXT, "detail": TEXT}
_ENTRY_REQUIRED = frozenset(_ENTRY_KEYS)


class ActionEntry(Model):
    """The short entry the shared document keeps on an episode for each action (its last
    MAX_EPISODE_ACTIONS): when it ended, what, how, which replica. The whole record
    (`action_record.ActionRecord`) stays in each replica's SQLite."""

    at: float
    action: str
    status: str
    by: str
    detail: str
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stored(cls, raw: Any, what: str = "action entry") -> "ActionEntry":
        values, extra = _read(raw, what, _ENTRY_KEYS, _ENTRY_REQUIRED)
        values["extra"] = extra
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "action": self.action, "status": self.status, "by": self.by,
                               "detail": self.detail}
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


# -- the episode -----------------------------------------------------------------------------------------


def _state(value: Any) -> bool:
    return type(value) is str and value in STATES


# The keys of an episode's entry in the shared document (its id is the entry's name), with their checks.
_STORED_KEYS: dict[str, Spec] = {
    "policy": TEXT, "target": TEXT, "key": TEXT, "state": TEXT, "opened_at": NUMBER, "incident": OPT_TEXT,
    "ticket": OPT_TEXT, "failover": OPT_TEXT, "owned": BOOL, "saved": OBJECT, "restore_due": OPT_NUMBER,
    "restore_refusals": INTEGER, "owner": OPT_TEXT, "lease_until": OPT_NUMBER, "closed_at": OPT_NUMBER,
    "closed_because": OPT_TEXT, "actions": ARRAY,
}
_OPTIONAL = frozenset(_STORED_KEYS)
_REQUIRED = frozenset(("policy", "target", "state", "opened_at"))
# The SQLite `episodes` table's columns (but `id`), as `columns()` gives them back.
COLUMNS = ("policy", "target", "key", "state", "opened_at", "incident", "ticket", "failover", "owned", "saved",
           "restore_due", "restore_refusals", "owner", "lease_until", "closed_at", "closed_because")


class Episode(Model):
    """One incident as a policy sees it, per target (episodes.py says what it goes through), read
    back typed from either store and passed so to where it is written back.

    What a worker changes (`incident`, `ticket`, `failover`, `owned`, `saved`) is saved when it lets
    go (`EpisodeStore.save`); the lease (`owner`, `lease_until`) and the restore's state (`state`,
    `restore_due`, `restore_refusals`, `closed_*`) are the stores' to change. `saved` is what the
    failover returned (the split before and after), handed to the restore as it is. `unset` names
    the keys the stored entry did not hold (written back without them until a change sets them);
    `extra` what it held beyond these fields."""

    id: int | str
    policy: str
    target: str
    state: str  # open | restore_pending | restoring | closed
    opened_at: float
    key: str = ""  # from the opening alert (episode_protocol.episode_key); a row from before keys: its id
    incident: str | None = None  # what page() returned: dedup key or incident id
    ticket: str | None = None
    failover: str | None = None  # the failover's outcome status ("started" while under way); None before one
    owned: bool = False  # this automation moved the traffic (so it may restore it)
    saved: dict[str, Any] = field(default_factory=dict)
    restore_due: float | None = None
    restore_refusals: int = 0
    owner: str | None = None  # the worker holding its lease (`<replica owner>:<thread>`)
    lease_until: float | None = None
    closed_at: float | None = None
    closed_because: str | None = None
    actions: tuple[ActionEntry, ...] = ()  # the shared document's entries (the SQLite row has none)
    version: int = 1
    unset: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)

    def changed(self, **fields: Any) -> "Episode":
        """This episode with `fields` set (each now written, as the dict's update wrote it)."""
        if not _EPISODE_FIELDS.issuperset(fields):
            raise TypeError(f"Episode has no field {next(k for k in fields if k not in _EPISODE_FIELDS)!r}")
        changed = object.__new__(Episode)
        state = changed.__dict__
        state.update(self.__dict__)
        state.update(fields)  # the fields are the model's own (no coercion, no __post_init__)
        if self.unset:
            state["unset"] = self.unset.difference(fields)
        return changed

    @property
    def traffic_moved(self) -> bool:
        return self.failover in ("applied", "dry_run") and self.owned

    @property
    def failover_unrecorded(self) -> bool:
        """Its failover was started but its result never saved (the worker was fenced or died between
        the split write and the episode save): the traffic may have moved; the change record knows."""
        return self.failover == "started"

    @property
    def may_have_moved_traffic(self) -> bool:
        return self.traffic_moved or self.failover_unrecorded

    @property
    def is_open(self) -> bool:
        return self.state != "closed"

    # -- the shared document's entry -------------------------------------------------------------

    @classmethod
    def from_stored(cls, ident: str, raw: Any) -> "Episode":
        """The entry `ident` of `serve-episodes` as stored; MalformedEpisode (one line) when it does not read."""
        what = f"episode {ident}"
        values, extra = _read(raw, what, _STORED_KEYS, _REQUIRED)
        if not _state(values["state"]):
            raise MalformedEpisode(f"{what}: state: expected one of {', '.join(STATES)}, got {str(values['state'])[:40]!r}")
        actions = values.get("actions")
        if actions is not None:
            values["actions"] = tuple(ActionEntry.from_stored(a, f"{what}: actions[{i}]") for i, a in enumerate(actions))
        if "key" not in values:
            values["key"] = ident  # an entry from before episode keys is named by its id
        unset = _OPTIONAL.difference(raw)
        values.update(id=ident, unset=unset, extra=extra)
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        """The entry as the shared document keeps it (its id is the entry's name)."""
        unset = self.unset
        out: dict[str, Any] = {k: getattr(self, k) for k in COLUMNS if k not in unset}
        if "actions" not in unset:
            out["actions"] = [a.stored() for a in self.actions]
        if self.version != 1:
            out["version"] = self.version
        if self.extra:
            out.update(self.extra)
        return out

    # -- the SQLite row ---------------------------------------------------------------------------------

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Episode":
        """An `episodes` row; MalformedEpisode (one line) when a column does not read."""
        ident = row["id"]
        what = f"episode {ident}"
        state = row["state"]
        if not _state(state):
            raise MalformedEpisode(f"{what}: state: expected one of {', '.join(STATES)}, got {str(state)[:40]!r}")
        unset = set()
        raw_saved = row["saved"]
        saved: Any = {}
        if raw_saved is None:
            unset.add("saved")
        else:
            try:
                saved = json.loads(raw_saved)
            except (TypeError, ValueError) as exc:
                raise MalformedEpisode(f"{what}: saved: not JSON ({str(exc).splitlines()[0][:80]})") from None
            if type(saved) is not dict:
                raise MalformedEpisode(f"{what}: saved: expected a JSON object, got {type(saved).__name__}")
        key = row["key"]
        if key is None:
            unset.add("key")
        return cls(id=ident, policy=row["policy"], target=row["target"], state=state, opened_at=row["opened_at"],
                   key=key or str(ident), incident=row["incident"], ticket=row["ticket"], failover=row["failover"],
                   owned=bool(row["owned"]), saved=saved, restore_due=row["restore_due"],
                   restore_refusals=row["restore_refusals"], owner=row["owner"], lease_until=row["lease_until"],
                   closed_at=row["closed_at"], closed_because=row["closed_because"], unset=frozenset(unset))

    def columns(self) -> dict[str, Any]:
        """The row's values but its id, as stored (the inverse of `from_row`)."""
        out = {k: getattr(self, k) for k in COLUMNS}
        out["owned"] = int(self.owned)
        out["key"] = None if "key" in self.unset else self.key
        out["saved"] = None if "saved" in self.unset else json.dumps(self.saved, sort_keys=True)
        return out

    def fields(self) -> dict[str, Any]:
        """What acting on the episode changes, as saved when the worker lets go of it."""
        return {"incident": self.incident, "ticket": self.ticket, "failover": self.failover,
                "owned": int(self.owned), "saved": json.dumps(self.saved, sort_keys=True)}


_EPISODE_FIELDS = frozenset(Episode.__dataclass_fields__)


# -- what the shared document holds beside the episodes --------------------------------------------------


_ALERT_KEYS: dict[str, Spec] = {"policy": TEXT, "target": TEXT, "starts_at": TEXT, "status": TEXT, "updated_at": NUMBER}
_ALERT_REQUIRED = frozenset(_ALERT_KEYS)


class AlertState(Model):
    """An alert's state per policy and fingerprint (`alerts["policy/fingerprint"]`), with its startsAt,
    so a late or replayed copy of an earlier firing never reopens or resolves a later one."""

    policy: str
    target: str
    starts_at: str  # canonical RFC 3339, nanoseconds: sorts as text
    status: str  # firing | resolved
    updated_at: float
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stored(cls, raw: Any, what: str = "alert") -> "AlertState":
        values, extra = _read(raw, what, _ALERT_KEYS, _ALERT_REQUIRED)
        values["extra"] = extra
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy, "target": self.target, "starts_at": self.starts_at,
                               "status": self.status, "updated_at": self.updated_at}
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


_INTENT_KEYS: dict[str, Spec] = {"action": TEXT, "term": OPT_TEXT, "at": NUMBER, "by": TEXT, "detail": TEXT}
_INTENT_REQUIRED = frozenset(("action", "at", "by", "detail"))


class Intent(Model):
    """An external action's intent (page, ticket, note), written under the term before it happens."""

    action: str
    at: float
    by: str
    detail: str
    term: str | None = None
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_stored(cls, raw: Any, what: str = "intent") -> "Intent":
        values, extra = _read(raw, what, _INTENT_KEYS, _INTENT_REQUIRED)
        values["extra"] = extra
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "term": self.term, "at": self.at, "by": self.by,
                               "detail": self.detail}
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out


# -- the document -------------------------------------------------------------------------------------------

_SECTIONS = ("alerts", "episodes", "intents")
_READERS: dict[str, Callable[[str, Any], Any]] = {
    "alerts": lambda k, raw: AlertState.from_stored(raw, f"alert {k}"),
    "episodes": Episode.from_stored,
    "intents": lambda k, raw: Intent.from_stored(raw, f"intent {k}"),
}


class EpisodesDocument(Model):
    """`serve-episodes`, typed once where it is read (`parse`) and encoded where it is written
    (`encode`). A write works on a `draft()` (its own section dicts, the same records) and sets the
    records it changes; `encode` writes back every other entry as the object it was read as.

    `rejected` keeps, per section, the entries that did not read (as stored; `problems` says why,
    one line each): they are never acted on and are written back unchanged. `unset` names the
    top-level keys the stored document did not hold (`intents` before the first intent, `term`
    unfenced)."""

    alerts: dict[str, AlertState] = field(default_factory=dict)
    episodes: dict[str, Episode] = field(default_factory=dict)
    intents: dict[str, Intent] = field(default_factory=dict)
    term: str | None = None  # the newest leader term that wrote it
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    rejected: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    unset: frozenset[str] = frozenset(("intents", "term"))
    # section -> {name: (record, what it was read or written as)}: an unchanged entry is written as it was.
    encoded: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: dict[str, Any] | None, name: str = "serve-episodes") -> "EpisodesDocument":
        """The document as stored (None: not written yet). An entry that does not read is rejected
        (kept as stored, with its problem); a section that is not an object refuses the document
        (MalformedEpisode): nothing would be safe to write over it."""
        if not data:
            return cls()
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        rejected: dict[str, dict[str, Any]] = {}
        problems: list[str] = []
        encoded: dict[str, dict[str, tuple[Any, Any]]] = {}
        for key, raw in data.items():
            reader = _READERS.get(key)
            if reader is None:
                if key == "term" and type(raw) in OPT_TEXT[0]:
                    values["term"] = raw
                elif key == "version" and type(raw) is int:
                    values["version"] = raw
                elif key in ("term", "version"):
                    raise MalformedEpisode(f"{name}: {key}: expected {'a string' if key == 'term' else 'an integer'},"
                                           f" got {type(raw).__name__}")
                else:
                    extra[key] = raw
                continue
            if type(raw) is not dict:
                raise MalformedEpisode(f"{name}: {key}: expected an object, got {type(raw).__name__}")
            records: dict[str, Any] = {}
            kept: dict[str, tuple[Any, Any]] = {}
            for ident, entry in raw.items():
                try:
                    record = reader(ident, entry)
                except MalformedEpisode as exc:
                    rejected.setdefault(key, {})[ident] = entry
                    problems.append(f"{name}: {exc.message}")
                    continue
                records[ident] = record
                kept[ident] = (record, entry)
            values[key] = records
            encoded[key] = kept
        unset = frozenset(k for k in ("alerts", "episodes", "intents", "term") if k not in data)
        return cls(**values, extra=extra, rejected=rejected, problems=tuple(problems), unset=unset, encoded=encoded)

    def draft(self) -> "EpisodesDocument":
        """A copy whose sections a write may change (the records themselves are frozen and shared)."""
        return EpisodesDocument(alerts=dict(self.alerts), episodes=dict(self.episodes), intents=dict(self.intents),
                                term=self.term, version=self.version, extra=self.extra, rejected=self.rejected,
                                problems=self.problems, unset=self.unset, encoded=self.encoded)

    def changed_term(self, term: str) -> "EpisodesDocument":
        """This draft stamped with the term of the write (its sections the same dicts)."""
        from dataclasses import replace

        return replace(self, term=term)

    def encode(self) -> dict[str, Any]:
        """The document as written: `alerts` and `episodes` always, `intents` once it has any,
        `term` when set (or stored), each unchanged entry the object it was read as."""
        out: dict[str, Any] = {}
        for section in _SECTIONS:
            records: dict[str, Any] = getattr(self, section)
            if section == "intents" and not records and "intents" in self.unset and not self.rejected.get(section):
                continue
            known = self.encoded.get(section, {})
            entries: dict[str, Any] = {}
            for ident, record in records.items():
                pair = known.get(ident)
                entries[ident] = pair[1] if pair is not None and pair[0] is record else record.stored()
            entries.update(self.rejected.get(section, {}))
            out[section] = entries
        if self.term is not None or "term" not in self.unset:
            out["term"] = self.term
        if self.version != 1:
            out["version"] = self.version
        out.update(self.extra)
        return out

    def written(self, data: dict[str, Any]) -> "EpisodesDocument":
        """This document as it stands once `data` (its `encode()`) was written: the next write
        starts from it without reading or parsing the echo."""
        encoded = {section: {ident: (record, data[section][ident]) for ident, record in getattr(self, section).items()}
                   for section in _SECTIONS if section in data}
        unset = frozenset(k for k in ("alerts", "episodes", "intents", "term") if k not in data)
        return EpisodesDocument(alerts=self.alerts, episodes=self.episodes, intents=self.intents, term=self.term,
                                version=self.version, extra=self.extra, rejected=self.rejected,
                                problems=self.problems, unset=unset, encoded=encoded)

    def open_episode(self, policy: str, target: str) -> Episode | None:
        for e in self.episodes.values():
            if e.policy == policy and e.target == target and e.state != "closed":
                return e
        return None

    def unreadable_open(self, policy: str, target: str) -> tuple[str, str] | None:
        """(id, problem) of a stored episode of `policy` and `target` that does not read and whose
        state is not "closed" (so it may be open), else None. An entry whose policy or target does
        not read names no policy: it blocks nothing (its problem is logged as any other)."""
        for ident, raw in self.rejected.get("episodes", {}).items():
            if (type(raw) is dict and raw.get("policy") == policy and raw.get("target") == target
                    and raw.get("state") != "closed"):
                problem = next((p.split(f" episode {ident}: ", 1)[1] for p in self.problems
                                if f" episode {ident}: " in p), "does not read")
                return ident, problem
        return None


__all__ = ["ActionEntry", "AlertState", "COLUMNS", "Episode", "EpisodeBlocked", "EpisodesDocument", "Intent",
           "MalformedEpisode",
           "OPEN_STATES", "STATES"]
