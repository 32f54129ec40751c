"""The calls the delivery-record fixtures (tests/automation/delivery_records.json) were captured
from, on the code before the typed record (dict entries, 696bbb1): one run through the shared
pieces (SharedDeliveryLog on the loopback API server) and one through the SQLite DeliveryLog.
Every kind of entry the two logs write is in it: recorded done at once, pending, recorded
claimed, claimed, finished, failed, handed back for a retry (counted and not), released, and
released by a new leader's recovery."""

from __future__ import annotations

from opsctl.automation.idempotency import NewEvent, alert_event_key, webhook_event_key

T1 = "2026-11-29T12:00:00.500000000Z"
START = 1764417600.25


def alert(fingerprint: str, status: str = "firing", acts: bool = True) -> NewEvent:
    payload = {"status": status, "labels": {"alertname": "AvailabilityBurn", "backend": "databricks",
                                            "severity": "page"},
               "annotations": {"summary": "5xx from the vendor endpoint"}, "starts_at": T1,
               "fingerprint": fingerprint, "group_key": '{}:{alertname="AvailabilityBurn"}',
               "generator_url": "http://prometheus:9090/graph?g0.expr=x"}
    return NewEvent(alert_event_key(fingerprint, T1, status), "alertmanager", "databricks", payload, acts)


def pagerduty(event_id: str) -> NewEvent:
    payload = {"event_id": event_id, "event_type": "incident.acknowledged", "resource_type": "incident",
               "occurred_at": T1, "agent": "PABC123", "data_id": "Q1W2E3", "incident_key": None,
               "status": "acknowledged", "title": "Vendor availability"}
    return NewEvent(webhook_event_key(event_id), "pagerduty", "Q1W2E3", payload)


QUIET = alert("fp-quiet", acts=False)  # no policy matches it: recorded done at once
PENDING = alert("fp-pending")  # recorded, never claimed
CLAIMED = alert("fp-claimed")  # recorded claimed by the leader (shared), claimed, finished
FAILED = alert("fp-failed")  # claimed, finished as failed
RETRIED = alert("fp-retried")  # claimed, handed back for a retry (counted)
BUSY = alert("fp-busy")  # claimed, handed back uncounted (its episode was busy)
RELEASED = alert("fp-released")  # recorded claimed (shared), released: not queued after all
HELD = alert("fp-held")  # recorded claimed (shared), left running in the leader's hand
RUNNING = alert("fp-running")  # claimed, left running
ORPHAN = pagerduty("01DEAD")  # claimed by the old leader, released by the new one's recovery
EVENTS = (QUIET, PENDING, CLAIMED, FAILED, RETRIED, BUSY, RELEASED, HELD, RUNNING, ORPHAN)


def shared_lifecycle(leader, old, clock) -> None:
    """`leader` and `old`: SharedDeliveryLogs of two replicas on one store (leader's term 3)."""
    old.admit([ORPHAN])
    old.claim(ORPHAN.key)
    clock.advance(1)
    leader.admit([QUIET, PENDING, FAILED, RETRIED, BUSY, RUNNING])
    leader.admit([CLAIMED, RELEASED, HELD], claim=True)
    clock.advance(0.5)
    leader.release(RELEASED.key)
    leader.claim(CLAIMED.key)
    for e in (FAILED, RETRIED, BUSY, RUNNING):
        leader.claim(e.key)
    clock.advance(2.25)
    leader.finish(CLAIMED.key, {"actions": [["availability", "failover", "applied"],
                                            ["availability", "page", "applied"]]})
    leader.finish(FAILED.key, {"error": "ActionFailed: pager answered 500", "attempts": 1}, failed=True)
    leader.retry_later(RETRIED.key, 2.0, {"error": "ActionFailed: timed out", "attempts": 1})
    leader.retry_later(BUSY.key, 0.1, {"busy": True}, count=False)
    clock.advance(1)
    leader.recover(all_others=True)


def local_lifecycle(log, clock) -> None:
    """The same on the SQLite log (no claim at admit, so nothing to release: RELEASED stays pending and HELD is claimed;
    ORPHAN is claimed by another owner and released by `recover(all_others=True)`)."""
    log.admit([ORPHAN])
    owner = log.owner
    log.owner = "serve-b:1"
    log.claim(ORPHAN.key)
    log.owner = owner
    clock.advance(1)
    log.admit([QUIET, PENDING, FAILED, RETRIED, BUSY, RUNNING])
    log.admit([CLAIMED, RELEASED, HELD])
    clock.advance(0.5)
    for e in (CLAIMED, FAILED, RETRIED, BUSY, RUNNING, HELD):
        log.claim(e.key)
    clock.advance(2.25)
    log.finish(CLAIMED.key, {"actions": [["availability", "failover", "applied"],
                                         ["availability", "page", "applied"]]})
    log.finish(FAILED.key, {"error": "ActionFailed: pager answered 500", "attempts": 1}, failed=True)
    log.retry_later(RETRIED.key, 2.0, {"error": "ActionFailed: timed out", "attempts": 1})
    log.retry_later(BUSY.key, 0.1, {"busy": True}, count=False)
    clock.advance(1)
    log.recover(all_others=True)
