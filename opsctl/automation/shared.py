"""Episodes in the shared state store (state.backend kubernetes), for HA `opsctl serve`; the
deliveries' half (SharedDeliveryLog, in pieces) lives in delivery_store.py.

The same operations as the SQLite EpisodeStore (episodes.py), on a document of the StateStore,
each operation one compare-and-swap read-modify-write:

    serve-episodes     {"alerts": {"policy/fingerprint": {target, starts_at, status, updated_at}},
                        "episodes": {id: {policy, target, key, state, incident, ticket, failover,
                        owned, saved, restore_due, ..., owner, lease_until, actions: [...]}}}

The document is bounded: closed episodes are kept MAX_CLOSED deep; each episode keeps its last
MAX_EPISODE_ACTIONS actions; past MAX_BYTES the oldest closed entries go first. The full record of
actions stays in each replica's local SQLite and in its log.

The trigger path is short (issue 22): every write starts from the document as this replica last
read or wrote it (one PUT, no read first), re-reading only when the compare-and-swap says it moved
(a 409) or the change finds nothing to do on what it remembers; the fence, the term stamp and the
owner checks run on whatever the write starts from, and the compare-and-swap makes that the stored
version. The maintenance thread's restore check (`claim_due_restore`, every 0.25 s) answers from
what this replica last saw while that is younger than REFRESH seconds and shows nothing due, so an
idle leader reads the document once every REFRESH seconds instead of four times a second.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, TYPE_CHECKING, Callable

from opsctl.automation.episodes import (
    ActionRecord, Busy, Episode, EpisodeStore, FiringStart, episode_key, mark_failover_started,
)
from opsctl.automation.idempotency import DEFAULT_LEASE, copy_json, dead_local_owner
from opsctl.errors import ConflictError

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.state.base import Document, StateStore

EPISODES = "serve-episodes"
ATTEMPTS = 10  # compare-and-swap rounds before a write gives up (the sender then gets 503 and retries)
MAX_CLOSED = 30
MAX_ALERTS = 500
MAX_EPISODE_ACTIONS = 12
MAX_BYTES = 384 * 1024  # below the store's 512 KiB document bound: the oldest finished entries go first
# Seconds what this replica last read or wrote of the document answers the restore check without a
# read, when it shows nothing due: another replica's write (a leader before this one) is seen within it.
REFRESH = 2.0


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data, separators=(",", ":"), default=str))


_FIELDS = ("policy", "target", "key", "state", "opened_at", "incident", "ticket", "failover", "owned", "saved",
           "restore_due", "restore_refusals", "owner", "lease_until", "closed_at", "closed_because")


MAX_INTENTS = 200  # intents kept (the newest): each external action's, by its idempotency key


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
        # The document as this replica last read or wrote it, and when (self.clock): the next
        # write starts from it, and the restore check answers from it while it is fresh.
        self._known: tuple[Document, float] | None = None
        self._known_lock = threading.Lock()

    # -- plumbing -----------------------------------------------------------------------------

    def _me(self) -> str:
        return f"{self.owner}:{threading.get_ident()}"

    @staticmethod
    def _shaped(data: dict[str, Any] | None) -> dict[str, Any]:
        data = dict(data or {})
        data.setdefault("alerts", {})
        data.setdefault("episodes", {})
        return data

    def _read(self) -> dict[str, Any]:
        doc = self.store.get(EPISODES)
        self._remember(doc)
        return self._shaped(doc.data if doc else None)

    def _remember(self, doc: Document | None) -> None:
        with self._known_lock:
            if doc is None:
                self._known = None
                return
            old = self._known[0].version if self._known else None
            # Two workers' answers may come back out of order: keep the newer (versions the API
            # server hands out are increasing numbers; anything else is taken as it comes).
            if old is not None and old.isdigit() and doc.version.isdigit() and int(doc.version) < int(old):
                return
            self._known = (doc, self.clock())

    def _forget(self) -> None:
        with self._known_lock:
            self._known = None

    def _update(self, change: Callable[[dict[str, Any]], bool], *, fenced: bool = True) -> None:
        def apply(data: dict[str, Any] | None) -> dict[str, Any] | None:
            data = self._shaped(data)
            kept = self._fence(data) if fenced else data.get("term")
            if not change(data):
                return None
            if kept is not None:
                data["term"] = kept
            self._bound(data)
            return data

        known = self._known
        if known is not None:
            # Start from the version this replica last saw: one PUT when nobody wrote since. A change
            # that finds nothing to do there, or someone else's lease (Busy), re-reads (the document
            # may have moved), and so does a compare-and-swap that meets a newer version. FencedError
            # is raised as it is: terms only grow, so a newer term seen here is newer still now.
            doc = known[0]
            try:
                data = apply(copy_json(doc.data))
            except Busy:
                data = None
            if data is not None:
                try:
                    self._remember(self.store.put(EPISODES, data, version=doc.version))
                    return
                except ConflictError:
                    self._forget()
        self._remember(self.store.update(EPISODES, apply, attempts=ATTEMPTS))

    def _fence(self, data: dict[str, Any]) -> str | None:
        if self.term is None:
            return data.get("term")
        from opsctl.fencing import FencedError, fence

        term = self.term()
        if term is None:
            raise FencedError(f"{EPISODES}: this replica no longer leads; it does not write")
        return fence(term, data.get("term"), EPISODES)

    def holder(self) -> str:
        """This worker's name on the episodes it leases."""
        return self._me()

    def let_go(self, holder: str | None = None) -> int:
        """After this worker was fenced or could not save: release the episodes `holder` (default:
        this worker) holds (owner-checked, not fenced: it only clears its own hold, so the leader,
        itself later or a successor, takes them up)."""
        me = holder or self._me()
        released = [0]

        def change(data: dict[str, Any]) -> bool:
            released[0] = 0
            for e in data["episodes"].values():
                if e.get("owner") == me and e["state"] != "closed":
                    e.update(owner=None, lease_until=None,
                             state="restore_pending" if e["state"] == "restoring" else e["state"])
                    released[0] += 1
            return bool(released[0])

        self._update(change, fenced=False)
        return released[0]

    def owns(self, key: str) -> bool:
        """Whether this worker holds the lease of the open episode named `key` (read afresh); True
        when no episode has that key (nothing to tell by)."""
        named = [e for e in self._read()["episodes"].values() if e.get("key") == key]
        return not named or any(e.get("owner") == self._me() and e["state"] != "closed" for e in named)

    def record_intent(self, action: str, key: str, detail: str = "") -> None:
        """Before an external action: its intent, written under the term (FencedError when stale)."""
        def change(data: dict[str, Any]) -> bool:
            intents = data.setdefault("intents", {})
            intents[f"{action}:{key}"[:200]] = {"action": action, "term": data.get("term") if self.term is None
                                                else str(self.term()), "at": self.clock(), "by": self.owner,
                                                "detail": detail[:120]}
            if len(intents) > MAX_INTENTS:
                for k in sorted(intents, key=lambda k: intents[k].get("at") or 0)[:len(intents) - MAX_INTENTS]:
                    del intents[k]
            return True

        self._update(change)

    def _bound(self, data: dict[str, Any]) -> None:
        closed = [i for _, i in sorted((e.get("closed_at") or 0, i) for i, e in data["episodes"].items()
                                       if e["state"] == "closed")]
        for i in closed[:max(0, len(closed) - MAX_CLOSED)]:
            del data["episodes"][i]
        closed = closed[max(0, len(closed) - MAX_CLOSED):]
        alerts = data["alerts"]
        if len(alerts) > MAX_ALERTS:
            resolved = sorted((a["updated_at"], k) for k, a in alerts.items() if a["status"] == "resolved")
            for _, k in resolved[:len(alerts) - MAX_ALERTS]:
                del alerts[k]
        while closed and _size(data) > MAX_BYTES:
            del data["episodes"][closed.pop(0)]

    @staticmethod
    def _episode(i: str, e: dict[str, Any]) -> Episode:
        return Episode(i, e["policy"], e["target"], e["state"], e["opened_at"], e.get("incident"), e.get("ticket"),
                       e.get("failover"), bool(e.get("owned")), e.get("restore_due"), e.get("restore_refusals", 0),
                       dict(e.get("saved") or {}), e.get("key") or i)

    def _lease(self, e: dict[str, Any], ident: str) -> None:
        now = self.clock()
        me = self._me()
        if e.get("owner") not in (None, me) and (e.get("lease_until") or 0) >= now:
            raise Busy(f"episode {ident} is being acted on by another worker", holder=e.get("owner"))
        e.update(owner=me, lease_until=now + self.lease_seconds)

    def held_here(self, holder: str | None) -> bool:
        """Whether `holder` is another thread of this replica (its maintenance thread or a sibling
        worker), which lets go within this process's own bounded steps."""
        return bool(holder) and str(holder).startswith(f"{self.owner}:") and holder != self._me()

    @staticmethod
    def _open(data: dict[str, Any], policy: str, target: str) -> tuple[str, dict[str, Any]] | None:
        for i, e in data["episodes"].items():
            if e["policy"] == policy and e["target"] == target and e["state"] != "closed":
                return i, e
        return None

    def _record_alert(self, data: dict[str, Any], policy: str, fingerprint: str, target: str, starts_at: str,
                      status: str) -> bool:
        """False for a late copy (see EpisodeStore.record_alert)."""
        key = f"{policy}/{fingerprint}"
        row = data["alerts"].get(key)
        if row is not None and (row["starts_at"] > starts_at
                                or (row["starts_at"] == starts_at and row["status"] == "resolved")):
            return False
        data["alerts"][key] = {"policy": policy, "target": target, "starts_at": starts_at, "status": status,
                               "updated_at": self.clock()}
        return True

    # -- the engine's operations ----------------------------------------------------------------

    def begin_firing(self, policy: str, fingerprint: str, target: str, starts_at: str, *,
                     failover: bool = False) -> FiringStart | None:
        result: list[FiringStart] = []

        def change(data: dict[str, Any]) -> bool:
            result.clear()
            if not self._record_alert(data, policy, fingerprint, target, starts_at, "firing"):
                return False
            found = self._open(data, policy, target)
            if found is None:
                ident = base = episode_key(policy, target, fingerprint, starts_at)
                n = 1
                while ident in data["episodes"]:
                    n += 1
                    ident = f"{base}-{n}"
                found = ident, {"policy": policy, "target": target, "key": ident, "state": "open",
                                "opened_at": self.clock(), "owned": False, "saved": {}, "restore_refusals": 0}
                data["episodes"][ident] = found[1]
            ident, e = found
            self._lease(e, ident)
            cancelled = e["state"] == "restore_pending"
            if cancelled:
                e.update(state="open", restore_due=None)
            moved = {o["target"] for o in data["episodes"].values()
                     if o["state"] != "closed" and o["target"] != target and o.get("owned")
                     and o.get("failover") in ("applied", "dry_run")}
            episode = self._episode(ident, e)
            resumed = failover and mark_failover_started(episode)
            e["failover"] = episode.failover
            result.append(FiringStart(episode, cancelled, moved, resumed))
            return True

        self._update(change)
        return result[0] if result else None

    def _write_fields(self, episode: Episode, *, release: bool) -> None:
        me = self._me()

        def change(data: dict[str, Any]) -> bool:
            e = data["episodes"].get(episode.id)
            if e is None or e.get("owner") != me:  # written only by its owner
                return False
            e.update(incident=episode.incident, ticket=episode.ticket, failover=episode.failover,
                     owned=bool(episode.owned), saved=dict(episode.saved))
            if release:
                e.update(owner=None, lease_until=None)
            return True

        self._update(change)

    def save(self, episode: Episode) -> None:
        self._write_fields(episode, release=True)

    def begin_resolved(self, policy: str, fingerprint: str, target: str, starts_at: str, *, restores: bool,
                       hold_down: float, because: Callable[[Episode], str]) -> tuple[Episode, str] | None:
        result: list[tuple[Episode, str]] = []

        def change(data: dict[str, Any]) -> bool:
            result.clear()
            if not self._record_alert(data, policy, fingerprint, target, starts_at, "resolved"):
                return False
            found = self._open(data, policy, target)
            firing = any(a["policy"] == policy and a["target"] == target and a["status"] == "firing"
                         for a in data["alerts"].values())
            if found is None or found[1]["state"] != "open" or firing:
                return True  # the alert's state is recorded
            ident, e = found
            self._lease(e, ident)
            episode = self._episode(ident, e)
            if restores and episode.may_have_moved_traffic:
                e.update(state="restore_pending", restore_due=self.clock() + hold_down, owner=None, lease_until=None,
                         restore_refusals=0)  # a new restore step: its first unsuccessful try is noted
                result.append((episode, "restore_pending"))
            else:
                e.update(state="closed", closed_at=self.clock(), closed_because=because(episode), restore_due=None,
                         owner=None, lease_until=None)
                result.append((episode, "closed"))
            return True

        self._update(change)
        return result[0] if result else None

    def by_incident(self, keys: list[str]) -> Episode | None:
        found = [(e["opened_at"], i, e) for i, e in self._read()["episodes"].items() if e.get("incident") in keys]
        if not found:
            return None
        _, i, e = max(found)
        return self._episode(i, e)

    def claim_due_restore(self) -> Episode | None:
        result: list[Episode] = []

        def change(data: dict[str, Any]) -> bool:
            result.clear()
            now = self.clock()
            due = sorted((e.get("restore_due") or 0, i) for i, e in data["episodes"].items()
                         if (e["state"] == "restore_pending" and (e.get("restore_due") or 0) <= now)
                         or (e["state"] == "restoring" and (e.get("lease_until") or 0) < now))
            if not due:
                return False
            ident = due[0][1]
            e = data["episodes"][ident]
            e.update(state="restoring", owner=self._me(), lease_until=now + self.lease_seconds)
            result.append(self._episode(ident, e))
            return True

        known = self._known
        now = self.clock()
        if known is not None and 0 <= now - known[1] <= REFRESH:
            data = self._shaped(known[0].data)  # fresh: no read (another replica's write is seen within REFRESH)
        else:
            data = self._read()
        if not self._restore_due(data, now):
            return None  # the common case: no write, and at most one read every REFRESH seconds
        self._update(change)
        return result[0] if result else None

    @staticmethod
    def _restore_due(data: dict[str, Any], now: float) -> bool:
        """Whether an episode's restore is due (its hold-down passed) or its restorer's lease ran out."""
        return any((e["state"] == "restore_pending" and (e.get("restore_due") or 0) <= now)
                   or (e["state"] == "restoring" and (e.get("lease_until") or 0) < now)
                   for e in data["episodes"].values())

    def end_restore(self, episode: Episode, *, closed_because: str | None, retry_at: float | None = None) -> None:
        me = self._me()

        def change(data: dict[str, Any]) -> bool:
            e = data["episodes"].get(episode.id)
            if e is None or e.get("owner") not in (None, me):  # written only by its owner
                return False
            if closed_because is not None:
                e.update(state="closed", closed_at=self.clock(), closed_because=closed_because[:500],
                         restore_due=None, owner=None, lease_until=None)
            else:
                e.update(state="restore_pending", owner=None, lease_until=None, restore_due=retry_at,
                         restore_refusals=episode.restore_refusals + 1)
            return True

        self._update(change)

    def close_episode(self, episode: Episode, because: str) -> None:
        self.end_restore(episode, closed_because=because)

    def recover(self, *, all_others: bool = False) -> int:
        released = [0]

        def change(data: dict[str, Any]) -> bool:
            released[0] = 0
            for e in data["episodes"].values():
                owner = e.get("owner")
                if not owner or e["state"] == "closed" or owner.startswith(f"{self.owner}:"):
                    continue
                if all_others or dead_local_owner(owner):
                    e.update(owner=None, lease_until=None,
                             state="restore_pending" if e["state"] == "restoring" else e["state"])
                    released[0] += 1
            return bool(released[0])

        self._update(change, fenced=all_others)  # at start-up (not leading yet): dead local owners only
        return released[0]

    def check(self) -> None:
        self._remember(self.store.get(EPISODES))

    def get(self, episode_id: str) -> Episode:
        return self._episode(episode_id, self._read()["episodes"][episode_id])

    def episodes(self, *, open_only: bool = False) -> list[Episode]:
        rows = sorted(self._read()["episodes"].items(), key=lambda item: item[1]["opened_at"])
        return [self._episode(i, e) for i, e in rows if not open_only or e["state"] != "closed"]

    # -- the record of actions ----------------------------------------------------------------

    def record_action(self, record: ActionRecord) -> None:
        """The whole record in the local SQLite; a short entry on its episode in the shared document."""
        self.local.record_action(record)
        if record.episode is None:
            return
        def change(data: dict[str, Any]) -> bool:
            e = data["episodes"].get(record.episode)
            if e is None:
                return False
            e["actions"] = (e.get("actions") or [])[-(MAX_EPISODE_ACTIONS - 1):] + [record.episode_entry(self.owner)]
            return True

        self._update(change)

    def actions(self, *, policy: str | None = None, action: str | None = None) -> list[ActionRecord]:
        return self.local.actions(policy=policy, action=action)


__all__ = ["SharedEpisodeStore", "EPISODES"]
