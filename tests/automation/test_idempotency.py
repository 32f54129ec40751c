"""The delivery log: each event is recorded once and claimed by exactly one worker, across processes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from opsctl.automation.idempotency import DeliveryLog, NewEvent, alert_event_key, webhook_event_key
from opsctl.clock import SimClock


def _event(key: str) -> NewEvent:
    return NewEvent(key, "alertmanager", "databricks", {"status": "firing"})


def test_the_key_covers_fingerprint_start_and_the_alerts_own_status():
    base = alert_event_key("f", "2026-11-29T12:00:00.000000000Z", "firing")
    assert base == alert_event_key("f", "2026-11-29T12:00:00.000000000Z", "firing")
    others = {alert_event_key("f2", "2026-11-29T12:00:00.000000000Z", "firing"),
              alert_event_key("f", "2026-11-29T12:00:01.000000000Z", "firing"),
              alert_event_key("f", "2026-11-29T12:00:00.000000000Z", "resolved"),
              webhook_event_key("f")}
    assert base not in others and len(others) == 4
    # No separator games: ("ab", "c") and ("a", "bc") are different events.
    assert alert_event_key("ab", "c", "firing") != alert_event_key("a", "bc", "firing")


def test_an_event_is_admitted_once(tmp_path):
    log = DeliveryLog(tmp_path / "a.sqlite", clock=SimClock(1000).now)
    assert [e.key for e in log.admit([_event("k1"), _event("k2")])] == ["k1", "k2"]
    assert [e.key for e in log.admit([_event("k2"), _event("k3")])] == ["k3"]
    assert log.counts() == {"pending": 3}


def test_a_claim_is_exclusive_until_its_lease_expires(tmp_path):
    clock = SimClock(1000)
    a = DeliveryLog(tmp_path / "a.sqlite", clock=clock.now, owner="replica-a", lease=60)
    b = DeliveryLog(tmp_path / "a.sqlite", clock=clock.now, owner="replica-b", lease=60)
    a.admit([_event("k")])
    assert a.claim("k") is not None
    assert b.claim("k") is None
    clock.advance(61)  # replica a died mid-action: its lease runs out
    assert b.due(older_than=5, limit=10) == [("k", "databricks")]
    reclaimed = b.claim("k")
    assert reclaimed is not None and reclaimed.attempts == 2
    a.finish("k", {"late": True})  # the old owner's late finish does not overwrite the new owner's work
    assert a.state("k").state == "running" and a.state("k").owner == "replica-b"
    b.finish("k", {"actions": []})
    assert b.state("k").state == "done"
    assert b.claim("k") is None


def test_a_busy_retry_does_not_use_up_an_attempt(tmp_path):
    clock = SimClock(1000)
    log = DeliveryLog(tmp_path / "a.sqlite", clock=clock.now)
    log.admit([_event("k")])
    for _ in range(5):
        claimed = log.claim("k")
        assert claimed is not None and claimed.attempts == 1
        log.retry_later("k", 0.5, count=False)
        assert log.claim("k") is None  # not due yet
        clock.advance(1)


def _claim_in_process(path: str, owner: str, results) -> None:
    log = DeliveryLog(Path(path), owner=owner)
    results.put((owner, log.claim("shared") is not None))


def test_concurrent_replicas_sharing_the_state_claim_an_event_exactly_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    DeliveryLog(path).admit([_event("shared")])
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_claim_in_process, args=(str(path), f"replica-{i}", results)) for i in range(6)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert sorted(won for _, won in outcomes) == [False] * 5 + [True]


def test_copy_json_is_a_deep_copy_of_json_data_and_leaves_the_original_alone():
    from opsctl.automation.idempotency import copy_json

    original = {"episodes": {"e1": {"saved": {"before": {"databricks": 80}}, "actions": [{"at": 1.5}]}}, "n": None,
                "ok": True}
    copied = copy_json(original)
    assert copied == original
    copied["episodes"]["e1"]["saved"]["before"]["databricks"] = 0
    copied["episodes"]["e1"]["actions"].append({"at": 2.0})
    assert original == {"episodes": {"e1": {"saved": {"before": {"databricks": 80}}, "actions": [{"at": 1.5}]}},
                        "n": None, "ok": True}
