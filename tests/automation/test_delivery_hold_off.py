"""The trigger path in team mode (issue 22 item 9), in the delivery pieces, counted on the loopback
Kubernetes API (tests/fakes/kube_api.py records each request; never timed):

- while this replica has actionable work in progress, a write recording only alerts no policy
  matches goes behind (bounded), or rides along with an actionable write of its piece;
- a read of a piece that was in flight while this replica wrote it does not replace the newer
  version it keeps, so the next write is still one PUT (it was a 409, a re-read and a PUT)."""

from __future__ import annotations

import threading

import pytest

from opsctl.automation.delivery_pieces import piece_name, piece_of
from opsctl.automation.delivery_store import SharedDeliveryLog
from opsctl.automation.idempotency import NewEvent
from opsctl.clock import SimClock
from tests.automation.test_delivery_trigger_path import kube_store, on_pieces, seeded, stored_entry
from tests.conftest import wait_until

NS = "ops"


def event(key: str, needs_action: bool) -> NewEvent:
    return NewEvent(key, "alertmanager", "databricks", {"status": "firing", "labels": {"k": key}}, needs_action)


def same_piece_keys(prefix: str, count: int) -> list[str]:
    keys, n = [], 0
    while len(keys) < count:
        key = f"{prefix}{n}"
        n += 1
        if not keys or piece_of(key) == piece_of(keys[0]):
            keys.append(key)
    return keys


def document(key: str) -> str:
    return f"opsctl-llm-inference-{piece_name(piece_of(key))}"


def test_a_quiet_write_waits_while_actionable_work_is_in_progress_and_goes_once_it_ends(kube_api):
    store = kube_store(kube_api)
    seeded(kube_api, store)
    busy = threading.Event()
    busy.set()
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1", acting=busy.is_set, hold_off=60)
    log.due(older_than=0, limit=10)  # every piece known, as the leader's sweep leaves them
    before = len(kube_api.requests)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (log.admit([event("quiet-1", False)]), done.set()), daemon=True)
    worker.start()
    # Nothing-happens-within-a-window is the point here: the quiet write stays behind.
    assert not done.wait(0.5)
    assert on_pieces(kube_api, before) == []
    busy.clear()
    log.nudge()  # the work ended: the held write looks again at once
    wait_until(done.is_set, what="the quiet admit to be written once the work ended")
    worker.join(5)
    assert on_pieces(kube_api, before) == [("PUT", document("quiet-1"))]
    assert stored_entry(kube_api, "quiet-1")["state"] == "done"


def test_a_held_quiet_write_rides_along_with_an_actionable_write_of_its_piece(kube_api):
    store = kube_store(kube_api)
    seeded(kube_api, store)
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1", acting=lambda: True, hold_off=60)
    quiet_key, trigger_key = same_piece_keys("k", 2)
    log.due(older_than=0, limit=10)
    before = len(kube_api.requests)
    done = threading.Event()
    worker = threading.Thread(target=lambda: (log.admit([event(quiet_key, False)]), done.set()), daemon=True)
    worker.start()
    assert not done.wait(0.3)  # held behind the work in progress
    assert [e.key for e in log.admit([event(trigger_key, True)], claim=True)] == [trigger_key]
    wait_until(done.is_set, what="the quiet admit, recorded with the actionable write")
    worker.join(5)
    assert on_pieces(kube_api, before) == [("PUT", document(trigger_key))]  # one write recorded both
    assert stored_entry(kube_api, quiet_key)["state"] == "done"
    assert stored_entry(kube_api, trigger_key)["state"] == "running"


def test_the_hold_off_is_bounded(kube_api):
    store = kube_store(kube_api)
    seeded(kube_api, store)
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1", acting=lambda: True, hold_off=0.2)
    log.due(older_than=0, limit=10)
    before = len(kube_api.requests)
    # Work in progress without end: the quiet write still goes, once its bound passed.
    assert [e.key for e in log.admit([event("quiet-2", False)])] == ["quiet-2"]
    assert on_pieces(kube_api, before) == [("PUT", document("quiet-2"))]


def test_actionable_and_quiet_writes_go_at_once_when_no_work_is_in_progress(kube_api):
    store = kube_store(kube_api)
    seeded(kube_api, store)
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1", acting=lambda: False, hold_off=60)
    log.due(older_than=0, limit=10)  # every piece known, as the leader's sweep leaves them
    before = len(kube_api.requests)
    log.admit([event("quiet-3", False)])  # returns: nothing holds it (a hold would last 60 s)
    log.admit([event("act-3", True)])
    assert [m for m, _ in on_pieces(kube_api, before)] == ["PUT", "PUT"]


