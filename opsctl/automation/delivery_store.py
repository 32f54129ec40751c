"""Deliveries in the shared state store (state.backend kubernetes), for HA `opsctl serve`, in pieces.

The same operations as the SQLite DeliveryLog (idempotency.py), on SHARDS documents of the
StateStore; an event lives in the piece its key hashes to (crc32), so one notification of thousands
of alerts is recorded as at most SHARDS bounded writes, never one document past the ConfigMap bound:

    serve-deliveries-<i>   {"events": {key: {source, partition, state, attempts, owner, term,
                            lease_until, not_before, received_at, done_at, payload (while not done),
                            result}}}

Each operation on one event is one compare-and-swap read-modify-write of its piece; an operation on
many (admit, recover) writes each piece it touches once, and reads of every piece (due, counts) run
in parallel, so a slow API server costs one round trip, not SHARDS. Deliveries recorded at once
share writes (group commit): while one write of a piece is in flight the others queue, and the
next write records them all, so 50 simultaneous deliveries cost a few writes, not 50 in a row. Every replica records
deliveries here (so one that is not the leader loses nothing), the leader claims and acts on them.

Bounded per piece: a finished event keeps its key and outcome (no payload) for RETENTION or until
MAX_FINISHED / SHARDS newer ones in its piece; past MAX_BYTES the oldest finished entries go first,
but never one finished within RECENT (its notification may still be retried: a forgotten key would
be acted on again). When the new events would not fit, the events that fit are recorded and the
rest are refused with DeliveryLogFull (the sender gets 503 and retries; what was recorded is
deduplicated and acted on meanwhile, and finishing an event drops its payload, so the retry finds
room).

`term` (a callable: the leader's term, or None) is stamped, as text, on the entries this replica
claims, finishes or defers.

The trigger path is short (issue 22): `admit(..., claim=True)` (the leader, about to queue what it
records) records an actionable event already claimed by this replica in the same write, so the
worker's `claim` takes it without a write of its own; and every write of a piece starts from the
version this replica last read or wrote of it (one PUT, no read first), re-reading only when the
compare-and-swap says it moved. An actionable delivery then costs one write to record it and one to
finish it, where it cost a duplicate-check read and three read-modify-writes.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TYPE_CHECKING, Callable, Iterable

from opsctl.automation.idempotency import DEFAULT_LEASE, ClaimedEvent, NewEvent, copy_json, dead_local_owner
from opsctl.errors import ConflictError, OpsctlError
from opsctl.state.base import encode

if TYPE_CHECKING:
    from opsctl.state.base import Document, StateStore

DELIVERIES = "serve-deliveries"
SHARDS = 8  # pieces of the delivery log; every replica must agree (a change is a migration)
ATTEMPTS = 10  # compare-and-swap rounds before a write gives up (the sender then gets 503 and retries)
RETENTION = 3 * 86400  # finished delivery keys are kept this long (Alertmanager repeats within hours)
MAX_FINISHED = 1500  # in all pieces together
MAX_BYTES = 384 * 1024  # per piece, below the store's 512 KiB document bound
RECENT = 600  # seconds a finished key is kept whatever the bounds (a notification's retries come within)
# Seconds after its admit that a claim recorded with it is taken without a write. Within this, a
# replica that led at the admit (and leads still) cannot have been succeeded: a successor needs
# the Lease to expire, lease_duration after a renewal the leader made at most renew_deadline before.
# The service passes half that margin; older, the claim is re-taken by one write as it was recorded.
FRESH = 2.0
# Seconds at most that a write recording only alerts no policy matches waits while actionable work is
# in progress on this replica (an actionable admit, or the work queue holding an event: `acting`).
# On a busy process and API server those writes are what the trigger's own write, its episode path
# and its failover queue behind. The quiet deliveries are recorded on a lane of their own
# (server.py), so their wait never holds a thread an actionable delivery needs; they still answer
# 202 only once recorded, at worst this much later, and they ride along with an actionable write of
# their piece if one comes first.
HOLD_OFF = 1.0


class DeliveryLogFull(OpsctlError):
    """Some events of a delivery did not fit in the delivery log: the sender retries (503)."""

    exit_code = 1


def piece_name(index: int) -> str:
    return f"{DELIVERIES}-{index}"


DOCUMENTS = tuple(f"{DELIVERIES}-{i}" for i in range(SHARDS))  # every piece's document name (RBAC names them)


def piece_of(key: str) -> int:
    return zlib.crc32(key.encode()) % SHARDS


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str))


def _entry_size(key: str, entry: dict[str, Any]) -> int:
    """What adding `entry` under `key` adds to a piece's encoding, at most: the key, its entry and
    a separator (the store's encoding is ASCII: escaped, so characters are bytes)."""
    return len(json.dumps(key)) + len(json.dumps(entry, separators=(",", ":"), default=str)) + 2


def _short(result: dict[str, Any]) -> dict[str, Any]:
    """The result as plain JSON (what a re-read gives), or its first 600 characters."""
    text = json.dumps(result, sort_keys=True, default=str)
    return json.loads(text) if len(text) <= 600 else {"summary": text[:600]}


def _own(table: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The entry under `key`, as a copy of its own in `table`, to change: entries are shared with the
    version of the piece this replica last read or wrote, which is never changed (copy on write)."""
    e = table.get(key)
    if e is None:
        return None
    table[key] = e = dict(e)
    return e


def _waiting(events: dict[str, Any]) -> int:
    """Pending again after a try that could not act, or being retried (as DeliveryLog.waiting)."""
    return sum(1 for e in events.values()
               if (e["state"] == "pending" and e.get("attempts", 0) > 0)
               or (e["state"] == "running" and e.get("attempts", 0) > 1))


class _Waiter:
    """One delivery's events for one piece, waiting for the group commit that records them."""

    def __init__(self, events: list[NewEvent], now: float, claim: bool = False):
        self.events, self.now, self.claim = events, now, claim
        self.added: list[NewEvent] = []
        self.refused = 0
        self.error: BaseException | None = None
        self.done = False


class SharedDeliveryLog:
    def __init__(self, store: "StateStore", *, clock: Callable[[], float], owner: str, lease: float = DEFAULT_LEASE,
                 term: Callable[[], object] = lambda: None, fresh: float = FRESH,
                 acting: Callable[[], bool] = lambda: False, hold_off: float = HOLD_OFF):
        self.store = store
        self.acting = acting  # whether actionable events are being worked on here (quiet writes wait)
        self.hold_off = hold_off
        self._urgent = 0  # admits with an actionable event in progress
        self.fresh = fresh  # seconds an admit's own claim is taken as it is (see FRESH)
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease
        self.term = term
        self._pool: ThreadPoolExecutor | None = None
        self._commit = threading.Condition()
        self._waiting: dict[int, list[_Waiter]] = {}
        self._writing: set[int] = set()
        self._flights_lock = threading.Lock()
        self._flights: dict[int, Future[dict[str, Any]]] = {}
        self.last_waiting: int | None = None  # events waiting for a retry, as the last sweep read them
        # Each piece as this replica last read or wrote it: the next write starts from it (no read).
        self._known: dict[int, Document] = {}
        # The encoded size of a known piece, when this replica wrote it (the document it belongs to).
        self._known_size: dict[int, tuple[Document, int]] = {}
        self._generation: dict[int, int] = {}  # per piece: writes answered (reads older than one are not kept)
        self._known_lock = threading.Lock()
        # Events admitted already claimed by this replica: key -> (the claim, its lease end, its term).
        self._mine: dict[str, tuple[ClaimedEvent, float, str | None]] = {}
        self._mine_lock = threading.Lock()

    def nudge(self) -> None:
        """Actionable work ended here: quiet writes held back look again at once."""
        with self._commit:
            self._commit.notify_all()

    # -- pieces -----------------------------------------------------------------------------------

    def _read(self, index: int) -> dict[str, Any]:
        with self._known_lock:
            generation = self._generation.get(index, 0)
        doc = self.store.get(piece_name(index))
        # A read that was in flight while this replica wrote the piece may answer the version before
        # that write: it is not remembered over the newer one (the next write would meet 409).
        self._remember(index, doc, since=generation)
        return dict(doc.data.get("events", {})) if doc else {}

    def _remember(self, index: int, doc: Document | None, *, since: int | None = None,
                  size: int | None = None) -> None:
        """Keep `doc` as the piece's last known version (`size`: its encoded size, when known). A
        write's answer always replaces it (and counts a generation); a read's only when no write of
        the piece was answered since it began."""
        with self._known_lock:
            if since is not None and self._generation.get(index, 0) != since:
                return
            if since is None:
                self._generation[index] = self._generation.get(index, 0) + 1
            if doc is None:
                self._known.pop(index, None)
            else:
                self._known[index] = doc
            if doc is not None and size is not None:
                self._known_size[index] = (doc, size)
            else:
                self._known_size.pop(index, None)

    def _read_shared(self, index: int) -> dict[str, Any]:
        """One piece's events; readers arriving while a read of it is in flight share that read (for
        what tolerates an answer a moment old: the duplicate check, which admit repeats under CAS,
        and the sweep)."""
        with self._flights_lock:
            found = self._flights.get(index)
            leader = found is None
            flight: Future[dict[str, Any]] = Future() if found is None else found
            if leader:
                self._flights[index] = flight
        if leader:
            try:
                flight.set_result(self._read(index))
            except BaseException as exc:
                flight.set_exception(exc)
            finally:
                with self._flights_lock:
                    self._flights.pop(index, None)
        return dict(flight.result())

    def _read_all(self, indexes: Iterable[int] | None = None) -> dict[str, Any]:
        """The events of the given pieces (default: all), read in parallel."""
        pieces = sorted(set(range(SHARDS) if indexes is None else indexes))
        if len(pieces) == 1:
            return self._read_shared(pieces[0])
        if self._pool is None:
            self._pool = ThreadPoolExecutor(SHARDS, thread_name_prefix="opsctl-deliveries")
        events: dict[str, Any] = {}
        for part in self._pool.map(self._read_shared, pieces):
            events.update(part)
        return events

    def _update(self, index: int, change: Callable[[dict[str, Any]], bool],
                base: list[int | None] | None = None) -> None:
        """Run change(events) on one piece under compare-and-swap; it returns False to write nothing.
        A change changes an existing entry only through `_own` (copy on write). `base`, when given,
        is set to the encoded size of the piece the change starts from, if known, before it runs."""
        def apply(data: dict[str, Any] | None) -> dict[str, Any] | None:
            data = data or {}
            events = data.setdefault("events", {})
            return data if change(events) else None

        with self._known_lock:
            known = self._known.get(index)
            sized = self._known_size.get(index)
        if known is not None:
            # Start from the version this replica last saw: one PUT when nobody wrote the piece since.
            # A change that finds nothing to do there re-reads (the piece may have moved), and so
            # does a compare-and-swap that meets a newer version. The change works on a shallow copy
            # (entries are copied as they change, `_own`), and the document written is handed over
            # to the store as it is (encoded once here, no parse of the answer): issue 22.
            if base is not None:
                base[0] = sized[1] if sized is not None and sized[0] is known else None
            start = dict(known.data)
            start["events"] = dict(start.get("events") or {})
            data = apply(start)
            if data is not None:
                name = piece_name(index)
                text = encode(name, data)
                try:
                    doc = self.store.put(name, data, version=known.version, encoded=text, owned=True)
                except ConflictError:
                    with self._known_lock:
                        if self._known.get(index) is known:
                            self._known.pop(index, None)
                else:
                    self._remember(index, doc, size=len(text))
                    return
        if base is not None:
            base[0] = None
        self._remember(index, self.store.update(piece_name(index), apply, attempts=ATTEMPTS))

    def _term_now(self) -> str | None:
        term = self.term()
        return None if term is None else str(term)

    def _stamp(self, entry: dict[str, Any]) -> None:
        term = self._term_now()
        if term is not None:
            entry["term"] = term

    # -- operations ---------------------------------------------------------------------------------

    def check(self) -> None:
        self.store.get(piece_name(0))

    def seen(self, key: str) -> bool:
        return key in self._read(piece_of(key))

    def unseen(self, events: list[NewEvent]) -> list[NewEvent]:
        known = self._read_all(piece_of(e.key) for e in events)
        return [e for e in events if e.key not in known]

    def admit(self, events: list[NewEvent], received_at: float | None = None, *, claim: bool = False) -> list[NewEvent]:
        """Record the events not recorded yet; the new ones are returned. Raises DeliveryLogFull
        after recording what fits when some piece cannot take all of its share. With `claim` (the
        leader, which queues what it records at once), the new actionable events are recorded
        claimed by this replica: `claim(key)` then takes them without a write, and `release(key)`
        hands back one that was not queued after all."""
        now = self.clock() if received_at is None else received_at
        by_piece: dict[int, list[NewEvent]] = {}
        for ev in events:
            by_piece.setdefault(piece_of(ev.key), []).append(ev)
        new: list[NewEvent] = []
        left_out = 0
        urgent = any(ev.needs_action for ev in events)
        if urgent:
            with self._commit:
                self._urgent += 1
        try:
            for index in sorted(by_piece):
                added, refused = self._admit_piece(index, by_piece[index], now, claim)
                new += added
                left_out += refused
        finally:
            if urgent:
                with self._commit:
                    self._urgent -= 1
                    self._commit.notify_all()
        if left_out:
            # The sender gets 503 and nothing is queued from this admit: what it recorded claimed is
            # handed back to pending, for the sweep (as every event of a full admit was before).
            for ev in new:
                if claim and ev.needs_action:
                    self.release(ev.key)
            raise DeliveryLogFull(
                f"delivery log full: {len(new)} new events recorded, {left_out} left for the sender's retry",
                hint="the leader acts on what was recorded and frees room as it finishes")
        return new

    def _admit_piece(self, index: int, events: list[NewEvent], now: float,
                     claim: bool = False) -> tuple[list[NewEvent], int]:
        """Group commit: deliveries arriving while a write of this piece is in flight wait for it, and
        the next write records all of them at once (one compare-and-swap for many deliveries)."""
        waiter = _Waiter(events, now, claim)
        hold_until = time.monotonic() + self.hold_off
        with self._commit:
            self._waiting.setdefault(index, []).append(waiter)
            while not waiter.done:
                if index in self._writing:
                    self._commit.wait()
                    continue
                # A batch of only alerts no policy matches, while actionable work is in progress
                # here: it goes behind (at most hold_off), or rides along with an actionable write.
                left = hold_until - time.monotonic()
                if left > 0 and (self._urgent or self.acting()) \
                        and not any(ev.needs_action for w in self._waiting[index] for ev in w.events):
                    self._commit.wait(min(left, 0.05))
                    continue
                batch, self._waiting[index] = self._waiting[index], []
                self._writing.add(index)
                self._commit.release()
                try:
                    self._write_batch(index, batch)
                finally:
                    self._commit.acquire()
                    self._writing.discard(index)
                    self._commit.notify_all()
        if waiter.error is not None:
            raise waiter.error
        return waiter.added, waiter.refused

    def _write_batch(self, index: int, batch: list["_Waiter"]) -> None:
        claims: dict[str, tuple[ClaimedEvent, float, str | None]] = {}
        base: list[int | None] = [None]  # the encoded size of the piece the change starts from, if known

        def change(table: dict[str, Any]) -> bool:
            claims.clear()
            # An upper bound of the piece's size with the new events (the known size plus theirs;
            # bounding only removes): the whole piece is measured only when it may be past MAX_BYTES.
            bound = base[0]
            for w in batch:
                w.added, w.refused = [], 0
            order: list[tuple[_Waiter, NewEvent]] = []
            for w in batch:
                for ev in w.events:
                    if ev.key in table:
                        continue
                    entry = {"source": ev.source, "partition": ev.partition, "attempts": 0, "received_at": w.now,
                             "not_before": 0}
                    if ev.needs_action and w.claim:  # recorded claimed: the worker's claim writes nothing
                        lease_until = self.clock() + self.lease_seconds
                        entry.update(state="running", payload=ev.payload, owner=self.owner, lease_until=lease_until,
                                     attempts=1)
                        term = self._term_now()
                        if term is not None:  # as _stamp does
                            entry["term"] = term
                        claims[ev.key] = (ClaimedEvent(ev.key, ev.source, copy_json(ev.payload), 1, w.now,
                                                       ev.partition), lease_until, term)
                    elif ev.needs_action:
                        entry.update(state="pending", payload=ev.payload)
                    else:
                        entry.update(state="done", done_at=w.now, result={"actions": [], "policies": []})
                    table[ev.key] = entry
                    if bound is not None:
                        bound += _entry_size(ev.key, entry)
                    w.added.append(ev)
                    order.append((w, ev))
            if not order:
                return False
            fits = bound is not None and bound <= MAX_BYTES
            self._bound(table, fits)
            while order and not fits and _size(table) > MAX_BYTES:  # the new events alone past the bound: the latest wait
                w, ev = order.pop()
                table.pop(ev.key)
                w.added.remove(ev)
                w.refused += 1
                claims.pop(ev.key, None)
            return bool(order)

        try:
            self._update(index, change, base)
        except Exception as exc:  # every delivery of the batch gets the error (503: the sender retries)
            claims.clear()
            for w in batch:
                w.added, w.error = [], exc
        if claims:
            with self._mine_lock:
                self._mine.update(claims)
        for w in batch:
            w.done = True

    def _bound(self, table: dict[str, Any], fits: bool = False) -> None:
        """Drop finished entries past RETENTION or past the count; past MAX_BYTES (measured unless
        `fits`: known below it) the oldest of the rest not finished within RECENT."""
        now = self.clock()
        finished = sorted((e.get("done_at") or 0, k) for k, e in table.items() if e["state"] in ("done", "failed"))
        # Keys finished within RECENT stay whatever the bounds: the sender may still be retrying the
        # notification they came in, and a forgotten key would be admitted and acted on again.
        evictable = [k for at, k in finished if at < now - RECENT]
        expired = {k for at, k in finished if at < now - RETENTION}
        excess = len(finished) - len(expired) - max(1, MAX_FINISHED // SHARDS)
        drop = expired | set([k for k in evictable if k not in expired][:max(0, excess)])
        for k in drop:
            table.pop(k, None)
        oldest = [k for k in evictable if k not in drop]
        while oldest and not fits and _size(table) > MAX_BYTES:  # large payloads pending: keep fewer finished keys
            for k in oldest[:100]:
                table.pop(k, None)
            oldest = oldest[100:]

    def claim(self, key: str) -> ClaimedEvent | None:
        with self._mine_lock:
            mine = self._mine.pop(key, None)
        if mine is not None:
            held, lease_until, term = mine
            claimed_at = lease_until - self.lease_seconds
            if self.clock() - claimed_at < self.fresh and self._term_now() == term:
                return held  # recorded claimed by this replica, under its current term, moments ago
        claimed: list[ClaimedEvent] = []

        def change(table: dict[str, Any]) -> bool:
            claimed.clear()
            e = table.get(key)
            now = self.clock()
            # An admit's own claim, older or from an earlier term: taken again only as it was written
            # (nobody took it since), renewing its lease under the term of now.
            own = (mine is not None and e is not None and e["state"] == "running" and e.get("owner") == self.owner
                   and e.get("lease_until") == mine[1])
            if e is None or not (own or (e["state"] == "pending" and e.get("not_before", 0) <= now)
                                 or (e["state"] == "running" and (e.get("lease_until") or 0) < now)):
                return False
            e = _own(table, key)
            assert e is not None
            if own:
                e.update(lease_until=now + self.lease_seconds)
                self._stamp(e)
                claimed.append(ClaimedEvent(key, e["source"], copy_json(e.get("payload") or {}), e["attempts"],
                                            e["received_at"], e["partition"]))
                return True
            e.update(state="running", owner=self.owner, lease_until=now + self.lease_seconds,
                     attempts=e.get("attempts", 0) + 1)
            self._stamp(e)
            claimed.append(ClaimedEvent(key, e["source"], copy_json(e.get("payload") or {}), e["attempts"], e["received_at"],
                                        e["partition"]))
            return True

        self._update(piece_of(key), change)
        return claimed[0] if claimed else None

    def release(self, key: str) -> None:
        """Hand back an event admitted claimed that will not be worked on here (not queued after
        all, or this replica no longer leads): pending again at once, its attempt not counted."""
        with self._mine_lock:
            mine = self._mine.pop(key, None)
        if mine is None:
            return

        def change(table: dict[str, Any]) -> bool:
            e = table.get(key)
            if e is None or e["state"] != "running" or e.get("owner") != self.owner or e.get("lease_until") != mine[1]:
                return False
            e = _own(table, key)
            assert e is not None
            e.update(state="pending", owner=None, lease_until=None, not_before=0, attempts=e.get("attempts", 1) - 1)
            self._stamp(e)
            return True

        self._update(piece_of(key), change)

    def finish(self, key: str, result: dict[str, Any], *, failed: bool = False) -> None:
        def change(table: dict[str, Any]) -> bool:
            e = table.get(key)
            if e is None or e.get("owner") != self.owner:
                return False
            e = _own(table, key)
            assert e is not None
            e.update(state="failed" if failed else "done", done_at=self.clock(), result=_short(result),
                     lease_until=None)
            e.pop("payload", None)
            self._stamp(e)
            return True

        self._update(piece_of(key), change)

    def retry_later(self, key: str, delay: float, result: dict[str, Any] | None = None, *, count: bool = True) -> None:
        def change(table: dict[str, Any]) -> bool:
            e = table.get(key)
            if e is None or e.get("owner") != self.owner:
                return False
            e = _own(table, key)
            assert e is not None
            e.update(state="pending", not_before=self.clock() + delay, lease_until=None, result=_short(result or {}),
                     attempts=e.get("attempts", 0) - (0 if count else 1))
            self._stamp(e)
            return True

        self._update(piece_of(key), change)

    def recover(self, *, all_others: bool = False) -> int:
        """Events claimed by a dead process on this host (or, for a new leader, by any other
        process: the old leader no longer acts) go back to pending."""
        held = self._read_all()
        pieces = {piece_of(k) for k, e in held.items() if e["state"] == "running" and e.get("owner") != self.owner}
        released = 0
        for index in sorted(pieces):
            count = [0]

            def change(table: dict[str, Any]) -> bool:
                count[0] = 0
                for key, e in list(table.items()):
                    owner = e.get("owner")
                    if e["state"] == "running" and owner != self.owner and (all_others or dead_local_owner(owner)):
                        e = _own(table, key)
                        assert e is not None
                        e.update(state="pending", lease_until=None, not_before=0)
                        count[0] += 1
                return bool(count[0])

            self._update(index, change)
            released += count[0]
        return released

    def due(self, *, older_than: float, limit: int) -> list[tuple[str, str]]:
        """As DeliveryLog.due; the same read also refreshes `last_waiting` (no read of its own)."""
        now = self.clock()
        events = self._read_all()
        self.last_waiting = _waiting(events)
        rows = [(e["received_at"], k, e["partition"]) for k, e in events.items()
                if (e["state"] == "pending" and e.get("not_before", 0) <= now
                    and (e.get("not_before", 0) > 0 or e["received_at"] <= now - older_than))
                or (e["state"] == "running" and (e.get("lease_until") or 0) < now)]
        return [(k, p) for _, k, p in sorted(rows)[:limit]]

    def state(self, key: str) -> dict[str, Any] | None:
        e = self._read(piece_of(key)).get(key)
        if e is None:
            return None
        row = dict(e, key=key)
        row["payload"] = json.dumps(e.get("payload") or {}, sort_keys=True)
        row["result"] = json.dumps(e.get("result") or {}, sort_keys=True)
        return row

    def waiting(self) -> int:
        """Events waiting for a retry (pending again after a try that could not act, or being retried)."""
        self.last_waiting = _waiting(self._read_all())
        return self.last_waiting

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self._read_all().values():
            counts[e["state"]] = counts.get(e["state"], 0) + 1
        return counts

    def prune(self, older_than: float) -> int:
        return 0  # admit() bounds each piece as it writes
