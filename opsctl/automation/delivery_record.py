"""A delivery as a typed record (issue 26 item 1; docs/decisions/0010-records-are-typed-and-versioned.md):
one `Delivery` read back from either delivery log, the SQLite `events` row (`from_row` /
`columns`, idempotency.py) or its entry in a shared `serve-deliveries-<i>` piece (`from_stored` /
`stored`, delivery_store.py), and the piece's table of them (`Entries`).

Version 1 is the format every opsctl so far wrote: no `version` key or column, and a key a write
never set (a quiet delivery's `owner`, `lease_until`, `term` and `payload`; a finished one's
`payload`) stays absent (`unset`) until a change sets it, so what the code before the record
stored re-encodes to the same values and bytes (tests/automation/test_delivery_record.py, on
fixtures captured from that code). Keys beyond the known ones (a newer writer's) are kept in
`extra`. A stored entry that does not read as its record is one line (`MalformedDelivery`, exit 3),
logged once: it is never acted on, never counted, and written back as stored.

A piece is read whole on every sweep, so its entries are typed lazily: `Entries` keeps the table
as stored (what is written) and types an entry when it is first read for its fields, reusing the
record typed from the very same stored object (or an equal one, after a re-read) instead of
building it again; a change replaces an entry with a new record's `stored()`, never changing the
object read (the version this replica last read or wrote is never changed: copy on write). The
sweep reads only the pending and running entries (`items(states)`): the finished bulk of a piece is
passed over by its stored `state`, neither typed nor compared with a record typed before.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import MISSING
from typing import Any

from opsctl.automation.stored_entry import (
    INTEGER, NUMBER, OPT_NUMBER, OPT_OBJECT, OPT_TEXT, TEXT, Spec, _read,
)
from opsctl.errors import NoDataError
from opsctl.model import Model, field

log = logging.getLogger("opsctl.automation")

STATES = ("pending", "running", "done", "failed")
FINISHED = ("done", "failed")
OPEN = ("pending", "running")  # what a sweep acts on or counts as waiting


class MalformedDelivery(NoDataError):
    """A stored delivery that does not read as its record: one line, exit 3."""


# The keys of an entry in a piece (its key is the entry's name), in the order they are written, with
# the JSON types each may hold (by exact type: a bool is no number).
_KEYS: dict[str, Spec] = {
    "source": TEXT, "partition": TEXT, "state": TEXT, "attempts": INTEGER, "received_at": NUMBER,
    "not_before": NUMBER, "owner": OPT_TEXT, "lease_until": OPT_NUMBER, "term": OPT_TEXT,
    "done_at": OPT_NUMBER, "payload": OPT_OBJECT, "result": OPT_OBJECT,
}
_REQUIRED = frozenset(("source", "partition", "state", "received_at"))
_OPTIONAL = frozenset(_KEYS).difference(_REQUIRED)
# The sets of keys unset, shared by the records read (a few shapes; one object each, not one a record:
# a piece's records are kept, and the collector walks every object kept).
_UNSETS: dict[frozenset[str], frozenset[str]] = {}
# The SQLite `events` table's columns (but `key`), as `columns()` gives them back.
COLUMNS = ("source", "payload", "partition", "state", "attempts", "owner", "lease_until", "not_before", "received_at",
           "done_at", "result")


class Delivery(Model):
    """One event of a delivery (an alert, a PagerDuty webhook event), keyed for acting once
    (idempotency.py says how): recorded `pending` (or `done` at once when no policy matches it),
    `running` while a worker holds its lease, `done` or `failed` once acted on. `payload` is what
    to act on (a piece drops it once finished); `result` what acting gave; `term` the leader's
    term that last claimed, finished or deferred it (pieces only). `unset` names the keys the
    stored entry did not hold; `extra` what it held beyond these fields; `texts` the JSON text a
    row's payload and result were read from (written back as read while unchanged)."""

    key: str
    source: str  # alertmanager | pagerduty
    partition: str  # events with the same partition are handled in order
    state: str  # pending | running | done | failed
    received_at: float
    attempts: int = 0
    not_before: float = 0  # not retried before (a try that could not act deferred it)
    owner: str | None = None  # the replica (or worker) holding it
    lease_until: float | None = None
    term: str | None = None
    done_at: float | None = None
    payload: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    version: int = 1
    unset: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, tuple[Any, str]] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def changed(self, *, forget: tuple[str, ...] = (), **fields: Any) -> "Delivery":
        """This delivery with `fields` set (each now written) and the keys `forget` names unset
        (not written, read back as their defaults)."""
        if not _FIELDS.issuperset(fields):
            raise TypeError(f"Delivery has no field {next(k for k in fields if k not in _FIELDS)!r}")
        changed = object.__new__(Delivery)
        state = changed.__dict__
        state.update(self.__dict__)
        state.update(fields)  # the fields are the model's own (no coercion, no __post_init__)
        for name in forget:
            state[name] = _DEFAULTS[name]
        if self.unset or forget:
            unset = self.unset.difference(fields).union(forget)
            state["unset"] = _UNSETS.setdefault(unset, unset)
        return changed

    # -- an entry of a piece ------------------------------------------------------------------------

    @classmethod
    def new(cls, key: str, **values: Any) -> "Delivery":
        """A delivery as recorded now: the keys given are written, the others unset."""
        unset = _OPTIONAL.difference(values)
        return _made(cls, dict(values, key=key, unset=_UNSETS.setdefault(unset, unset), extra={}))

    @classmethod
    def from_stored(cls, key: str, raw: Any) -> "Delivery":
        """The entry `key` of a piece as stored; MalformedDelivery (one line) when it does not read."""
        values, extra = _read(raw, f"delivery {key[:16]}", _KEYS, _REQUIRED, MalformedDelivery)
        if values["state"] not in STATES:
            raise MalformedDelivery(f"delivery {key[:16]}: state: expected one of {', '.join(STATES)},"
                                    f" got {str(values['state'])[:40]!r}")
        unset = _OPTIONAL.difference(raw)
        values.update(key=key, unset=_UNSETS.setdefault(unset, unset), extra=extra)
        return _made(cls, values)

    def stored(self) -> dict[str, Any]:
        """The entry as a piece keeps it (its key is the entry's name)."""
        unset = self.unset
        out: dict[str, Any] = {k: getattr(self, k) for k in _KEYS if k not in unset}
        if self.version != 1:
            out["version"] = self.version
        if self.extra:
            out.update(self.extra)
        return out

    # -- the SQLite row -------------------------------------------------------------------------------

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Delivery":
        """An `events` row; MalformedDelivery (one line) when a column does not read."""
        key = row["key"]
        what = f"delivery {str(key)[:16]}"
        state = row["state"]
        if state not in STATES:
            raise MalformedDelivery(f"{what}: state: expected one of {', '.join(STATES)}, got {str(state)[:40]!r}")
        texts: dict[str, tuple[Any, str]] = {}
        parsed: dict[str, Any] = {}
        for name in ("payload", "result"):
            text = row[name]
            if text is None:
                parsed[name] = None
                continue
            try:
                value = json.loads(text)
            except (TypeError, ValueError) as exc:
                raise MalformedDelivery(f"{what}: {name}: not JSON ({str(exc).splitlines()[0][:80]})") from None
            if type(value) is not dict:
                raise MalformedDelivery(f"{what}: {name}: expected a JSON object, got {type(value).__name__}")
            parsed[name] = value
            texts[name] = (value, text)
        return cls(key=key, source=row["source"], partition=row["partition"], state=state,
                   received_at=row["received_at"], attempts=row["attempts"], not_before=row["not_before"],
                   owner=row["owner"], lease_until=row["lease_until"], done_at=row["done_at"],
                   payload=parsed["payload"], result=parsed["result"], unset=frozenset(("term",)), texts=texts)

    def columns(self) -> dict[str, Any]:
        """The row's values but its key, as stored (the inverse of `from_row`): the payload and
        result as the JSON text they were read from while unchanged, else encoded as a write does."""
        out = {k: getattr(self, k) for k in COLUMNS}
        for name in ("payload", "result"):
            value = out[name]
            read = self.texts.get(name)
            if read is not None and read[0] is value:
                out[name] = read[1]
            elif value is not None or name == "payload":
                out[name] = json.dumps(value or {}, sort_keys=True, default=str)
        return out


