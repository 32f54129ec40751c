"""Episodes in the shared state store, as several replicas use them (on the local backend of the
same StateStore protocol the ConfigMaps implement); the deliveries' tests are in
test_delivery_store.py."""

from __future__ import annotations

import pytest

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
    episode.failover, episode.owned, episode.incident = "applied", True, "inc-1"
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
