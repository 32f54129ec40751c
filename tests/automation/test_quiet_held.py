"""Quiet deliveries held back while an urgent event acts (issue 22 items 3 and 9), counted on the
loopback Kubernetes API (tests/fakes/kube_api.py records every request; never timed).

The trigger's incident write is held in flight (a slow API server, without a clock): quiet
deliveries arriving meanwhile are answered, but nothing of theirs is written until the trigger has
acted, so the calls between the trigger's receipt and its failover's start are the trigger's own.
Before, they waited one second (group_commit.HOLD_OFF) and were written in the trigger's window:
at 5 s a call, their writes of the delivery pieces met the worker's claim in compare-and-swap."""

from __future__ import annotations

import json
import threading

import pytest

from opsctl.automation.delivery_pieces import piece_name, piece_of
from opsctl.automation.idempotency import alert_event_key
from opsctl.automation.payloads import AlertmanagerMessage
from tests.automation.helpers import alert, message
from tests.automation.test_fencing import NS, SPLIT_CM, replica_config
from tests.conftest import split_configmap, wait_until

pytestmark = pytest.mark.slow

INCIDENTS = "opsctl-llm-inference-incidents"  # the service's incident index: the trigger opens its incident there
QUIET = 12


def key_of(body: dict) -> str:
    a = AlertmanagerMessage.parse(body).alerts[0]
    return alert_event_key(a.fingerprint, a.starts_at.canonical, a.status)


def document(key: str) -> str:
    return f"opsctl-llm-inference-{piece_name(piece_of(key))}"


def stored(kube_api, key: str) -> dict | None:
    cm = kube_api.get("", "configmaps", NS, document(key))
    return json.loads(cm["data"]["state.json"])["events"].get(key) if cm else None


def piece_writes(requests) -> list[str]:
    """The delivery pieces written (created or replaced), in order."""
    names = []
    for r in requests:
        if r.method in ("POST", "PUT") and isinstance(r.body, dict):
            name = r.body.get("metadata", {}).get("name", "")
            if "serve-deliveries-" in name:
                names.append(name)
    return names


def the_triggers_own(writes: list[str], trigger_piece: str) -> bool:
    """Its admit and, when its claim was not fresh any more, its claim: of its piece, two at most."""
    return set(writes) <= {trigger_piece} and 1 <= len(writes) <= 2


def quiet_messages() -> list[dict]:
    return [message(alert(fingerprint=f"{i + 1:016x}", alertname="SloBurnRateTicket", severity="ticket"),
                    group_key=f"quiet-{i}") for i in range(QUIET)]


@pytest.fixture
def service(tmp_path, kube_api, healthy_store):
    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.service import AutomationService
    from opsctl.config.loading import load_config_file

    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    # The service's incident index exists (as after its first incident), so the trigger's opening of
    # its incident ends in a replace of the index by name: the write the tests hold in flight.
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": INCIDENTS, "namespace": NS},
                   "data": {"state.json": json.dumps({"version": 1, "recent": []})}})
    cfg = load_config_file(replica_config(tmp_path, kube_api.url, healthy_store, "serve-a"))
    svc = AutomationService(cfg, LiveExecutor(cfg))
    svc.start()
    try:
        wait_until(svc.acting, what="the replica to lead")
        wait_until(lambda: "term" in json.loads(kube_api.get("", "configmaps", NS, INCIDENTS)["data"]["state.json"]),
                   what="the new leader's fence of the index")  # its own write, before any test holds one
        yield svc
    finally:
        kube_api.clear_faults()
        svc.stop()


def send_quiet(service, bodies: list[dict]) -> tuple[list, list[threading.Thread]]:
    answers: list = []
    senders = [threading.Thread(target=lambda b=b: answers.append(service.accept_alertmanager(
        AlertmanagerMessage.parse(b), 0.0)), daemon=True) for b in bodies]
    for sender in senders:
        sender.start()
    return answers, senders


