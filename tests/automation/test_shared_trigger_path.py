"""The team-mode trigger's episode path, counted on the loopback Kubernetes API (issue 22, the p99
target): the `serve-episodes` document is written from the version this replica last read or wrote
(one PUT, a re-read only on a 409), and the maintenance thread's restore check, every 0.25 s, reads
it only once every REFRESH seconds while nothing is due. Requests are counted
(tests/fakes/kube_api.py records each one), never timed.

Before this change every episode write was a GET and a PUT, and every restore check a GET (two
while a restore was pending, not yet due)."""

from __future__ import annotations

import pytest

from opsctl.automation import shared_access
from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episodes import Busy
from opsctl.automation.shared import SharedEpisodeStore
from opsctl.automation.shared_access import EPISODES
from opsctl.clock import SimClock
from opsctl.fencing import FencedError, Term

NS = "ops"
DOC = f"opsctl-llm-inference-{EPISODES}"
STARTS = "2026-11-29T12:00:00.500000000Z"
TICK = 0.25  # the maintenance thread's period (service._maintain: self._stop.wait(0.25))


def kube_store(api):
    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube

    return KubernetesStateStore(Kube(KubernetesSettings(host=api.url, namespace=NS, timeout=10)),
                                namespace=NS, service="llm-inference")


def on_episodes(api, since: int) -> list[str]:
    """The method of every request to the episodes document after the first `since` requests."""
    return [r.method for r in api.requests[since:] if r.path.endswith(f"/{DOC}")]


def leader(api, tmp_path, clock, owner="serve-a", term=3) -> SharedEpisodeStore:
    return SharedEpisodeStore(kube_store(api), local_path=tmp_path / f"{owner}.sqlite", clock=clock.now,
                              owner=f"{owner}:1", term=lambda: Term(owner, term))


def seeded(api) -> None:
    """The document exists (as after the first episode), so writes are replaces."""
    kube_store(api).put(EPISODES, {"alerts": {}, "episodes": {}}, version=None)


def test_the_trigger_episode_path_is_one_put_per_write_and_one_owner_read(kube_api, tmp_path):
    """The writes the engine makes for a trigger with a failover and a page (policy._firing, the
    FencedExecutor): begin_firing (the failover marked started in the same write), the owner check
    before the split write, the failover's action, the page's intent and action, the save."""
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    assert a.claim_due_restore() is None  # the maintenance thread's check: the read the writes start from
    before = len(kube_api.requests)

    start = a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    assert start is not None and start.episode.failover == "started"
    assert on_episodes(kube_api, before) == ["PUT"]  # before: GET, PUT
    assert a.owns(start.episode.key)  # read afresh: the failover's writer checks it still holds the episode
    assert on_episodes(kube_api, before) == ["PUT", "GET"]  # what comes before the failover starts
    common = dict(event_key="k1", policy="availability", episode=start.episode.id, dry_run=False,
                  received_at=1000.0, started_at=1000.0, finished_at=1000.0)
    a.record_action(ActionRecord(action="failover", status="applied", detail="0/100", **common))
    a.record_intent("page", "opsctl-automation-availability-databricks", "failed over")
    a.record_action(ActionRecord(action="page", status="applied", detail="inc-1", **common))
    episode = start.episode
    episode = episode.changed(failover="applied", owned=True, incident="inc-1")
    a.save(episode)

    # Before: five read-modify-writes (GET, PUT each) and the owner read, 11 requests; now 6.
    assert on_episodes(kube_api, before) == ["PUT", "GET", "PUT", "PUT", "PUT", "PUT"]
    assert len(kube_api.requests) - before == 6  # nothing else reached the API server either
    stored = kube_store(kube_api).get(EPISODES).data
    e = stored["episodes"][episode.id]
    assert (e["failover"], e["incident"], e["owner"], stored["term"]) == ("applied", "inc-1", None, "serve-a@3")
    assert [x["action"] for x in e["actions"]] == ["failover", "page"]
    assert "page:opsctl-automation-availability-databricks" in stored["intents"]


