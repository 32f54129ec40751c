"""opsctl.automation.episodes: alert state, one open episode per policy and target, leases, the
hold-down before a restore, and the record of actions, on a real SQLite file."""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3

import pytest

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episode_protocol import mark_failover_started
from opsctl.automation.episodes import Busy, EpisodeStore
from opsctl.clock import SimClock

T0 = "2026-11-18T10:00:00.000000000Z"
T1 = "2026-11-18T10:05:00.000000000Z"  # a later firing of the same alert (sorts after T0 as text)


def expected_key(*parts: str) -> str:
    """The documented derivation: sha256 over the unit-separated parts, first 20 hex digits."""
    return hashlib.sha256("\x1f".join(("episode", *parts)).encode()).hexdigest()[:20]


@pytest.fixture
def clock():
    return SimClock(1000)


@pytest.fixture
def store(tmp_path, clock):
    return EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner="replica-a:1", lease=60)


def test_the_first_firing_alert_opens_an_episode_named_after_it(store):
    start = store.begin_firing("failover", "fp1", "databricks", T0)
    ep = start.episode
    assert (ep.policy, ep.target, ep.state, ep.opened_at) == ("failover", "databricks", "open", 1000.0)
    assert ep.key == expected_key("failover", "databricks", "fp1", T0)
    assert start.cancelled is False and start.moved_away == set() and start.resumed is False
    store.save(ep)
    # a second alert about the same target joins the open episode: one open episode per policy and target
    again = store.begin_firing("failover", "fp2", "databricks", T0)
    assert again.episode.id == ep.id
    assert [e.id for e in store.episodes(open_only=True)] == [ep.id]


def test_a_leased_episode_is_busy_for_another_replica_until_saved_or_the_lease_expires(tmp_path, store, clock):
    other = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner="replica-b:1", lease=60)
    first = store.begin_firing("failover", "fp1", "databricks", T0)
    with pytest.raises(Busy):
        other.begin_firing("failover", "fp2", "databricks", T0)
    store.save(first.episode)
    assert other.begin_firing("failover", "fp2", "databricks", T0).episode.id == first.episode.id
    # b holds it now; a waits until b's 60 s lease has passed
    with pytest.raises(Busy):
        store.begin_firing("failover", "fp3", "databricks", T0)
    clock.advance(61)
    assert store.begin_firing("failover", "fp3", "databricks", T0).episode.id == first.episode.id


def test_late_and_replayed_copies_of_an_alert_are_stale(store):
    store.save(store.begin_firing("p", "fp1", "databricks", T1).episode)
    assert store.begin_firing("p", "fp1", "databricks", T0) is None  # an earlier firing arriving late
    assert store.begin_resolved("p", "fp1", "databricks", T0, restores=False, hold_down=0,
                                because=lambda e: "x") is None
    done = store.begin_resolved("p", "fp1", "databricks", T1, restores=False, hold_down=0, because=lambda e: "done")
    assert done is not None and done[1] == "closed"
    # resolved is final for one firing: a late firing copy of T1 reopens nothing
    assert store.begin_firing("p", "fp1", "databricks", T1) is None
    assert store.episodes(open_only=True) == []


def test_the_episode_waits_for_its_last_firing_alert_then_closes_when_nothing_moved(store):
    store.save(store.begin_firing("p", "fp1", "databricks", T0).episode)
    store.save(store.begin_firing("p", "fp2", "databricks", T0).episode)
    assert store.begin_resolved("p", "fp1", "databricks", T0, restores=True, hold_down=300,
                                because=lambda e: "x") is None  # fp2 still fires
    episode, state = store.begin_resolved("p", "fp2", "databricks", T0, restores=True, hold_down=300,
                                          because=lambda e: f"resolved, incident {e.incident}")
    assert state == "closed"  # no failover was applied, so nothing to restore
    (closed,) = store.episodes()
    row = store.db.conn.execute("SELECT closed_because, closed_at FROM episodes WHERE id = ?", (closed.id,)).fetchone()
    assert closed.state == "closed" and row["closed_because"] == "resolved, incident None" and row["closed_at"] == 1000


def test_an_owned_failover_waits_out_the_hold_down_and_a_new_firing_cancels_the_restore(store, clock):
    start = store.begin_firing("p", "fp1", "databricks", T0, failover=True)
    assert start.episode.failover == "started"
    start.episode = start.episode.changed(failover="applied", owned=True, incident="INC-1")
    start.episode = start.episode.changed(saved={"before": {"databricks": 80, "internal": 20}})
    store.save(start.episode)
    assert store.by_incident(["nope", "INC-1"]).id == start.episode.id

    episode, state = store.begin_resolved("p", "fp1", "databricks", T0, restores=True, hold_down=300,
                                          because=lambda e: "x")
    assert state == "restore_pending"
    assert store.next_restore_due() == 1300.0
    assert store.claim_due_restore() is None  # the hold-down has not passed
    refire = store.begin_firing("p", "fp1", "databricks", T1)
    assert refire.cancelled is True and refire.episode.state == "open" and refire.episode.saved == start.episode.saved
    assert store.next_restore_due() is None