def test_quiet_deliveries_write_nothing_in_the_triggers_window_and_are_all_recorded_after(kube_api, service):
    trigger = message(alert(fingerprint="7a11e5000000beef"))
    trigger_piece = document(key_of(trigger))
    quiet = quiet_messages()
    assert len({document(key_of(b)) for b in quiet} - {trigger_piece}) >= 3  # other pieces than the trigger's
    service._quiet.bound = 600  # the bound is its own test below: here only the trigger's acting ends the hold
    hold = kube_api.inject(verb="update", resource="configmaps", name=INCIDENTS, hold=True, times=1)
    before = len(kube_api.requests)
    answer = service.accept_alertmanager(AlertmanagerMessage.parse(trigger), 0.0)
    assert answer.status == 202 and answer.body["queued"] == 1
    wait_until(lambda: kube_api.held() == 1, what="the trigger's incident write held in flight")

    answers, senders = send_quiet(service, quiet)
    for sender in senders:
        sender.join(60)
    # Answered while the trigger has not acted: held back, none written, and /metrics says how many.
    assert sorted(a.status for a in answers) == [202] * QUIET
    assert [a.body.get("held") for a in answers] == [1] * QUIET
    assert the_triggers_own(piece_writes(kube_api.requests[before:]), trigger_piece)
    assert f"opsctl_serve_quiet_held {float(QUIET)}" in service.metrics.render()[0].decode()

    kube_api.release()  # the trigger's incident write is answered: it goes on to its failover
    wait_until(lambda: hold.fired == 1 and json.loads(kube_api.get("", "configmaps", NS, SPLIT_CM)["data"][
        "split.json"])["weights"] == {"databricks": 0, "internal": 100}, what="the failover applied")
    wait_until(lambda: all((stored(kube_api, key_of(b)) or {}).get("state") == "done" for b in quiet),
               what="every quiet delivery recorded, once the trigger acted")
    wait_until(lambda: service._quiet.waiting() == 0, what="the held gauge back to 0")

    # The trigger's window (its receipt to its failover's first call): its own writes of delivery
    # pieces only (its admit, and its claim if it writes one), however many quiet deliveries came.
    window = kube_api.requests[before:]
    start = next(i for i, r in enumerate(window) if SPLIT_CM in r.path)
    assert the_triggers_own(piece_writes(window[:start]), trigger_piece)
    # After it, the held deliveries went in one write per piece (never one per delivery).
    quiet_pieces = {document(key_of(b)) for b in quiet}
    later = piece_writes(window[start:])
    assert set(later) >= quiet_pieces - {trigger_piece}
    assert len(later) < QUIET
    assert 'opsctl_automation_events_total{result="no_policy"} 12.0' in service.metrics.render()[0].decode()


def test_a_held_quiet_delivery_is_written_once_its_bound_passed_while_the_trigger_still_has_not_acted(
        kube_api, service):
    trigger = message(alert(fingerprint="7a11e5000000cafe"))
    service._quiet.bound = 0.5
    kube_api.inject(verb="update", resource="configmaps", name=INCIDENTS, hold=True, times=1)
    answer = service.accept_alertmanager(AlertmanagerMessage.parse(trigger), 0.0)
    assert answer.status == 202 and answer.body["queued"] == 1
    wait_until(lambda: kube_api.held() == 1, what="the trigger's incident write held in flight")
    quiet = quiet_messages()[:3]
    answers, senders = send_quiet(service, quiet)
    for sender in senders:
        sender.join(60)
    assert [a.body.get("held") for a in answers] == [1] * 3
    # The trigger is still held: only the bound lets them go.
    wait_until(lambda: all((stored(kube_api, key_of(b)) or {}).get("state") == "done" for b in quiet),
               what="the held quiet deliveries recorded once their bound passed")
    assert kube_api.held() == 1
    kube_api.release()


def test_what_is_held_is_written_when_the_service_stops(kube_api, service):
    trigger = message(alert(fingerprint="7a11e5000000f00d"))
    service._quiet.bound = 600
    kube_api.inject(verb="update", resource="configmaps", name=INCIDENTS, hold=True, times=1)
    service.accept_alertmanager(AlertmanagerMessage.parse(trigger), 0.0)
    wait_until(lambda: kube_api.held() == 1, what="the trigger's incident write held in flight")
    quiet = quiet_messages()[:2]
    answers, senders = send_quiet(service, quiet)
    for sender in senders:
        sender.join(60)
    assert [a.body.get("held") for a in answers] == [1] * 2
    assert all(stored(kube_api, key_of(b)) is None for b in quiet)
    kube_api.release()
    service._quiet.stop(30)  # as service.stop() does first: what was answered is written
    assert all((stored(kube_api, key_of(b)) or {}).get("state") == "done" for b in quiet)
