"""Deliveries in the shared state store (state.backend kubernetes), for HA `opsctl serve`, in pieces.

The same operations as the SQLite DeliveryLog (idempotency.py), on the SHARDS pieces of
delivery_pieces.py (an event lives in the piece its key hashes to), so one notification of
thousands of alerts is recorded as at most SHARDS bounded writes, never one document past the
ConfigMap bound. Each entry is a `delivery_record.Delivery` (source, partition, state, attempts,
owner, term, lease_until, not_before, received_at, done_at, payload while not done, result), read
by its fields and changed by putting a new record in its place.

Each operation on one event is one compare-and-swap read-modify-write of its piece; an operation on
many (admit, recover) writes each piece it touches once, and reads of every piece (due, counts) run
in parallel, so a slow API server costs one round trip, not SHARDS. Deliveries recorded at once
share writes (group commit): while one write of a piece is in flight the others queue, and the
next write records them all, so 50 simultaneous deliveries cost a few writes, not 50 in a row. Every replica records
deliveries here (so one that is not the leader loses nothing), the leader claims and acts on them.

Bounded per piece (delivery_pieces.bound: finished entries go first, never one finished within
RECENT). When the new events would not fit, the events that fit are recorded and the rest are
refused with DeliveryLogFull (the sender gets 503 and retries; what was recorded is deduplicated and
acted on meanwhile, and finishing an event drops its payload, so the retry finds room).

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
from typing import Any, TYPE_CHECKING, Callable

from opsctl.automation import delivery_pieces
from opsctl.automation.delivery_pieces import Pieces, _entry_size, _size, every, piece_name, piece_of
from opsctl.automation.delivery_record import OPEN, Delivery, Entries
from opsctl.automation.group_commit import HOLD_OFF, Waiter
from opsctl.automation.idempotency import DEFAULT_LEASE, ClaimedEvent, NewEvent, copy_json, dead_local_owner
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.state.base import StateStore

# Seconds after its admit that a claim recorded with it is taken without a write. Within this, a
# replica that led at the admit (and leads still) cannot have been succeeded: a successor needs
# the Lease to expire, lease_duration after a renewal the leader made at most renew_deadline before.
# The service passes half that margin; older, the claim is re-taken by one write as it was recorded.
FRESH = 2.0
class DeliveryLogFull(OpsctlError):
    """Some events of a delivery did not fit in the delivery log: the sender retries (503)."""

    exit_code = 1


def _short(result: dict[str, Any]) -> dict[str, Any]:
    """The result as plain JSON (what a re-read gives), or its first 600 characters."""
    text = json.dumps(result, sort_keys=True, default=str)
    return json.loads(text) if len(text) <= 600 else {"summary": text[:600]}


def _waiting(entries: list[tuple[str, Delivery]]) -> int:
    """Pending again after a try that could not act, or being retried (as DeliveryLog.waiting)."""
    return sum(1 for _, e in entries
               if (e.state == "pending" and e.attempts > 0) or (e.state == "running" and e.attempts > 1))


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
        self.pieces = Pieces(store)
        self._commit = threading.Condition()
        self._waiting: dict[int, list[Waiter]] = {}
        self._writing: set[int] = set()
        self.last_waiting: int | None = None  # events waiting for a retry, as the last sweep read them
        # Events admitted already claimed by this replica: key -> (the claim, its lease end, its term).
        self._mine: dict[str, tuple[ClaimedEvent, float, str | None]] = {}
        self._mine_lock = threading.Lock()

    def nudge(self) -> None:
        """Actionable work ended here: quiet writes held back look again at once."""
        with self._commit:
            self._commit.notify_all()

    def _term_now(self) -> str | None:
        term = self.term()
        return None if term is None else str(term)

    def _stamped(self, **fields: Any) -> dict[str, Any]:
        """`fields` with the term of now, when there is one (as every claim, finish or deferral writes)."""
        term = self._term_now()
        if term is not None:
            fields["term"] = term
        return fields

    # -- operations ---------------------------------------------------------------------------------

    def check(self) -> None:
        self.store.get(piece_name(0))

    def seen(self, key: str) -> bool:
        return key in self.pieces.read(piece_of(key))

    def unseen(self, events: list[NewEvent]) -> list[NewEvent]:
        pieces = self.pieces.read_all(piece_of(e.key) for e in events)
        return [e for e in events if not any(e.key in entries for entries in pieces)]

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
        waiter = Waiter(events, now, claim)
        self._commit_waiters(index, [waiter])
        if waiter.error is not None:
            raise waiter.error
        return waiter.added, waiter.refused

    def admit_held(self, index: int, deliveries: list[tuple[list[NewEvent], float]]) -> tuple[list[NewEvent], int]:
        """Record deliveries of only quiet events that were held back and answered already
        (quiet_writes.py), all of piece `index`, in one write with whatever else waits for it; never
        held again. Returns the new events and how many did not fit (the caller tries them again)."""
        waiters = [Waiter(events, now, hold=False) for events, now in deliveries]
        self._commit_waiters(index, waiters)
        for w in waiters:
            if w.error is not None:
                raise w.error
        return [ev for w in waiters for ev in w.added], sum(w.refused for w in waiters)

    def _commit_waiters(self, index: int, waiters: list["Waiter"]) -> None:
        hold_until = time.monotonic() + self.hold_off
        with self._commit:
            self._waiting.setdefault(index, []).extend(waiters)
            while not all(w.done for w in waiters):
                if index in self._writing:
                    self._commit.wait()
                    continue
                # A batch of only alerts no policy matches, while actionable work is in progress
                # here: it goes behind (at most hold_off), or rides along with an actionable write.
                left = hold_until - time.monotonic()
                if left > 0 and (self._urgent or self.acting()) \
                        and all(w.hold and not any(ev.needs_action for ev in w.events) for w in self._waiting[index]):
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

    def _write_batch(self, index: int, batch: list["Waiter"]) -> None:
        claims: dict[str, tuple[ClaimedEvent, float, str | None]] = {}
        base: list[int | None] = [None]  # the encoded size of the piece the change starts from, if known

        def change(table: Entries) -> bool:
            claims.clear()
            # An upper bound of the piece's size with the new events (the known size plus theirs;
            # bounding only removes): the whole piece is measured only when it may be past MAX_BYTES.
            bound = base[0]
            for w in batch:
                w.added, w.refused = [], 0
            order: list[tuple[Waiter, NewEvent]] = []
            for w in batch:
                for ev in w.events:
                    if ev.key in table:
                        continue
                    if ev.needs_action and w.claim:  # recorded claimed: the worker's claim writes nothing
                        lease_until = self.clock() + self.lease_seconds
                        record = Delivery.new(ev.key, source=ev.source, partition=ev.partition, received_at=w.now,
                                              not_before=0, state="running", payload=ev.payload, owner=self.owner,
                                              lease_until=lease_until, attempts=1, **self._stamped())
                        claims[ev.key] = (ClaimedEvent(ev.key, ev.source, copy_json(ev.payload), 1, w.now,
                                                       ev.partition), lease_until, record.term)
                    elif ev.needs_action:
                        record = Delivery.new(ev.key, source=ev.source, partition=ev.partition, attempts=0,
                                              received_at=w.now, not_before=0, state="pending", payload=ev.payload)
                    else:
                        record = Delivery.new(ev.key, source=ev.source, partition=ev.partition, attempts=0,
                                              received_at=w.now, not_before=0, state="done", done_at=w.now,
                                              result={"actions": [], "policies": []})
                    entry = table.put(record)
                    if bound is not None:
                        bound += _entry_size(ev.key, entry)
                    w.added.append(ev)
                    order.append((w, ev))
            if not order:
                return False
            fits = bound is not None and bound <= delivery_pieces.MAX_BYTES
            delivery_pieces.bound(table, self.clock(), fits)
            while order and not fits and _size(table.raw) > delivery_pieces.MAX_BYTES:  # the new events alone past the bound: the latest wait
                w, ev = order.pop()
                table.pop(ev.key)
                w.added.remove(ev)
                w.refused += 1
                claims.pop(ev.key, None)
            return bool(order)

        try:
            self.pieces.update(index, change, base)
        except Exception as exc:  # every delivery of the batch gets the error (503: the sender retries)
            claims.clear()
            for w in batch:
                w.added, w.error = [], exc
        if claims:
            with self._mine_lock:
                self._mine.update(claims)
        for w in batch:
            w.done = True

    def claim(self, key: str) -> ClaimedEvent | None:
        with self._mine_lock:
            mine = self._mine.pop(key, None)
        if mine is not None:
            held, lease_until, term = mine
            claimed_at = lease_until - self.lease_seconds
            if self.clock() - claimed_at < self.fresh and self._term_now() == term:
                return held  # recorded claimed by this replica, under its current term, moments ago
        claimed: list[ClaimedEvent] = []

        def change(table: Entries) -> bool:
            claimed.clear()
            e = table.find(key)
            now = self.clock()
            # An admit's own claim, older or from an earlier term: taken again only as it was written
            # (nobody took it since), renewing its lease under the term of now.
            own = (mine is not None and e is not None and e.state == "running" and e.owner == self.owner
                   and e.lease_until == mine[1])
            if e is None or not (own or (e.state == "pending" and e.not_before <= now)
                                 or (e.state == "running" and (e.lease_until or 0) < now)):
                return False
            if own:
                e = e.changed(**self._stamped(lease_until=now + self.lease_seconds))
            else:
                e = e.changed(**self._stamped(state="running", owner=self.owner, lease_until=now + self.lease_seconds,
                                              attempts=e.attempts + 1))
            table.put(e)
            claimed.append(ClaimedEvent.of(e))
            return True

        self.pieces.update(piece_of(key), change)
        return claimed[0] if claimed else None

    def release(self, key: str) -> None:
        """Hand back an event admitted claimed that will not be worked on here (not queued after
        all, or this replica no longer leads): pending again at once, its attempt not counted."""
        with self._mine_lock:
            mine = self._mine.pop(key, None)
        if mine is None:
            return

        def change(table: Entries) -> bool:
            e = table.find(key)
            if e is None or e.state != "running" or e.owner != self.owner or e.lease_until != mine[1]:
                return False
            attempts = e.attempts if "attempts" not in e.unset else 1  # as recorded claimed (1)
            table.put(e.changed(**self._stamped(state="pending", owner=None, lease_until=None, not_before=0,
                                                attempts=attempts - 1)))
            return True

        self.pieces.update(piece_of(key), change)

    def finish(self, key: str, result: dict[str, Any], *, failed: bool = False) -> None:
        def change(table: Entries) -> bool:
            e = table.find(key)
            if e is None or e.owner != self.owner:
                return False
            table.put(e.changed(**self._stamped(state="failed" if failed else "done", done_at=self.clock(),
                                                result=_short(result), lease_until=None), forget=("payload",)))
            return True

        self.pieces.update(piece_of(key), change)

    def retry_later(self, key: str, delay: float, result: dict[str, Any] | None = None, *, count: bool = True) -> None:
        def change(table: Entries) -> bool:
            e = table.find(key)
            if e is None or e.owner != self.owner:
                return False
            table.put(e.changed(**self._stamped(state="pending", not_before=self.clock() + delay, lease_until=None,
                                                result=_short(result or {}), attempts=e.attempts - (0 if count else 1))))
            return True

        self.pieces.update(piece_of(key), change)

    def recover(self, *, all_others: bool = False) -> int:
        """Events claimed by a dead process on this host (or, for a new leader, by any other
        process: the old leader no longer acts) go back to pending."""
        held = self.pieces.read_all()
        pieces = {piece_of(k) for k, e in every(held, ("running",)) if e.state == "running" and e.owner != self.owner}
        released = 0
        for index in sorted(pieces):
            count = [0]

            def change(table: Entries) -> bool:
                count[0] = 0
                for key, e in table.items():
                    if e.state == "running" and e.owner != self.owner and (all_others or dead_local_owner(e.owner)):
                        table.put(e.changed(state="pending", lease_until=None, not_before=0))
                        count[0] += 1
                return bool(count[0])

            self.pieces.update(index, change)
            released += count[0]
        return released

    def due(self, *, older_than: float, limit: int) -> list[tuple[str, str]]:
        """As DeliveryLog.due; the same read also refreshes `last_waiting` (no read of its own)."""
        now = self.clock()
        entries = every(self.pieces.read_all(), OPEN)  # (only these are due or waiting: the rest are not typed)
        self.last_waiting = _waiting(entries)
        rows = [(e.received_at, k, e.partition) for k, e in entries
                if (e.state == "pending" and e.not_before <= now
                    and (e.not_before > 0 or e.received_at <= now - older_than))
                or (e.state == "running" and (e.lease_until or 0) < now)]
        return [(k, p) for _, k, p in sorted(rows)[:limit]]

    def state(self, key: str) -> Delivery | None:
        """The delivery `key` as stored; MalformedDelivery (one line, exit 3) when it does not read."""
        return self.pieces.read(piece_of(key)).get(key)

    def waiting(self, *, swept: bool = False) -> int:
        """Events waiting for a retry (pending again after a try that could not act, or being retried);
        `swept` (`due` was just asked): as that sweep's read counted them, with no read of its own."""
        if swept and self.last_waiting is not None:
            return self.last_waiting
        self.last_waiting = _waiting(every(self.pieces.read_all(), OPEN))
        return self.last_waiting

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, e in every(self.pieces.read_all()):
            counts[e.state] = counts.get(e.state, 0) + 1
        return counts

    def prune(self, older_than: float) -> int:
        return 0  # admit() bounds each piece as it writes
