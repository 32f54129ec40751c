"""The durable record of deliveries: each alert event and PagerDuty webhook is acted on once.

Alertmanager and PagerDuty deliver at least once (retries, HA peers, repeat intervals). Each alert
in a notification becomes one event keyed on fingerprint + startsAt + status (the alert's own
status, not the group's); a PagerDuty delivery is keyed on the signed event id. The first
delivery inserts the event as `pending`; any later copy finds the key and is answered 202 without
acting again.

The record lives in SQLite (WAL) under the state dir, so two or more replicas sharing the state see
the same keys: a worker *claims* an event with one conditional UPDATE (pending -> running, with a
lease), and only the claimant acts. A replica that dies mid-action leaves a running row whose lease
expires; a sweep in any replica re-queues it. Replicas that do not share a state dir (Kubernetes
pods with their own volume) may both act on a retried delivery; there the actuator's optimistic
concurrency (resourceVersion) turns the second failover into a no-op.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, TypeVar, cast

from opsctl.automation.delivery_record import Delivery, MalformedDelivery, report

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    key TEXT PRIMARY KEY,
    source TEXT NOT NULL,              -- alertmanager | pagerduty
    payload TEXT NOT NULL,             -- JSON of what to act on
    partition TEXT NOT NULL,           -- events with the same partition are handled in order
    state TEXT NOT NULL,               -- pending | running | done | failed
    attempts INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL,
    not_before REAL NOT NULL DEFAULT 0,
    received_at REAL NOT NULL,
    done_at REAL,
    result TEXT
);
CREATE INDEX IF NOT EXISTS events_by_state ON events (state, not_before);
"""

J = TypeVar("J")


class _CopyJson(Protocol):
    def __call__(self, value: J, /) -> J: ...


