"""Deliveries in the shared state store, in pieces, as several replicas use them (on the local
backend of the same StateStore protocol the ConfigMaps implement): each event admitted and claimed
once, a new leader takes over what the old one held, every piece stays bounded, and a notification
of thousands of alerts is recorded whole (issue 22 item 6)."""

from __future__ import annotations

import json

import pytest

from opsctl.automation import delivery_pieces
from opsctl.automation.delivery_pieces import piece_name
from opsctl.automation.delivery_store import DeliveryLogFull, SharedDeliveryLog
from opsctl.automation.idempotency import NewEvent
from opsctl.clock import SimClock
from opsctl.state.base import MAX_DOCUMENT_BYTES
from opsctl.state.local import LocalStateStore


def event(key: str, needs_action: bool = True, payload: dict | None = None) -> NewEvent:
    return NewEvent(key, "alertmanager", "databricks", payload or {"status": "firing", "labels": {"a": "b"}},
                    needs_action)


@pytest.fixture
def store(tmp_path):
    return LocalStateStore(tmp_path / "state")




def stored(store) -> dict:
    """Every piece's events together, read here from the documents by name."""
    events = {}
    for i in range(delivery_pieces.SHARDS):
        doc = store.get(f"serve-deliveries-{i}")
        events.update(doc.data["events"] if doc else {})
    return events


def test_an_event_recorded_by_two_replicas_is_admitted_and_claimed_once(store):
    clock = SimClock(1000)
    a = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    b = SharedDeliveryLog(store, clock=clock.now, owner="serve-b:1")
    assert [e.key for e in a.admit([event("k1")])] == ["k1"]
    assert b.admit([event("k1")]) == []  # the retry that reached the other replica
    assert b.unseen([event("k1"), event("k2")]) == [event("k2")]
    claimed = a.claim("k1")
    assert claimed is not None and claimed.payload["labels"] == {"a": "b"} and claimed.attempts == 1
    assert b.claim("k1") is None
    b.finish("k1", {"x": 1})  # not b's to finish
    assert a.state("k1").state == "running"
    a.finish("k1", {"actions": []})
    row = b.state("k1")
    assert row is not None and row.state == "done" and row.payload is None and "payload" in row.unset  # not kept once done
    assert a.claim("k1") is None


def test_the_leaders_term_is_stamped_on_what_it_claims_and_finishes(store):
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1", term=lambda: "serve-a@3")
    log.admit([event("k1")])
    assert "term" not in stored(store)["k1"], "recording is no act of the leader's"
    log.claim("k1")
    assert stored(store)["k1"]["term"] == "serve-a@3"
    log.finish("k1", {"actions": []})
    assert stored(store)["k1"]["term"] == "serve-a@3"


def test_a_new_leader_releases_what_the_old_one_held_and_takes_it(store):
    clock = SimClock(1000)
    old = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1", lease=300)
    new = SharedDeliveryLog(store, clock=clock.now, owner="serve-b:1", lease=300)
    old.admit([event(f"k{i}") for i in range(20)])  # in several pieces
    for i in range(20):
        assert old.claim(f"k{i}") is not None
    assert new.due(older_than=0, limit=100) == []  # running under a live lease
    assert new.recover(all_others=True) == 20
    assert sorted(new.due(older_than=0, limit=100)) == sorted((f"k{i}", "databricks") for i in range(20))
    assert new.claim("k7").attempts == 2


def test_events_spread_over_the_pieces_by_key(store):
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    log.admit([event(f"k{i}") for i in range(400)])
    sizes = [len(store.get(f"serve-deliveries-{i}").data["events"]) for i in range(delivery_pieces.SHARDS)]
    assert sum(sizes) == 400 and min(sizes) > 0
    assert log.counts() == {"pending": 400}


def test_every_piece_stays_bounded_the_newest_finished_kept(store, monkeypatch):
    monkeypatch.setattr(delivery_pieces, "MAX_FINISHED", 50 * delivery_pieces.SHARDS)  # 50 per piece
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    log.admit([event(f"old{i}", needs_action=False) for i in range(80)])
    clock.advance(delivery_pieces.RETENTION + 1)
    for n in range(0, 2400, 200):
        clock.advance(delivery_pieces.RECENT + 1)  # finished long enough ago to be forgotten
        log.admit([event(f"k{n + i}", needs_action=False) for i in range(200)])
    for i in range(delivery_pieces.SHARDS):
        keys = store.get(piece_name(i)).data["events"]
        assert len(keys) == 50 and not any(k.startswith("old") for k in keys)
        # The newest 50 of this piece's keys (each piece's own, computed from the keys' order of arrival).
        mine = [f"k{j}" for j in range(2400) if delivery_pieces.piece_of(f"k{j}") == i]
        assert set(keys) == set(mine[-50:])