def test_a_read_in_flight_across_this_replicas_write_does_not_make_the_next_write_a_conflict(kube_api):
    store = kube_store(kube_api)
    seeded(kube_api, store)
    log = SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1", term=lambda: "serve-a@1")
    key, later = same_piece_keys("r", 2)
    log.due(older_than=0, limit=10)  # every piece known, as the leader's sweep leaves them
    # The sweep's read of the piece is answered as it was, then held before the answer is sent.
    kube_api.inject(verb="get", resource="configmaps", name=document(key), hold=True, when="after", times=1)
    sweep = threading.Thread(target=log.due, kwargs={"older_than": 0, "limit": 10}, daemon=True)
    sweep.start()
    wait_until(lambda: kube_api.held() == 1, what="the sweep's read held with the piece as it was")
    assert [e.key for e in log.admit([event(key, True)], claim=True)] == [key]  # a write answered meanwhile
    kube_api.release()
    sweep.join(10)
    before = len(kube_api.requests)
    log.admit([event(later, True)], claim=True)
    assert on_pieces(kube_api, before) == [("PUT", document(later))], "one PUT from the version written, no 409"
    assert {stored_entry(kube_api, k)["state"] for k in (key, later)} == {"running"}


@pytest.mark.slow
def test_the_leader_holds_quiet_writes_back_while_its_trigger_has_not_acted_and_lets_them_go_after(
        tmp_path, kube_api, healthy_store):
    """The service's wiring, in process on the loopback API: the trigger's failover write is held
    in flight; a quiet delivery admitted meanwhile writes nothing to its piece until the failover
    is answered (its first action taken), then it is recorded. Before, it was written at once."""
    import json

    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.payloads import AlertmanagerMessage
    from opsctl.automation.service import AutomationService
    from opsctl.config.loading import load_config_file
    from tests.automation.helpers import alert, message
    from tests.automation.test_fencing import NS as FNS, SPLIT_CM, replica_config
    from tests.conftest import split_configmap

    kube_api.seed(split_configmap(SPLIT_CM, FNS, {"databricks": 80, "internal": 20}))
    cfg = load_config_file(replica_config(tmp_path, kube_api.url, healthy_store, "serve-a"))
    service = AutomationService(cfg, LiveExecutor(cfg))
    service.start()
    try:
        wait_until(service.acting, what="the replica to lead")
        trigger = message(alert(fingerprint="7a11e5000000beef"))
        quiet = message(alert(fingerprint="00000000000000a1", alertname="SloBurnRateTicket", severity="ticket"),
                        group_key="quiet")
        quiet_key = alert_key(quiet)
        hold = kube_api.inject(verb="patch|update", resource="configmaps", name=SPLIT_CM, hold=True)
        answer = service.accept_alertmanager(AlertmanagerMessage.parse(trigger), 0.0)
        assert answer.status == 202 and answer.body["queued"] == 1
        wait_until(lambda: kube_api.held() == 1, what="the trigger's failover write held in flight")
        before = len(kube_api.requests)
        done = threading.Event()
        quiet_answer: list = []
        sender = threading.Thread(target=lambda: (quiet_answer.append(service.accept_alertmanager(
            AlertmanagerMessage.parse(quiet), 0.0)), done.set()), daemon=True)
        sender.start()
        assert not done.wait(0.5)  # nothing-happens-within-a-window is the point: it waits for the trigger
        assert not [r for r in kube_api.requests[before:] if "serve-deliveries" in r.path and r.method == "PUT"]
        kube_api.clear_faults()  # the failover is answered: its first action is taken
        wait_until(done.is_set, what="the quiet delivery recorded once the trigger acted")
        assert quiet_answer[0].status == 202 and hold.fired == 1
        cm = kube_api.get("", "configmaps", FNS, f"opsctl-llm-inference-{piece_name(piece_of(quiet_key))}")
        assert json.loads(cm["data"]["state.json"])["events"][quiet_key]["state"] == "done"
    finally:
        kube_api.clear_faults()
        service.stop()


def alert_key(body: dict) -> str:
    from opsctl.automation.idempotency import alert_event_key
    from opsctl.automation.payloads import AlertmanagerMessage

    a = AlertmanagerMessage.parse(body).alerts[0]
    return alert_event_key(a.fingerprint, a.starts_at.canonical, a.status)
