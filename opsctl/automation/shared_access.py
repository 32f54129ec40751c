"""How the shared episodes store (shared.py) reads and writes `serve-episodes`: the document as this
replica last read or wrote it, one compare-and-swap write per change, the fence, and the bounds.

The document is bounded: closed episodes are kept MAX_CLOSED deep; each episode keeps its last
MAX_EPISODE_ACTIONS actions; past MAX_BYTES the oldest closed entries go first. The full record of
actions stays in each replica's local SQLite and in its log.

The trigger path is short (issue 22): every write starts from the document as this replica last
read or wrote it (one PUT, no read first), re-reading only when the compare-and-swap says it moved
(a 409) or the change finds nothing to do on what it remembers; the fence, the term stamp and the
owner checks run on whatever the write starts from, and the compare-and-swap makes that the stored
version; a read that finds the version this replica holds keeps its typed document (nothing is
parsed again). The maintenance thread's restore check (`claim_due_restore`, every 0.25 s) answers from
what this replica last saw while that is younger than REFRESH seconds and shows nothing due, so an
idle leader reads the document once every REFRESH seconds instead of four times a second.
Answers to two requests may come back out of order: the one sent later is kept (this replica's own
send sequence); resourceVersions are opaque and never compared for order (issue 22 item 5).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.automation.episode_record import EpisodeBlocked
from opsctl.automation.episodes import Busy, EpisodeStore
from opsctl.automation.episodes_document import EpisodesDocument
from opsctl.automation.idempotency import DEFAULT_LEASE
from opsctl.errors import ConflictError

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.state.base import Document, StateStore

log = logging.getLogger("opsctl.automation")

EPISODES = "serve-episodes"
ATTEMPTS = 10  # compare-and-swap rounds before a write gives up (the sender then gets 503 and retries)
MAX_CLOSED = 30
MAX_ALERTS = 500
MAX_EPISODE_ACTIONS = 12
MAX_BYTES = 384 * 1024  # below the store's 512 KiB document bound: the oldest finished entries go first
# Seconds what this replica last read or wrote of the document answers the restore check without a
# read, when it shows nothing due: another replica's write (a leader before this one) is seen within it.
REFRESH = 2.0
MAX_INTENTS = 200  # intents kept (the newest): each external action's, by its idempotency key


def _size(data: dict[str, object]) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str))


class SharedAccess:
    """The plumbing of SharedEpisodeStore (its base): the store, the known document and its
    compare-and-swap writes (`_update`), the fence (`_fence`) and the bounds (`_bound`)."""

    def __init__(self, store: "StateStore", *, local_path: Path, clock: Callable[[], float], owner: str,
                 lease: float = DEFAULT_LEASE, term: "Callable[[], Term | None] | None" = None):
        self.store = store
        self.clock = clock
        self.owner = owner
        self.lease_seconds = lease
        self.term = term  # None: unfenced (one replica); else the elector's term, read at every write
        self.local = EpisodeStore(local_path, clock=clock, owner=owner)  # its actions table only
        # The document as this replica last read or wrote it (its version, typed) and when
        # (self.clock): the next write starts from it, and the restore check answers from it while it is fresh.
        self._known: tuple[str, EpisodesDocument, float] | None = None
        self._known_lock = threading.Lock()
        # Answers are ordered by when their request was sent (this replica's own sequence, taken
        # before each read or write), never by their resourceVersions, which are opaque.
        self._sent = itertools.count(1)
        self._known_sent = 0  # the sequence number of the request whose answer `_known` holds (or dropped)
        self._told: set[str] = set()  # problems of stored entries already logged (each once)

    # -- plumbing -----------------------------------------------------------------------------

    def _me(self) -> str:
        return f"{self.owner}:{threading.get_ident()}"

    def _parse(self, data: dict[str, object] | None) -> EpisodesDocument:
        typed = EpisodesDocument.parse(data, EPISODES)
        for problem in typed.problems:
            if problem not in self._told and len(self._told) < 1000:
                self._told.add(problem)
                log.warning("%s (kept as stored, not acted on)", problem)
        return typed

    def _send(self) -> int:
        """The sequence number of a request about to be sent (this replica's own order)."""
        return next(self._sent)

    def _read(self) -> EpisodesDocument:
        sent = self._send()
        doc = self.store.get(EPISODES)
        known = self._known
        if doc is not None and known is not None and doc.version == known[0]:
            typed = known[1]  # the version this replica last read or wrote: the same document, typed already
        else:
            typed = self._parse(doc.data if doc else None)
        self._remember(doc, typed, sent)
        return typed

    def _remember(self, doc: "Document | None", typed: EpisodesDocument | None, sent: int) -> None:
        """Keep the answer to the request sent as `sent`, unless a later-sent request's answer (or
        conflict) came back first: two workers' answers may come back out of order, and the one sent
        later is the newer. resourceVersions are opaque and never compared for order."""
        with self._known_lock:
            if sent < self._known_sent:
                return
            self._known_sent = sent
            if doc is None or typed is None:
                self._known = None
                return
            self._known = (doc.version, typed, self.clock())

    def _forget(self, sent: int) -> None:
        """The request sent as `sent` met a newer version: what this replica knows is stale."""
        with self._known_lock:
            self._known_sent = max(self._known_sent, sent)
            self._known = None

    def _update(self, change: Callable[[EpisodesDocument], bool], *, fenced: bool = True) -> None:
        """One compare-and-swap write of `change`, made on a draft of the document (False: nothing to write)."""
        def apply(base: EpisodesDocument) -> tuple[EpisodesDocument, dict[str, object]] | None:
            kept = self._fence(base) if fenced else base.term
            draft = base.draft()
            if not change(draft):
                return None
            if kept is not None:
                draft = draft.changed_term(kept)
            data = self._bound(draft)
            return draft, data

        known = self._known
        if known is not None:
            # Start from the version this replica last saw: one PUT when nobody wrote since. A change
            # that finds nothing to do there, or someone else's lease (Busy), re-reads (the document
            # may have moved), and so does a compare-and-swap that meets a newer version. FencedError
            # is raised as it is: terms only grow, so a newer term seen here is newer still now.
            version, typed, _ = known
            try:
                made = apply(typed)
            except (Busy, EpisodeBlocked):  # decided on what is stored now, not on what this replica remembers
                made = None
            if made is not None:
                draft, data = made
                sent = self._send()
                try:
                    doc = self.store.put(EPISODES, data, version=version)
                except ConflictError:
                    self._forget(sent)
                else:
                    self._remember(doc, draft.written(data), sent)
                    return
        written: list[EpisodesDocument] = []

        def raw_change(data: dict[str, object] | None) -> dict[str, object] | None:
            written.clear()
            base = self._parse(data)
            made = apply(base)
            if made is None:
                written.append(base)
                return None
            written.append(made[0].written(made[1]))
            return made[1]

        sent = self._send()
        stored = self.store.update(EPISODES, raw_change, attempts=ATTEMPTS)
        self._remember(stored, written[-1] if written else None, sent)

    def _fence(self, data: EpisodesDocument) -> str | None:
        if self.term is None:
            return data.term
        from opsctl.fencing import FencedError, fence

        term = self.term()
        if term is None:
            raise FencedError(f"{EPISODES}: this replica no longer leads; it does not write")
        return fence(term, data.term, EPISODES)

    def _bound(self, doc: EpisodesDocument) -> dict[str, object]:
        """Drop what the bounds say from the draft `doc` and encode it (what is written)."""
        episodes = doc.episodes
        closed = [i for _, i in sorted((e.closed_at or 0, i) for i, e in episodes.items() if e.state == "closed")]
        for i in closed[:max(0, len(closed) - MAX_CLOSED)]:
            del episodes[i]
        closed = closed[max(0, len(closed) - MAX_CLOSED):]
        alerts = doc.alerts
        if len(alerts) > MAX_ALERTS:
            resolved = sorted((a.updated_at, k) for k, a in alerts.items() if a.status == "resolved")
            for _, k in resolved[:len(alerts) - MAX_ALERTS]:
                del alerts[k]
        data = doc.encode()
        written = data["episodes"]
        assert isinstance(written, dict)  # encode() writes the section as an object
        while closed and _size(data) > MAX_BYTES:
            i = closed.pop(0)
            del episodes[i], written[i]
        return data


__all__ = ["ATTEMPTS", "EPISODES", "MAX_ALERTS", "MAX_BYTES", "MAX_CLOSED", "MAX_EPISODE_ACTIONS", "MAX_INTENTS",
           "REFRESH", "SharedAccess"]
