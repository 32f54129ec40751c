"""The shared delivery log's pieces (state.backend kubernetes): SHARDS documents of the StateStore,
`serve-deliveries-<i>`, an event in the piece its key hashes to (crc32), each read and written
whole by compare-and-swap (`Pieces`); delivery_store.py does the log's operations on them.

    serve-deliveries-<i>   {"events": {key: entry}}   (entry: delivery_record.Delivery.stored())

Reads of every piece (due, counts) run in parallel, so a slow API server costs one round trip, not
SHARDS; concurrent reads of one piece share one GET. Every write of a piece starts from the version
this replica last read or wrote of it (one PUT, no read first), re-reading only when the
compare-and-swap says it moved (issue 22). Each piece's entries are typed lazily (`Entries`), and
the records typed are kept per piece across its versions, so an entry is typed once, not on every
read and write of its piece; the sweep types only the pending and running ones (`every(.., states)`).

Bounded per piece (`bound`, as each admit writes): a finished event keeps its key and outcome (no
payload) for RETENTION or until MAX_FINISHED / SHARDS newer ones in its piece; past MAX_BYTES the
oldest finished entries go first, but never one finished within RECENT (its notification may still
be retried: a forgotten key would be acted on again).
"""

from __future__ import annotations

import json
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TYPE_CHECKING, Callable, Iterable

from opsctl.automation.delivery_record import FINISHED, Delivery, Entries, MalformedDelivery
from opsctl.errors import ConflictError
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


def _events(data: dict[str, Any], index: int) -> dict[str, Any]:
    """A piece's table of events as stored; a piece whose `events` is not an object is refused
    (MalformedDelivery, one line): nothing would be safe to write over it."""
    events = data.setdefault("events", {})
    if type(events) is not dict:
        raise MalformedDelivery(f"{piece_name(index)}: events: expected an object, got {type(events).__name__}")
    return events


def every(pieces: Iterable[Entries], states: tuple[str, ...] | None = None) -> list[tuple[str, Delivery]]:
    """Every entry of the pieces that reads (with `states`: stored in one of them), typed."""
    return [item for entries in pieces for item in entries.items(states)]