def _copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars), as copy.deepcopy but about 3x faster
    (no memo: JSON has no shared or cyclic parts). The shared documents are copied before every
    change (issue 22: deepcopy of the delivery pieces and the episodes document was a fifth of the
    serve process's time under a burst). Anything else is handed to copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    import copy

    return copy.deepcopy(value)


# The same copy typed as returning the shape it is given (a dict for a dict, a list for a list).
copy_json = cast(_CopyJson, _copy)


ADMIT_BUSY_TIMEOUT = 2.0  # seconds an incoming delivery waits for the write lock before it is answered 503
DEFAULT_LEASE = 300.0  # longer than any bounded action (pager and ticket calls have 30 s deadlines)


def event_key(*parts: str) -> str:
    """A fixed-length key for the idempotency tuple (separator-safe)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def alert_event_key(fingerprint: str, starts_at: str, status: str) -> str:
    """From the alert itself: the same alert reaching any replica, through any route or group, or
    repeated by Alertmanager, is one event."""
    return event_key("alertmanager", fingerprint, starts_at, status)


def webhook_event_key(event_id: str) -> str:
    """From PagerDuty's event id, which its signature covers (X-Webhook-Id is not signed)."""
    return event_key("pagerduty", event_id)


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def dead_local_owner(owner: str | None) -> bool:
    """True when `owner` ("host:pid[:thread]") was a process on this host that is gone: its leases can
    be released at start-up instead of waiting for them to expire. A process that just started owns
    nothing yet, so its own pid (a container restart reuses PID 1) counts as gone too."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def connect(path: Path) -> sqlite3.Connection:
    """A connection tuned for several processes sharing one file: WAL, a busy timeout, autocommit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.row_factory = sqlite3.Row
    return conn


_WRITE_LOCKS: dict[str, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: Path) -> threading.RLock:
    with _WRITE_LOCKS_GUARD:
        return _WRITE_LOCKS.setdefault(str(path.resolve()), threading.RLock())


class Database:
    """One SQLite file, one connection per thread; `transaction()` takes the write lock up front.

    Writers in one process queue on a Python lock before SQLite's: SQLite's busy handler sleeps
    1, 2, 5, 10 ms... between tries, which under a burst of deliveries costs more than the writes.
    Other processes (replicas sharing the file) still meet SQLite's lock and its busy timeout."""

    def __init__(self, path: Path, schema: str):
        self.path = Path(path)
        self._local = threading.local()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.write_lock = _write_lock(self.path)
        with self.write_lock:
            self.conn.executescript(schema)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self, timeout: float = -1) -> Iterator[sqlite3.Connection]:
        """A write transaction; `timeout` bounds the wait for this process's writers (then
        sqlite3.OperationalError, as SQLite raises when another process holds the lock too long)."""
        conn = self.conn
        if not self.write_lock.acquire(timeout=timeout):
            raise sqlite3.OperationalError("database is locked (by another writer in this process)")
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            self.write_lock.release()

    def write(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        """One write statement in its own (autocommit) transaction."""
        with self.write_lock:
            return self.conn.execute(sql, args)


@dataclass(frozen=True)
class NewEvent:
    key: str
    source: str
    partition: str
    payload: dict[str, Any]
    needs_action: bool = True  # False: recorded as done at once (no policy matches it)


@dataclass(frozen=True)
class ClaimedEvent:
    key: str
    source: str
    payload: dict[str, Any]
    attempts: int
    received_at: float
    partition: str = ""

    @classmethod
    def of(cls, delivery: Delivery) -> "ClaimedEvent":
        """What a worker acts on, from the delivery it claimed (the payload its own copy)."""
        return cls(delivery.key, delivery.source, copy_json(delivery.payload or {}), delivery.attempts,
                   delivery.received_at, delivery.partition)


class DeliveryLog:
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time, owner: str | None = None,
                 lease: float = DEFAULT_LEASE):
        self.db = Database(path, SCHEMA)
        self.clock = clock
        self.owner = owner or default_owner()
        self.lease_seconds = lease

    def admit(self, events: list[NewEvent], received_at: float | None = None) -> list[NewEvent]:
        """Record events not seen before, in one transaction; returns those that are new."""
        now = self.clock() if received_at is None else received_at
        new: list[NewEvent] = []
        # A sender waits for this answer (5 s at most): do not wait long for another replica's write.
        self.db.conn.execute(f"PRAGMA busy_timeout = {int(ADMIT_BUSY_TIMEOUT * 1000)}")
        with self.db.transaction(timeout=ADMIT_BUSY_TIMEOUT) as conn:
            for ev in events:
                record = Delivery(ev.key, ev.source, ev.partition, "pending", now, payload=ev.payload) if ev.needs_action \
                    else Delivery(ev.key, ev.source, ev.partition, "done", now, payload=ev.payload, done_at=now,
                                  result={"actions": [], "policies": []})
                row = record.columns()
                cur = conn.execute(
                    "INSERT OR IGNORE INTO events (key, source, payload, partition, state, received_at, done_at, result)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (ev.key, row["source"], row["payload"], row["partition"], row["state"], row["received_at"],
                     row["done_at"], row["result"]),
                )
                if cur.rowcount == 1:
                    new.append(ev)
        return new

    def release(self, key: str) -> None:
        """Nothing to hand back: the local log never records an event claimed at admit."""

    def seen(self, key: str) -> bool:
        return self.db.conn.execute("SELECT 1 FROM events WHERE key = ?", (key,)).fetchone() is not None

    def unseen(self, events: list[NewEvent]) -> list[NewEvent]:
        return [e for e in events if not self.seen(e.key)]

    def check(self) -> None:
        """Raises when the record cannot be read (readiness)."""
        self.db.conn.execute("SELECT 1 FROM events LIMIT 1").fetchall()

    def claim(self, key: str) -> ClaimedEvent | None:
        """Take the event for this worker, or None when it is done, owned by a live worker, or not
        due, or does not read as a delivery (reported once, left as stored)."""
        now = self.clock()
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM events WHERE key = ? AND ((state = 'pending' AND not_before <= ?)"
                " OR (state = 'running' AND lease_until < ?))", (key, now, now)).fetchone()
            if row is None:
                return None
            try:
                record = Delivery.from_row(row)
            except MalformedDelivery as exc:
                report(f"events: {exc.message}")
                return None
            conn.execute("UPDATE events SET state = 'running', owner = ?, lease_until = ?, attempts = attempts + 1"
                         " WHERE key = ?", (self.owner, now + self.lease_seconds, key))
        return ClaimedEvent.of(record.changed(state="running", owner=self.owner, lease_until=now + self.lease_seconds,
                                              attempts=record.attempts + 1))

    def finish(self, key: str, result: dict[str, Any], *, failed: bool = False) -> None:
        self.db.write(
            "UPDATE events SET state = ?, done_at = ?, result = ?, lease_until = NULL WHERE key = ? AND owner = ?",
            ("failed" if failed else "done", self.clock(), json.dumps(result, sort_keys=True, default=str), key,
             self.owner),
        )

    def retry_later(self, key: str, delay: float, result: dict[str, Any] | None = None, *, count: bool = True) -> None:
        """Back to pending after `delay`; `count=False` (the episode was busy) does not use up an attempt."""
        self.db.write(
            "UPDATE events SET state = 'pending', not_before = ?, lease_until = NULL, result = ?,"
            " attempts = attempts - ? WHERE key = ? AND owner = ?",
            (self.clock() + delay, json.dumps(result or {}, default=str), 0 if count else 1, key, self.owner),
        )

    def recover(self, *, all_others: bool = False) -> int:
        """At start-up: events a dead process on this host was acting on go back to pending
        (`all_others`: every other process's, for a new leader)."""
        with self.db.transaction() as conn:
            owners = [r[0] for r in conn.execute("SELECT DISTINCT owner FROM events WHERE state = 'running'")]
            released = 0
            for owner in owners:
                if (all_others and owner != self.owner) or dead_local_owner(owner):
                    released += conn.execute("UPDATE events SET state = 'pending', lease_until = NULL, not_before = 0"
                                             " WHERE state = 'running' AND owner = ?", (owner,)).rowcount
        return released

    def due(self, *, older_than: float, limit: int) -> list[tuple[str, str]]:
        """(key, partition) of events nobody is working on: pending past `older_than` seconds or
        past their retry time, and running with an expired lease (a worker or replica died)."""
        now = self.clock()
        rows = self.db.conn.execute(
            "SELECT key, partition FROM events WHERE (state = 'pending' AND not_before <= ?"
            " AND (not_before > 0 OR received_at <= ?)) OR (state = 'running' AND lease_until < ?)"
            " ORDER BY received_at LIMIT ?",
            (now, now - older_than, now, limit),
        ).fetchall()
        return [(r["key"], r["partition"]) for r in rows]

    def state(self, key: str) -> Delivery | None:
        """The delivery `key` as stored; MalformedDelivery (one line, exit 3) when it does not read."""
        row = self.db.conn.execute("SELECT * FROM events WHERE key = ?", (key,)).fetchone()
        return Delivery.from_row(row) if row else None

    def waiting(self, *, swept: bool = False) -> int:
        """Events waiting for a retry: pending again after a try that could not act (attempts > 0),
        or being retried (running, attempts > 1): one stays waiting until a try acts and it is done.
        One COUNT, `swept` or not (`due` reads only what is due)."""
        row = self.db.conn.execute("SELECT COUNT(*) FROM events WHERE (state = 'pending' AND attempts > 0)"
                                   " OR (state = 'running' AND attempts > 1)").fetchone()
        return int(row[0])

    def counts(self) -> dict[str, int]:
        rows = self.db.conn.execute("SELECT state, COUNT(*) AS n FROM events GROUP BY state").fetchall()
        return {r["state"]: r["n"] for r in rows}

    def prune(self, older_than: float) -> int:
        """Forget finished events older than `older_than` seconds (their keys can no longer recur)."""
        cur = self.db.write(
            "DELETE FROM events WHERE state IN ('done', 'failed') AND done_at < ?", (self.clock() - older_than,)
        )
        return cur.rowcount