def test_a_due_restore_is_claimed_once_and_a_refused_one_waits_again(store, clock):
    start = store.begin_firing("p", "fp1", "databricks", T0, failover=True)
    start.episode = start.episode.changed(failover="applied", owned=True)
    store.save(start.episode)
    store.begin_resolved("p", "fp1", "databricks", T0, restores=True, hold_down=300, because=lambda e: "x")
    clock.advance(300)
    claimed = store.claim_due_restore()
    assert claimed is not None and claimed.state == "restoring"
    assert store.claim_due_restore() is None  # leased to this worker for 60 s
    store.end_restore(claimed, closed_because=None, retry_at=1600.0)
    again = store.get(claimed.id)
    assert (again.state, again.restore_due, again.restore_refusals) == ("restore_pending", 1600.0, 1)
    clock.advance(300)
    claimed = store.claim_due_restore()
    store.end_restore(claimed, closed_because="restored " + "x" * 600)
    row = store.db.conn.execute("SELECT state, closed_because FROM episodes WHERE id = ?", (claimed.id,)).fetchone()
    assert row["state"] == "closed" and len(row["closed_because"]) == 500


def test_a_restorer_that_died_leaves_a_restore_that_is_due_again_after_its_lease(store, clock):
    start = store.begin_firing("p", "fp1", "databricks", T0, failover=True)
    start.episode = start.episode.changed(failover="applied", owned=True)
    store.save(start.episode)
    store.begin_resolved("p", "fp1", "databricks", T0, restores=True, hold_down=0, because=lambda e: "x")
    assert store.claim_due_restore().state == "restoring"
    clock.advance(61)  # the restorer's 60 s lease ran out without an end_restore
    assert store.claim_due_restore() is not None


def test_other_targets_whose_traffic_moved_are_reported(store):
    a = store.begin_firing("p", "fa", "databricks", T0, failover=True)
    a.episode = a.episode.changed(failover="applied", owned=True)
    store.save(a.episode)
    b = store.begin_firing("p", "fb", "openai", T0, failover=True)
    b.episode = b.episode.changed(failover="noop", owned=False)  # nothing moved for this one
    store.save(b.episode)
    c = store.begin_firing("p", "fc", "internal", T0)
    assert c.moved_away == {"databricks"}


def test_a_failover_started_by_a_worker_that_died_is_resumed(tmp_path, store, clock):
    first = store.begin_firing("p", "fp1", "databricks", T0, failover=True)
    assert first.resumed is False  # the worker dies here, leaving failover = 'started'
    clock.advance(61)
    successor = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner="replica-b:1", lease=60)
    again = successor.begin_firing("p", "fp2", "databricks", T0, failover=True)
    assert again.resumed is True and again.episode.failover == "started"


def test_mark_failover_started_on_a_finished_failover_changes_nothing(store):
    ep = store.begin_firing("p", "fp1", "databricks", T0).episode
    done = ep.changed(failover="applied")
    assert mark_failover_started(done) == (done, False)
    started, resumed = mark_failover_started(ep.changed(failover=None))
    assert (started.failover, resumed) == ("started", False)
    assert mark_failover_started(started) == (started, True)


def test_recover_releases_leases_of_a_gone_process_on_this_host_and_requeues_its_restore(tmp_path, clock):
    # The owner of a process that just started on this host, as after a container restart
    # (its pid is this process's own, which dead_local_owner counts as gone).
    owner = f"{socket.gethostname()}:{os.getpid()}"
    old = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner=owner, lease=600)
    held = old.begin_firing("p", "fp1", "databricks", T0).episode  # leased, never saved
    other = old.begin_firing("p", "fp2", "internal", T0, failover=True).episode
    other = other.changed(failover="applied", owned=True)
    old.save(other)
    old.begin_resolved("p", "fp2", "internal", T0, restores=True, hold_down=0, because=lambda e: "x")
    assert old.claim_due_restore().id == other.id  # restoring, leased

    fresh = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner=owner, lease=600)
    assert fresh.recover() == 2
    rows = {r["id"]: r for r in fresh.db.conn.execute("SELECT id, state, owner, lease_until FROM episodes")}
    assert (rows[held.id]["state"], rows[held.id]["owner"]) == ("open", None)
    assert (rows[other.id]["state"], rows[other.id]["owner"]) == ("restore_pending", None)