def bound(table: Entries, now: float, fits: bool = False) -> None:
    """Drop finished entries past RETENTION or past the count; past MAX_BYTES (measured unless
    `fits`: known below it) the oldest of the rest not finished within RECENT."""
    finished = sorted([(e.done_at or 0, k) for k, e in table.items() if e.state in FINISHED])
    # Keys finished within RECENT stay whatever the bounds: the sender may still be retrying the
    # notification they came in, and a forgotten key would be admitted and acted on again.
    evictable = [k for at, k in finished if at < now - RECENT]
    expired = {k for at, k in finished if at < now - RETENTION}
    excess = len(finished) - len(expired) - max(1, MAX_FINISHED // SHARDS)
    drop = expired | set([k for k in evictable if k not in expired][:max(0, excess)])
    for k in drop:
        table.pop(k)
    oldest = [k for k in evictable if k not in drop]
    while oldest and not fits and _size(table.raw) > MAX_BYTES:  # large payloads pending: keep fewer finished keys
        for k in oldest[:100]:
            table.pop(k)
        oldest = oldest[100:]


class Pieces:
    """The pieces of one replica's delivery log: reads (shared while in flight), the version of each
    this replica last read or wrote, and the compare-and-swap writes that start from it."""

    def __init__(self, store: "StateStore"):
        self.store = store
        self._pool: ThreadPoolExecutor | None = None
        self._flights_lock = threading.Lock()
        self._flights: dict[int, Future[Entries]] = {}
        # Each piece as this replica last read or wrote it: the next write starts from it (no read).
        self._known: dict[int, Document] = {}
        # The encoded size of a known piece, when this replica wrote it (the document it belongs to).
        self._known_size: dict[int, tuple[Document, int]] = {}
        self._generation: dict[int, int] = {}  # per piece: writes answered (reads older than one are not kept)
        self._known_lock = threading.Lock()
        # Per piece: key -> (the stored entry, its record), shared by every read and write of it.
        self._typed: dict[int, dict[str, tuple[Any, Delivery]]] = {}

    def entries(self, index: int, events: dict[str, Any]) -> Entries:
        """`events` (a piece's table, this caller's own) typed lazily, with the piece's records."""
        typed = self._typed.get(index)
        if typed is None or len(typed) > 2 * len(events) + 64:  # keys long gone from the piece: start afresh
            typed = self._typed[index] = {}
        return Entries(events, typed, piece_name(index))

    def read(self, index: int) -> Entries:
        with self._known_lock:
            generation = self._generation.get(index, 0)
        doc = self.store.get(piece_name(index))
        if doc is None:
            self.remember(index, doc, since=generation)
            return self.entries(index, {})
        with self._known_lock:
            known = self._known.get(index)
        if known is not None and known.version == doc.version:
            doc = known  # the version this replica knows: its entries are the objects typed already
        # A read that was in flight while this replica wrote the piece may answer the version before
        # that write: it is not remembered over the newer one (the next write would meet 409).
        self.remember(index, doc, since=generation)
        return self.entries(index, dict(_events(dict(doc.data), index)))

    def remember(self, index: int, doc: Document | None, *, since: int | None = None,
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
            elif doc is None or self._known_size.get(index, (None, 0))[0] is not doc:
                self._known_size.pop(index, None)  # (a read of the version written keeps its size)

    def read_shared(self, index: int) -> Entries:
        """One piece's events; readers arriving while a read of it is in flight share that read (for
        what tolerates an answer a moment old: the duplicate check, which admit repeats under CAS,
        and the sweep)."""
        with self._flights_lock:
            found = self._flights.get(index)
            leader = found is None
            flight: Future[Entries] = Future() if found is None else found
            if leader:
                self._flights[index] = flight
        if leader:
            try:
                flight.set_result(self.read(index))
            except BaseException as exc:
                flight.set_exception(exc)
            finally:
                with self._flights_lock:
                    self._flights.pop(index, None)
        shared = flight.result()
        return Entries(dict(shared.raw), shared.typed, shared.where)

    def read_all(self, indexes: Iterable[int] | None = None) -> list[Entries]:
        """The events of the given pieces (default: all), read in parallel."""
        pieces = sorted(set(range(SHARDS) if indexes is None else indexes))
        if len(pieces) == 1:
            return [self.read_shared(pieces[0])]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(SHARDS, thread_name_prefix="opsctl-deliveries")
        return list(self._pool.map(self.read_shared, pieces))

    def update(self, index: int, change: Callable[[Entries], bool], base: list[int | None] | None = None) -> None:
        """Run change(events) on one piece under compare-and-swap; it returns False to write nothing.
        A change changes an entry only by putting a new record in its place (copy on write). `base`,
        when given, is set to the encoded size of the piece the change starts from, if known, before
        it runs."""
        def apply(data: dict[str, Any] | None) -> dict[str, Any] | None:
            data = data or {}
            return data if change(self.entries(index, _events(data, index))) else None

        with self._known_lock:
            known = self._known.get(index)
            sized = self._known_size.get(index)
        if known is not None:
            # Start from the version this replica last saw: one PUT when nobody wrote the piece since.
            # A change that finds nothing to do there re-reads (the piece may have moved), and so
            # does a compare-and-swap that meets a newer version. The change works on a shallow copy
            # (an entry is replaced by a new one as it changes), and the document written is handed
            # over to the store as it is (encoded once here, no parse of the answer): issue 22.
            if base is not None:
                base[0] = sized[1] if sized is not None and sized[0] is known else None
            start = dict(known.data)
            start["events"] = dict(_events(start, index))
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
                    self.remember(index, doc, size=len(text))
                    return
        if base is not None:
            base[0] = None
        self.remember(index, self.store.update(piece_name(index), apply, attempts=ATTEMPTS))


__all__ = ["ATTEMPTS", "DELIVERIES", "DOCUMENTS", "MAX_BYTES", "MAX_FINISHED", "Pieces", "RECENT", "RETENTION", "SHARDS",
           "bound", "every", "piece_name", "piece_of"]