@pytest.mark.parametrize("pending", [False, True], ids=["nothing-pending", "restore-not-due-yet"])
def test_an_idle_minute_of_restore_checks_reads_the_document_once_every_refresh(kube_api, tmp_path, pending):
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    if pending:  # a restore waits out an hour's hold-down: nothing is due within the minute
        a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
        episode = a.get(next(iter(a._read().episodes)))
        episode = episode.changed(failover="applied", owned=True)
        a.save(episode)
        assert a.begin_resolved("availability", "f1", "databricks", STARTS, restores=True, hold_down=3600,
                                because=lambda e: "resolved")[1] == "restore_pending"
    clock.advance(60)  # what this replica last wrote is old: the first check reads
    before = len(kube_api.requests)
    ticks = int(60 / TICK)
    for _ in range(ticks):
        clock.advance(TICK)
        assert a.claim_due_restore() is None
    # One read answers the check then and for as long as it is fresh: REFRESH / TICK more ticks.
    # 240 ticks in groups of 9 (2.0 / 0.25 + 1): 27 reads. Before: 240 (480 with a restore pending).
    per_read = int(shared_access.REFRESH / TICK) + 1
    assert on_episodes(kube_api, before) == ["GET"] * -(-ticks // per_read) == ["GET"] * 27
    assert len(kube_api.requests) - before == 27


def test_a_restore_another_replica_made_pending_is_claimed_within_refresh(kube_api, tmp_path):
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    b = leader(kube_api, tmp_path, clock, owner="serve-b", term=2)  # the leader before a
    assert a.claim_due_restore() is None  # a's fresh read: nothing pending
    start = b.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    start.episode = start.episode.changed(failover="applied", owned=True)
    b.save(start.episode)
    b.begin_resolved("availability", "f1", "databricks", STARTS, restores=True, hold_down=0,
                     because=lambda e: "resolved")
    assert a.claim_due_restore() is None  # a's read is fresh and showed nothing: no read yet
    clock.advance(shared_access.REFRESH + TICK)
    before = len(kube_api.requests)
    claimed = a.claim_due_restore()
    assert claimed is not None and claimed.id == start.episode.id and claimed.state == "restoring"
    assert on_episodes(kube_api, before) == ["GET", "PUT"]  # the read, then the claim from it
    stored = kube_store(kube_api).get(EPISODES).data
    assert (stored["episodes"][claimed.id]["owner"], stored["term"]) == (a.holder(), "serve-a@3")


def test_a_write_from_a_stale_version_is_read_again_and_both_writes_stay(kube_api, tmp_path):
    """A stale start costs a 409 and a re-read (the store checks its own write, then reads to retry)."""
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    b = leader(kube_api, tmp_path, clock, owner="serve-b", term=3)  # same term: only the versions race
    a.claim_due_restore()
    b.record_intent("ticket", "t-1", "by b")  # moves the document a last read
    before = len(kube_api.requests)
    a.record_intent("page", "p-1", "by a")
    assert on_episodes(kube_api, before) == ["PUT", "GET", "GET", "PUT"]
    assert {"ticket:t-1", "page:p-1"} <= set(kube_store(kube_api).get(EPISODES).data["intents"])


def test_a_newer_term_written_since_still_fences_a_write_from_a_stale_version(kube_api, tmp_path):
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock, term=3)
    b = leader(kube_api, tmp_path, clock, owner="serve-b", term=4)  # a's successor
    a.claim_due_restore()
    b.record_intent("ticket", "t-1", "by b")
    with pytest.raises(FencedError):
        a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    stored = kube_store(kube_api).get(EPISODES).data
    assert stored["term"] == "serve-b@4" and stored["episodes"] == {}


def test_a_lease_seen_held_in_a_stale_version_is_read_again_before_busy(kube_api, tmp_path):
    """Busy only from the stored document: a's remembered copy shows b's hold, b has let go since."""
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    b = leader(kube_api, tmp_path, clock, owner="serve-b")
    start = b.begin_firing("availability", "f1", "databricks", STARTS)
    assert a.claim_due_restore() is None  # a remembers the episode held by b
    with pytest.raises(Busy):
        a.begin_firing("availability", "f2", "databricks", STARTS)  # the stored one is held too: Busy
    b.save(start.episode)  # b lets go
    again = a.begin_firing("availability", "f2", "databricks", STARTS)
    assert again is not None and again.episode.id == start.episode.id
    assert kube_store(kube_api).get(EPISODES).data["episodes"][start.episode.id]["owner"] == a.holder()


def test_a_read_finding_the_version_this_replica_last_wrote_keeps_its_typed_document(kube_api, tmp_path):
    """The owner check right after begin_firing reads the document this replica just wrote: the
    same version, so the typed document it holds answers (one GET, nothing parsed again); a version
    another replica wrote is read afresh."""
    seeded(kube_api)
    clock = SimClock(1000)
    a = leader(kube_api, tmp_path, clock)
    start = a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    kept = a._read()
    before = len(kube_api.requests)
    assert a._read() is kept and a.owns(start.episode.key)
    assert on_episodes(kube_api, before) == ["GET", "GET"]
    other = leader(kube_api, tmp_path, clock, owner="serve-b", term=3)
    other.record_intent("ticket", "t-9")  # another writer: a new version
    fresh = a._read()
    assert fresh is not kept and "ticket:t-9" in fresh.intents and start.episode.id in fresh.episodes