_FIELDS = frozenset(Delivery.__dataclass_fields__)
_DEFAULTS: dict[str, Any] = {n: f.default for n, f in Delivery.__dataclass_fields__.items() if f.default is not MISSING}


def _made(cls: type[Delivery], values: dict[str, Any]) -> Delivery:
    """A record from checked values without Model.__init__'s generic loop over the fields (a piece
    is read whole): the defaults, then the values (no coercion, no __post_init__)."""
    record = object.__new__(cls)
    state = record.__dict__
    state.update(_DEFAULTS)
    state.update(values)
    if "extra" not in state:
        state["extra"] = {}
    state["texts"] = {}
    return record


# -- the problems of stored entries, logged once -------------------------------------------------------

_logged: set[str] = set()


def report(problem: str) -> None:
    """Log a malformed stored delivery once (whatever reads it again, every second)."""
    if problem in _logged:
        return
    if len(_logged) > 1000:
        _logged.clear()
    _logged.add(problem)
    log.warning("%s (kept as stored, not acted on)", problem)


# -- a piece's table --------------------------------------------------------------------------------------


class Entries:
    """One piece's events: `raw` is the table as stored (and as it is written: each entry the
    object read, or a changed record's `stored()`); each entry is typed when first read. `typed`
    (key -> (the stored object, its record)) is shared by the reads and writes of one piece, so an
    entry unchanged since it was last typed is not typed again."""

    __slots__ = ("raw", "typed", "where")

    def __init__(self, raw: dict[str, Any], typed: dict[str, tuple[Any, Delivery]] | None = None,
                 where: str = "serve-deliveries"):
        self.raw = raw
        self.typed = {} if typed is None else typed
        self.where = where

    def __contains__(self, key: str) -> bool:
        return key in self.raw

    def __len__(self) -> int:
        return len(self.raw)

    def _typed(self, key: str, raw: Any) -> Delivery:
        known = self.typed.get(key)
        if known is not None and (known[0] is raw or known[0] == raw):
            if known[0] is not raw:
                self.typed[key] = (raw, known[1])
            return known[1]
        try:
            record = Delivery.from_stored(key, raw)
        except MalformedDelivery as exc:
            raise MalformedDelivery(f"{self.where}: {exc.message}") from None
        self.typed[key] = (raw, record)
        return record

    def get(self, key: str) -> Delivery | None:
        """The entry `key`, typed; None when there is none; MalformedDelivery when it does not read."""
        raw = self.raw.get(key)
        return None if raw is None else self._typed(key, raw)

    def find(self, key: str) -> Delivery | None:
        """As `get`, but an entry that does not read is reported (once) and taken as not there to act on."""
        try:
            return self.get(key)
        except MalformedDelivery as exc:
            report(exc.message)
            return None

    def items(self, states: tuple[str, ...] | None = None) -> list[tuple[str, Delivery]]:
        """Every entry that reads, typed (one that does not is reported once and left out); with
        `states`, only those stored in one of them (the others are not typed: the sweep reads the
        pending and running few of a piece of mostly finished ones). A piece is read whole every
        second: an entry typed from this very object is taken as it is."""
        typed = self.typed
        out: list[tuple[str, Delivery]] = []
        for key, raw in self.raw.items():
            if states is not None:
                try:
                    if raw.get("state") not in states:  # (a tuple: compared by ==, whatever the stored type)
                        continue
                except AttributeError:  # not an object: typed below, so reported
                    pass
            known = typed.get(key)
            if known is not None:
                if known[0] is raw:
                    out.append((key, known[1]))
                    continue
                if known[0] == raw:  # a re-read of an entry typed before (compared in C)
                    typed[key] = (raw, known[1])
                    out.append((key, known[1]))
                    continue
            try:
                out.append((key, self._typed(key, raw)))
            except MalformedDelivery as exc:
                report(exc.message)
        return out

    def put(self, record: Delivery) -> dict[str, Any]:
        """Write `record` in its key's place; the entry as it is written is returned."""
        raw = record.stored()
        self.raw[record.key] = raw
        self.typed[record.key] = (raw, record)
        return raw

    def pop(self, key: str) -> None:
        self.raw.pop(key, None)


__all__ = ["COLUMNS", "Delivery", "Entries", "FINISHED", "MalformedDelivery", "OPEN", "STATES", "report"]
