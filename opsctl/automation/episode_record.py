"""The episode as a typed record (issue 26 item 1; docs/decisions/0010-records-are-typed-and-versioned.md):
one `Episode` read back from either store, the SQLite `episodes` row (`from_row` / `columns`) or
its entry in the shared `serve-episodes` document (`from_stored` / `stored`); the typed document
around the shared ones is episodes_document.py, how a stored entry is checked stored_entry.py.

Version 1 is the format every opsctl so far wrote: no `version` column or key, and a key an older
write never set (an episode's `incident` before its first save, `closed_at` before it closed, `key`
in a row from before episode keys) stays absent (`unset`) until a write sets it, so what the code
before the model stored re-encodes to the same values and bytes. Keys beyond the known ones (a
newer writer's) are kept in `extra`. A stored entry that does not read as its model (a field of
the wrong type, an unknown state) is rejected with one line naming it (`MalformedEpisode`, exit 3):
in the shared document it is kept as stored, never acted on and written back unchanged, so nothing
else in the document is lost.

Records are frozen: a change is a new record (`Episode.changed`), and an entry a write leaves
unchanged is written back as the very object it was read as (`EpisodesDocument.encode`), so a write
encodes only what it changed.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from opsctl.automation.stored_entry import (
    ARRAY, BOOL, INTEGER, NUMBER, OBJECT, OPT_NUMBER, OPT_TEXT, TEXT, MalformedEpisode, Spec, StoredEntry, _made, _read,
)
from opsctl.model import Model, field

STATES = ("open", "restore_pending", "restoring", "closed")
OPEN_STATES = ("open", "restore_pending", "restoring")


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


# -- an action's entry on its episode ------------------------------------------------------------------


_ENTRY_KEYS: dict[str, Spec] = {"at": NUMBER, "action": TEXT, "status": TEXT, "by": TEXT, "detail": TEXT}
_ENTRY_REQUIRED = frozenset(_ENTRY_KEYS)


class ActionEntry(StoredEntry):
    """The short entry the shared document keeps on an episode for each action (its last
    MAX_EPISODE_ACTIONS): when it ended, what, how, which replica. The whole record
    (`action_record.ActionRecord`) stays in each replica's SQLite."""

    KEYS = _ENTRY_KEYS
    REQUIRED = _ENTRY_REQUIRED
    WHAT = "action entry"

    at: float
    action: str
    status: str
    by: str
    detail: str
    version: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


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


__all__ = ["ActionEntry", "COLUMNS", "Episode", "EpisodeBlocked", "OPEN_STATES", "STATES"]
