"""Episodes in the shared state store, as several replicas use them (on the local backend of the
same StateStore protocol the ConfigMaps implement); the deliveries' tests are in
test_delivery_store.py."""

from __future__ import annotations

import pytest

from opsctl.automation import shared_access
from opsctl.automation.episodes import Busy
from opsctl.automation.shared import SharedEpisodeStore
from opsctl.clock import SimClock
from opsctl.state.local import LocalStateStore


@pytest.fixture
def store(tmp_path):
    return LocalStateStore(tmp_path / "state")


def test_two_replicas_open_one_episode_and_a_held_one_is_busy_until_released(store, tmp_path):
    clock = SimClock(1000)
    a = SharedEpisodeStore(store, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:1")
    b = SharedEpisodeStore(store, local_path=tmp_path / "b.sqlite", clock=clock.now, owner="serve-b:1")
    start = a.begin_firing("availability", "f1", "databricks", "2026-11-29T12:00:00.500000000Z")
    assert start is not None and not start.cancelled
    with pytest.raises(Busy):
        b.begin_firing("availability", "f2", "databricks", "2026-11-29T12:00:01.000000000Z")
    episode = start.episode
    episode = episode.changed(failover="applied", owned=True, incident="inc-1")
    a.save(episode)
    again = b.begin_firing("availability", "f2", "databricks", "2026-11-29T12:00:01.000000000Z")
    assert again.episode.id == episode.id and again.episode.incident == "inc-1"
    b.save(again.episode)
    # A late copy of an earlier firing changes nothing.
    assert b.begin_firing("availability", "f1", "databricks", "2026-11-29T11:00:00.000000000Z") is None
    # Both alerts resolve (one at each replica): the episode waits out the hold-down, then restores.
    because = lambda e: "resolved"  # noqa: E731
    assert a.begin_resolved("availability", "f1", "databricks", "2026-11-29T12:00:00.500000000Z",
                            restores=True, hold_down=60, because=because) is None  # f2 still fires
    ended = b.begin_resolved("availability", "f2", "databricks", "2026-11-29T12:00:01.000000000Z",
                             restores=True, hold_down=60, because=because)
    assert ended[1] == "restore_pending"
    assert a.claim_due_restore() is None
    clock.advance(61)
    due = a.claim_due_restore()
    assert due.id == episode.id and b.claim_due_restore() is None
    a.end_restore(due, closed_because="restore applied")
    assert [e.state for e in b.episodes()] == ["closed"]
    assert a.by_incident(["inc-1"]).id == episode.id


def test_a_new_leader_releases_an_episode_the_old_one_held(store, tmp_path):
    clock = SimClock(1000)
    a = SharedEpisodeStore(store, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:1")
    b = SharedEpisodeStore(store, local_path=tmp_path / "b.sqlite", clock=clock.now, owner="serve-b:1")
    start = a.begin_firing("availability", "f1", "databricks", "2026-11-29T12:00:00.500000000Z", failover=True)
    assert start.episode.failover == "started" and not start.resumed  # then serve-a dies mid-failover
    with pytest.raises(Busy):
        b.begin_firing("availability", "f1", "databricks", "2026-11-29T12:00:00.500000000Z", failover=True)
    assert b.recover(all_others=True) == 1
    taken = b.begin_firing("availability", "f1", "databricks", "2026-11-29T12:00:00.500000000Z", failover=True)
    assert taken.episode.failover == "started" and taken.resumed


class Leading:
    """A replica's term as its elector reports it: set, or None once it no longer leads."""

    def __init__(self, text: str | None):
        self.set(text)

    def set(self, text: str | None) -> None:
        from opsctl.fencing import Term

        self.term = Term.parse(text) if text else None

    def __call__(self):
        return self.term


def test_once_a_newer_term_wrote_the_episodes_a_stale_leaders_writes_and_intents_are_refused(store, tmp_path):
    from opsctl.fencing import FencedError

    clock = SimClock(1000)
    old, new = Leading("serve-a@0"), Leading("serve-b@1")
    a = SharedEpisodeStore(store, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:1", term=old)
    b = SharedEpisodeStore(store, local_path=tmp_path / "b.sqlite", clock=clock.now, owner="serve-b:1", term=new)
    start = a.begin_firing("p", "fp", "databricks", "2026-11-29T12:00:00Z", failover=True)
    a.record_intent("page", "dedup-1")
    assert store.get(shared_access.EPISODES).data["term"] == "serve-a@0"
    # B takes over (it releases what A held) and writes under its newer term.
    assert b.recover(all_others=True) == 1
    assert store.get(shared_access.EPISODES).data["term"] == "serve-b@1"
    with pytest.raises(FencedError):
        a.record_intent("ticket", "ticket-1")  # the stale leader's intent: its ticket never happens
    start.episode = start.episode.changed(failover="applied")
    with pytest.raises(FencedError):
        a.save(start.episode)
    data = store.get(shared_access.EPISODES).data
    assert list(data["intents"]) == ["page:dedup-1"]
    assert next(iter(data["episodes"].values()))["failover"] == "started"
    b.record_intent("ticket", "ticket-1")
    assert store.get(shared_access.EPISODES).data["intents"]["ticket:ticket-1"]["term"] == "serve-b@1"


def test_a_replica_that_no_longer_leads_writes_no_episode_and_only_the_owner_saves_one(store, tmp_path):
    from opsctl.fencing import FencedError

    clock = SimClock(1000)
    term = Leading("serve-a@0")
    a = SharedEpisodeStore(store, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:1", term=term)
    b = SharedEpisodeStore(store, local_path=tmp_path / "b.sqlite", clock=clock.now, owner="serve-b:1",
                           term=Leading("serve-a@0"))  # same term, another worker: not the episode's owner
    start = a.begin_firing("p", "fp", "databricks", "2026-11-29T12:00:00Z", failover=True)
    start.episode = start.episode.changed(failover="applied")
    b.save(start.episode)  # not its owner: nothing written
    assert next(iter(store.get(shared_access.EPISODES).data["episodes"].values()))["failover"] == "started"
    term.set(None)  # A lost the Lease (could not renew within renew_deadline)
    with pytest.raises(FencedError):
        a.save(start.episode)
    term.set("serve-a@0")
    a.save(start.episode)
    assert next(iter(store.get(shared_access.EPISODES).data["episodes"].values()))["failover"] == "applied"


def test_only_the_worker_holding_an_episode_owns_it(store, tmp_path):
    clock = SimClock(1000)
    a = SharedEpisodeStore(store, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:1")
    b = SharedEpisodeStore(store, local_path=tmp_path / "b.sqlite", clock=clock.now, owner="serve-b:1")
    start = a.begin_firing("p", "fp", "databricks", "2026-11-29T12:00:00Z", failover=True)
    key = start.episode.key
    assert a.owns(key) and not b.owns(key)
    assert b.recover(all_others=True) == 1  # B leads now: A's hold is released
    assert not a.owns(key)
    assert a.owns("no-such-episode")  # nothing to tell by: not refused
