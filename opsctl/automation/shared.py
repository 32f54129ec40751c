"""Episodes in the shared state store (state.backend kubernetes), for HA `opsctl serve`; the
deliveries' half (SharedDeliveryLog, in pieces) lives in delivery_store.py.

The same operations as the SQLite EpisodeStore (episodes.py), on a document of the StateStore,
each operation one compare-and-swap read-modify-write:

    serve-episodes     {"alerts": {"policy/fingerprint": {target, starts_at, status, updated_at}},
                        "episodes": {id: {policy, target, key, state, incident, ticket, failover,
                        owned, saved, restore_due, ..., owner, lease_until, actions: [...]}}}

The document is typed once where it is read (`episodes_document.EpisodesDocument`: its episodes,
alerts and intents are frozen records) and encoded where it is written; a write changes a draft of
it and writes back every entry it left alone as the object it was read as. A stored entry that
does not read is kept as it is and never acted on (one line logged; `get` of it raises
MalformedEpisode, exit 3); while its state is not "closed", a firing alert of its policy and target
opens no second episode beside it (EpisodeBlocked: the engine tells a human and retries).

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
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.automation.episode_record import Episode, EpisodeBlocked
from opsctl.automation.episodes_document import AlertState, EpisodesDocument, Intent
from opsctl.automation.stored_entry import MalformedEpisode
from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episode_protocol import FiringStart, episode_key, mark_failover_started
from opsctl.automation.episodes import Busy, EpisodeStore
from opsctl.automation.idempotency import DEFAULT_LEASE, dead_local_owner
from opsctl.errors import ConflictError, NoDataError

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
# The fields an episode's entry gains when it opens (its lease and failover mark come in the same
# write); the others are written from the first change that sets them, as the dict code wrote them.
_UNSET_AT_OPENING = frozenset(("incident", "ticket", "failover", "restore_due", "owner", "lease_until", "closed_at",
                               "closed_because", "actions"))


def _size(data: dict[str, object]) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str))


def _restore_due(e: Episode, now: float) -> bool:
    """Whether the episode's restore is due (its hold-down passed) or its restorer's lease ran out."""
    return ((e.state == "restore_pending" and (e.restore_due or 0) <= now)
            or (e.state == "restoring" and (e.lease_until or 0) < now))


def _released(e: Episode) -> Episode:
    """The episode let go of: no owner, and a restore under way is pending again."""
    return e.changed(owner=None, lease_until=None, state="restore_pending" if e.state == "restoring" else e.state)


class SharedEpisodeStore:
    """The EpisodeStore operations on the shared document; the record of actions also stays local.

    Fenced (docs/design.md, "Shapes the open work shares" 2): with `term` given (the elector's), every
    write is refused with FencedError when this replica does not lead (term None) or the document
    names a newer term than its own, and stamps the document with its term, so once a successor
    wrote, nothing a paused leader does lands. An episode's fields are written only by the worker
    holding its lease (its owner). `record_intent` writes the intent an external action (page,
    ticket, note) needs before it may happen."""

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

    def holder(self) -> str:
        """This worker's name on the episodes it leases."""
        return self._me()

    def let_go(self, holder: str | None = None) -> int:
        """After this worker was fenced or could not save: release the episodes `holder` (default:
        this worker) holds (owner-checked, not fenced: it only clears its own hold, so the leader,
        itself later or a successor, takes them up)."""
        me = holder or self._me()
        released = [0]

        def change(doc: EpisodesDocument) -> bool:
            released[0] = 0
            for i, e in doc.episodes.items():
                if e.owner == me and e.state != "closed":
                    doc.episodes[i] = _released(e)
                    released[0] += 1
            return bool(released[0])

        self._update(change, fenced=False)
        return released[0]

    def owns(self, key: str) -> bool:
        """Whether this worker holds the lease of the open episode named `key` (read afresh); True
        when no episode has that key (nothing to tell by)."""
        named = [e for e in self._read().episodes.values() if e.key == key]
        return not named or any(e.owner == self._me() and e.state != "closed" for e in named)

    def record_intent(self, action: str, key: str, detail: str = "") -> None:
        """Before an external action: its intent, written under the term (FencedError when stale)."""
        def change(doc: EpisodesDocument) -> bool:
            intents = doc.intents
            intents[f"{action}:{key}"[:200]] = Intent(action=action, term=doc.term if self.term is None
                                                      else str(self.term()), at=self.clock(), by=self.owner,
                                                      detail=detail[:120])
            if len(intents) > MAX_INTENTS:
                for k in sorted(intents, key=lambda k: intents[k].at or 0)[:len(intents) - MAX_INTENTS]:
                    del intents[k]
            return True

        self._update(change)

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

    def _lease(self, e: Episode) -> Episode:
        now = self.clock()
        me = self._me()
        if e.owner not in (None, me) and (e.lease_until or 0) >= now:
            raise Busy(f"episode {e.id} is being acted on by another worker", holder=e.owner)
        return e.changed(owner=me, lease_until=now + self.lease_seconds)

    def held_here(self, holder: str | None) -> bool:
        """Whether `holder` is another thread of this replica (its maintenance thread or a sibling
        worker), which lets go within this process's own bounded steps."""
        return bool(holder) and str(holder).startswith(f"{self.owner}:") and holder != self._me()

    def _record_alert(self, doc: EpisodesDocument, policy: str, fingerprint: str, target: str, starts_at: str,
                      status: str) -> bool:
        """False for a late copy (see EpisodeStore.record_alert)."""
        key = f"{policy}/{fingerprint}"
        row = doc.alerts.get(key)
        if row is not None and (row.starts_at > starts_at or (row.starts_at == starts_at and row.status == "resolved")):
            return False
        doc.alerts[key] = AlertState(policy=policy, target=target, starts_at=starts_at, status=status,
                                     updated_at=self.clock())
        return True

    # -- the engine's operations ----------------------------------------------------------------

    def begin_firing(self, policy: str, fingerprint: str, target: str, starts_at: str, *,
                     failover: bool = False) -> FiringStart | None:
        result: list[FiringStart] = []

        def change(doc: EpisodesDocument) -> bool:
            result.clear()
            if not self._record_alert(doc, policy, fingerprint, target, starts_at, "firing"):
                return False
            e = doc.open_episode(policy, target)
            if e is None:
                unreadable = doc.unreadable_open(policy, target)
                if unreadable is not None:  # it may hold this incident: never a second episode beside it
                    raise EpisodeBlocked(EPISODES, *unreadable)
                ident = base = episode_key(policy, target, fingerprint, starts_at)
                n = 1
                while ident in doc.episodes or ident in doc.rejected.get("episodes", {}):
                    n += 1
                    ident = f"{base}-{n}"
                e = Episode(id=ident, policy=policy, target=target, key=ident, state="open", opened_at=self.clock(),
                            unset=_UNSET_AT_OPENING)
            e = self._lease(e)
            cancelled = e.state == "restore_pending"
            if cancelled:
                e = e.changed(state="open", restore_due=None)
            moved = {o.target for o in doc.episodes.values()
                     if o.state != "closed" and o.target != target and o.owned and o.failover in ("applied", "dry_run")}
            resumed = False
            if failover:
                e, resumed = mark_failover_started(e)
            e = e.changed(failover=e.failover)
            doc.episodes[str(e.id)] = e
            result.append(FiringStart(e, cancelled, moved, resumed))
            return True

        self._update(change)
        return result[0] if result else None

    def _write_fields(self, episode: Episode, *, release: bool) -> None:
        me = self._me()
        ident = str(episode.id)

        def change(doc: EpisodesDocument) -> bool:
            e = doc.episodes.get(ident)
            if e is None or e.owner != me:  # written only by its owner
                return False
            e = e.changed(incident=episode.incident, ticket=episode.ticket, failover=episode.failover,
                          owned=bool(episode.owned), saved=episode.saved)
            doc.episodes[ident] = e.changed(owner=None, lease_until=None) if release else e
            return True

        self._update(change)

    def save(self, episode: Episode) -> None:
        self._write_fields(episode, release=True)

    def begin_resolved(self, policy: str, fingerprint: str, target: str, starts_at: str, *, restores: bool,
                       hold_down: float, because: Callable[[Episode], str]) -> tuple[Episode, str] | None:
        result: list[tuple[Episode, str]] = []

        def change(doc: EpisodesDocument) -> bool:
            result.clear()
            if not self._record_alert(doc, policy, fingerprint, target, starts_at, "resolved"):
                return False
            found = doc.open_episode(policy, target)
            firing = any(a.policy == policy and a.target == target and a.status == "firing"
                         for a in doc.alerts.values())
            if found is None or found.state != "open" or firing:
                return True  # the alert's state is recorded
            leased = self._lease(found)
            if restores and leased.may_have_moved_traffic:
                doc.episodes[str(found.id)] = leased.changed(
                    state="restore_pending", restore_due=self.clock() + hold_down, owner=None, lease_until=None,
                    restore_refusals=0)  # a new restore step: its first unsuccessful try is noted
                result.append((leased, "restore_pending"))
            else:
                doc.episodes[str(found.id)] = leased.changed(
                    state="closed", closed_at=self.clock(), closed_because=because(leased), restore_due=None,
                    owner=None, lease_until=None)
                result.append((leased, "closed"))
            return True

        self._update(change)
        return result[0] if result else None

    def by_incident(self, keys: list[str]) -> Episode | None:
        found = [e for e in self._read().episodes.values() if e.incident in keys]
        return max(found, key=lambda e: (e.opened_at, str(e.id))) if found else None

    def claim_due_restore(self) -> Episode | None:
        result: list[Episode] = []

        def change(doc: EpisodesDocument) -> bool:
            result.clear()
            now = self.clock()
            due = sorted((e.restore_due or 0, i) for i, e in doc.episodes.items() if _restore_due(e, now))
            if not due:
                return False
            ident = due[0][1]
            e = doc.episodes[ident] = doc.episodes[ident].changed(state="restoring", owner=self._me(),
                                                                  lease_until=now + self.lease_seconds)
            result.append(e)
            return True

        known = self._known
        now = self.clock()
        if known is not None and 0 <= now - known[2] <= REFRESH:
            typed = known[1]  # fresh: no read (another replica's write is seen within REFRESH)
        else:
            typed = self._read()
        if not any(_restore_due(e, now) for e in typed.episodes.values()):
            return None  # the common case: no write, and at most one read every REFRESH seconds
        self._update(change)
        return result[0] if result else None

    def end_restore(self, episode: Episode, *, closed_because: str | None, retry_at: float | None = None) -> None:
        me = self._me()
        ident = str(episode.id)

        def change(doc: EpisodesDocument) -> bool:
            e = doc.episodes.get(ident)
            if e is None or e.owner not in (None, me):  # written only by its owner
                return False
            if closed_because is not None:
                doc.episodes[ident] = e.changed(state="closed", closed_at=self.clock(),
                                                closed_because=closed_because[:500], restore_due=None, owner=None,
                                                lease_until=None)
            else:
                doc.episodes[ident] = e.changed(state="restore_pending", owner=None, lease_until=None,
                                                restore_due=retry_at, restore_refusals=episode.restore_refusals + 1)
            return True

        self._update(change)

    def close_episode(self, episode: Episode, because: str) -> None:
        self.end_restore(episode, closed_because=because)

    def recover(self, *, all_others: bool = False) -> int:
        released = [0]

        def change(doc: EpisodesDocument) -> bool:
            released[0] = 0
            for i, e in doc.episodes.items():
                owner = e.owner
                if not owner or e.state == "closed" or owner.startswith(f"{self.owner}:"):
                    continue
                if all_others or dead_local_owner(owner):
                    doc.episodes[i] = _released(e)
                    released[0] += 1
            return bool(released[0])

        self._update(change, fenced=all_others)  # at start-up (not leading yet): dead local owners only
        return released[0]

    def check(self) -> None:
        sent = self._send()
        doc = self.store.get(EPISODES)
        self._remember(doc, self._parse(doc.data) if doc else None, sent)

    def get(self, episode_id: str) -> Episode:
        doc = self._read()
        episode = doc.episodes.get(episode_id)
        if episode is None:
            problem = next((p for p in doc.problems if f" episode {episode_id}:" in p), None)
            if problem is not None:
                raise MalformedEpisode(problem)
            raise NoDataError(f"{EPISODES}: episode {episode_id}: no such episode")
        return episode

    def episodes(self, *, open_only: bool = False) -> list[Episode]:
        rows = sorted(self._read().episodes.values(), key=lambda e: e.opened_at)
        return [e for e in rows if not open_only or e.state != "closed"]

    # -- the record of actions ----------------------------------------------------------------

    def record_action(self, record: ActionRecord) -> None:
        """The whole record in the local SQLite; a short entry on its episode in the shared document."""
        self.local.record_action(record)
        if record.episode is None:
            return
        ident = str(record.episode)
        entry = record.episode_entry(self.owner)

        def change(doc: EpisodesDocument) -> bool:
            e = doc.episodes.get(ident)
            if e is None:
                return False
            doc.episodes[ident] = e.changed(actions=(*e.actions[-(MAX_EPISODE_ACTIONS - 1):], entry))
            return True

        self._update(change)

    def actions(self, *, policy: str | None = None, action: str | None = None) -> list[ActionRecord]:
        return self.local.actions(policy=policy, action=action)


__all__ = ["SharedEpisodeStore", "EPISODES"]