def test_a_notification_of_1200_alerts_is_recorded_whole_in_bounded_pieces(store):
    # About 400 bytes an alert, as Alertmanager sends them: 1,200 are ~480 kB, past one document's bound.
    def payload(i: int) -> dict:
        return {"status": "firing", "fingerprint": f"{i:016x}", "starts_at": "2026-11-29T12:00:00.500000000Z",
                "labels": {"alertname": "SloBurnRatePage", "severity": "page", "slo": "databricks-availability",
                           "backend": "databricks", "service": "llm-inference", "pod": f"proxy-{i:05d}"},
                "annotations": {"summary": "databricks-availability burning", "description": "x" * 150},
                "group_key": '{}:{alertname="SloBurnRatePage"}', "generator_url": "http://prometheus.example/graph"}

    events = [event(f"{i:064x}", payload=payload(i)) for i in range(1200)]
    total = len(json.dumps([e.payload for e in events]))
    assert total > MAX_DOCUMENT_BYTES, "the notification is larger than one document may be"
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    assert len(log.admit(events)) == 1200
    assert len(stored(store)) == 1200
    for i in range(delivery_pieces.SHARDS):
        assert len(json.dumps(store.get(piece_name(i)).data)) < delivery_pieces.MAX_BYTES
    assert len(log.due(older_than=0, limit=5000)) == 1200
    assert log.admit(events) == [], "Alertmanager's retry of it is a duplicate"


def test_when_pending_payloads_overflow_a_piece_what_fits_is_recorded_and_the_retry_takes_the_rest(store, monkeypatch):
    monkeypatch.setattr(delivery_pieces, "MAX_BYTES", 8_000)
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    events = [event(f"e{i:03d}", payload={"description": "y" * 1000}) for i in range(120)]  # ~15 kB a piece
    with pytest.raises(DeliveryLogFull):
        log.admit(events)
    first = stored(store)
    assert 0 < len(first) < 120
    for i in range(delivery_pieces.SHARDS):
        assert len(json.dumps(store.get(piece_name(i)).data["events"], separators=(",", ":"))) <= 8_000
    # The leader acts on what was recorded (finishing drops the payload); the sender's retries
    # record the rest: no permanent refusal.
    acted: set[str] = set()
    for _attempt in range(20):
        for key, entry in stored(store).items():
            if entry["state"] == "pending" and log.claim(key) is not None:
                log.finish(key, {"actions": []})
                acted.add(key)
        try:
            log.admit(events)
            break
        except DeliveryLogFull:
            pass
    else:
        raise AssertionError("the retries never recorded the whole notification")
    pending = {k for k, e in stored(store).items() if e["state"] == "pending"}
    assert acted | pending == {e.key for e in events}, "every alert recorded, and acted on or waiting"
    assert acted & pending == set()


def test_keys_finished_within_recent_are_not_pushed_out_by_a_large_write(store, monkeypatch):
    monkeypatch.setattr(delivery_pieces, "MAX_BYTES", 20_000)
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    log.admit([event(f"f{i:03d}", needs_action=False) for i in range(400)])
    big = NewEvent("big", "alertmanager", "databricks", {"annotations": {"description": "x" * 19_000}})
    with pytest.raises(DeliveryLogFull):
        log.admit([big])
    assert len(stored(store)) == 400, "every recently finished key kept: a retry of theirs is a duplicate"
    clock.advance(delivery_pieces.RECENT + 1)
    assert [e.key for e in log.admit([big])] == ["big"]


def test_large_pending_payloads_push_out_the_oldest_finished_keys_not_the_write(store, monkeypatch):
    monkeypatch.setattr(delivery_pieces, "MAX_BYTES", 40_000)
    clock = SimClock(1000)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    for n in range(0, 400, 100):
        clock.advance(1)
        log.admit([event(f"f{n + i:03d}", needs_action=False) for i in range(100)])
    clock.advance(delivery_pieces.RECENT + 1)
    big = NewEvent("big", "alertmanager", "databricks", {"annotations": {"description": "x" * 20_000}})
    assert [e.key for e in log.admit([big])] == ["big"]
    piece = store.get(piece_name(delivery_pieces.piece_of("big"))).data["events"]
    assert len(json.dumps(piece, separators=(",", ":"))) <= 40_000
    assert piece["big"]["state"] == "pending"
    finished = sorted(k for k in piece if k != "big")
    mine = [f"f{i:03d}" for i in range(400) if delivery_pieces.piece_of(f"f{i:03d}") == delivery_pieces.piece_of("big")]
    assert finished and finished == mine[len(mine) - len(finished):]  # the newest kept


def test_deliveries_recorded_at_once_share_writes_on_the_api_server(kube_api):
    """Group commit, seen on the loopback API server: while one write of a piece is held in flight,
    19 more deliveries to that piece queue, and one more write records them all."""
    import threading

    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube
    from tests.conftest import wait_until

    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace="ops", timeout=10)),
                                 namespace="ops", service="llm-inference")
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1")
    keys = [k for k in (f"key{i}" for i in range(400)) if delivery_pieces.piece_of(k) == 3][:20]
    kube_api.inject(verb="create|update", resource="configmaps", hold=True, times=1)
    results: list = []

    def deliver(key: str) -> None:
        results.append(log.admit([event(key)]))

    first = threading.Thread(target=deliver, args=(keys[0],))
    first.start()
    wait_until(lambda: kube_api.held() == 1, what="the first write to be in flight")
    others = [threading.Thread(target=deliver, args=(k,)) for k in keys[1:]]
    for t in others:
        t.start()
    wait_until(lambda: len(log._waiting.get(3, [])) == 19, what="19 deliveries queued behind it")
    kube_api.release()
    for t in [first, *others]:
        t.join(timeout=30)
    assert sorted(e.key for r in results for e in r) == sorted(keys)
    writes = [r for r in kube_api.writes() if r.path.endswith("serve-deliveries-3")
              or (r.method == "POST" and (r.body or {}).get("metadata", {}).get("name", "").endswith("deliveries-3"))]
    assert len(writes) == 2, [(w.method, w.path) for w in writes]
    assert set(log.unseen([event(k) for k in keys])) == set()