def test_a_new_leader_takes_over_every_other_holders_lease(tmp_path, store, clock):
    held = store.begin_firing("p", "fp1", "databricks", T0).episode  # replica-a holds it
    leader = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner="replica-b:1", lease=60)
    assert leader.recover() == 0  # replica-a is on no host of ours: not known to be gone
    assert leader.recover(all_others=True) == 1
    assert leader.begin_firing("p", "fp2", "databricks", T0).episode.id == held.id


def test_state_written_before_the_key_column_existed_is_upgraded(tmp_path, clock):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE episodes (id INTEGER PRIMARY KEY AUTOINCREMENT, policy TEXT NOT NULL, target TEXT NOT NULL,
            state TEXT NOT NULL, opened_at REAL NOT NULL, incident TEXT, ticket TEXT, failover TEXT,
            owned INTEGER NOT NULL DEFAULT 0, saved TEXT, restore_due REAL,
            restore_refusals INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until REAL, closed_at REAL,
            closed_because TEXT);
        INSERT INTO episodes (policy, target, state, opened_at, incident) VALUES ('p', 'databricks', 'open', 5, 'INC-9');
    """)
    conn.commit()
    conn.close()
    store = EpisodeStore(path, clock=clock.now, owner="replica-a:1")
    (old,) = store.episodes()
    assert (old.key, old.incident, old.state) == (str(old.id), "INC-9", "open")  # no key: named by its id
    start = store.begin_firing("p", "fp1", "databricks", T0)
    assert start.episode.id == old.id


def test_actions_are_recorded_and_filtered_with_long_details_bounded(store):
    for action, policy in [("page", "p1"), ("failover", "p1"), ("page", "p2")]:
        store.record_action(ActionRecord(event_key="ek", policy=policy, episode=1, action=action, status="applied",
                                         detail="d" * 3000, dry_run=False, received_at=1.0, started_at=2.0,
                                         finished_at=3.0))
    assert [(a.policy, a.action) for a in store.actions()] == [("p1", "page"), ("p1", "failover"), ("p2", "page")]
    assert [a.policy for a in store.actions(action="page")] == ["p1", "p2"]
    assert [a.action for a in store.actions(policy="p1", action="failover")] == ["failover"]
    first = store.actions()[0]
    assert len(first.detail) == 2000 and first.finished_at == 3.0 and first.dry_run is False
    store.check()


def test_the_local_store_never_says_a_busy_episode_is_held_here(store):
    """One process keeps the SQLite episodes and its Busy names no holder, so a worker never waits
    for a sibling here (service._handle asks every store the same question)."""
    held = store.begin_firing("p", "fp1", "databricks", T0).episode
    import threading

    other = threading.Thread(target=lambda: pytest.raises(Busy, store.begin_firing, "p", "fp2", "databricks", T0))
    other.start()
    other.join(10)
    assert held.owner == f"replica-a:1:{threading.get_ident()}"
    assert store.held_here(held.owner) is False and store.held_here(None) is False
    assert store.held_here("replica-a:1:12345") is False


def test_both_stores_answer_every_question_of_the_episodes_protocol_with_its_parameters():
    """service.py asks the store it has (`Episodes`), never probes it with hasattr: the hand-back
    after a failure (`holder`, `let_go`) is on the protocol, as `held_here` is."""
    import inspect

    from opsctl.automation.episode_protocol import Episodes
    from opsctl.automation.shared import SharedEpisodeStore

    asked = {n for n, v in vars(Episodes).items() if callable(v) and not n.startswith("_")}
    assert {"holder", "let_go", "held_here"} <= asked
    for store_class in (EpisodeStore, SharedEpisodeStore):
        for name in asked:
            want = list(inspect.signature(getattr(Episodes, name)).parameters)
            assert list(inspect.signature(getattr(store_class, name)).parameters) == want, (store_class, name)


def test_the_local_store_hands_nothing_back_and_lets_go_only_of_its_own_episodes(store, clock):
    """Locally a worker's save releases its episode, so `holder()` is None and service._give_back
    writes nothing more; `let_go` itself is owner-checked (a restore under way is pending again)."""
    import threading

    assert store.holder() is None
    mine = store.begin_firing("p", "fp1", "databricks", T0).episode
    theirs: list = []
    other = threading.Thread(target=lambda: theirs.append(store.begin_firing("p", "fp2", "internal", T0).episode))
    other.start()
    other.join(10)
    assert store.let_go() == 1
    assert store.get(mine.id).owner is None and store.get(theirs[0].id).owner == theirs[0].owner
    assert store.let_go(theirs[0].owner) == 1 and store.get(theirs[0].id).owner is None
    assert store.let_go() == 0
