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

How the document is read, written, fenced and bounded (the trigger path's one PUT per write) is
shared_access.py, the base of SharedEpisodeStore.
"""

from __future__ import annotations

from typing import Callable

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episode_protocol import FiringStart, episode_key, mark_failover_started
from opsctl.automation.episode_record import Episode, EpisodeBlocked
from opsctl.automation.episodes import Busy
from opsctl.automation.episodes_document import AlertState, EpisodesDocument, Intent
from opsctl.automation.idempotency import dead_local_owner
from opsctl.automation.shared_access import (
    EPISODES, MAX_EPISODE_ACTIONS, MAX_INTENTS, REFRESH, SharedAccess,
)
from opsctl.automation.stored_entry import MalformedEpisode
from opsctl.errors import NoDataError

# The fields an episode's entry gains when it opens (its lease and failover mark come in the same
# write); the others are written from the first change that sets them, as the dict code wrote them.
_UNSET_AT_OPENING = frozenset(("incident", "ticket", "failover", "restore_due", "owner", "lease_until", "closed_at",
                               "closed_because", "actions"))


def _restore_due(e: Episode, now: float) -> bool:
    """Whether the episode's restore is due (its hold-down passed) or its restorer's lease ran out."""
    return ((e.state == "restore_pending" and (e.restore_due or 0) <= now)
            or (e.state == "restoring" and (e.lease_until or 0) < now))


def _released(e: Episode) -> Episode:
    """The episode let go of: no owner, and a restore under way is pending again."""
    return e.changed(owner=None, lease_until=None, state="restore_pending" if e.state == "restoring" else e.state)


class SharedEpisodeStore(SharedAccess):
    """The EpisodeStore operations on the shared document; the record of actions also stays local.

    Fenced (docs/decisions/0006-leader-term-and-fencing.md): with `term` given (the elector's), every
    write is refused with FencedError when this replica does not lead (term None) or the document
    names a newer term than its own, and stamps the document with its term, so once a successor
    wrote, nothing a paused leader does lands. An episode's fields are written only by the worker
    holding its lease (its owner). `record_intent` writes the intent an external action (page,
    ticket, note) needs before it may happen."""

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
