"""A trigger whose incident response is held by another thread of the same replica (issue 22 item
9: the maintenance thread still recording, closing and noting the last restore) waits for it in the
worker, claimed and in hand, and then acts: its delivery costs its piece two writes (recorded
claimed, finished). Before issue 22 it was handed back (pending, a write), re-queued 0.1 s later,
claimed again (a write). Since decision 0215 the hold is the engine's lock of the response (per
policy and target) the restore sweep takes; it was the episode's lease.

In process, on the loopback Kubernetes API; requests counted, never timed."""

from __future__ import annotations

import json
import threading

import pytest

from opsctl.automation.delivery_pieces import piece_name, piece_of
from tests.conftest import wait_until

pytestmark = pytest.mark.slow  # a leading replica in process, a few seconds


def test_a_trigger_meeting_its_episode_held_by_a_sibling_thread_waits_in_hand_and_acts(
        tmp_path, kube_api, healthy_store):
    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.idempotency import alert_event_key
    from opsctl.automation.payloads import AlertmanagerMessage
    from opsctl.automation.service import AutomationService
    from opsctl.config.loading import load_config_file
    from tests.automation.helpers import alert, message
    from tests.automation.test_fencing import FAILED_OVER, NS, SPLIT_CM, replica_config
    from tests.conftest import split_configmap

    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    cfg = load_config_file(replica_config(tmp_path, kube_api.url, healthy_store, "serve-a"))
    service = AutomationService(cfg, LiveExecutor(cfg))
    service.start()
    try:
        wait_until(service.acting, what="the replica to lead")
        service.deliveries.fresh = 3600.0  # the worker's claim is on time whatever the machine's load
        # Another thread of this replica holds the response the trigger belongs to (the policy's
        # response for databricks), as the maintenance thread holds it while it finishes a restore.
        lock = service.engine._lock("availability", "databricks")
        taken, let_go = threading.Event(), threading.Event()

        def sibling() -> None:
            with lock:
                taken.set()
                let_go.wait(60)

        thread = threading.Thread(target=sibling, daemon=True)
        thread.start()
        assert taken.wait(30)
        trigger = AlertmanagerMessage.parse(message(alert(fingerprint="7a11e5000000beef")))
        key = alert_event_key("7a11e5000000beef", trigger.alerts[0].starts_at.canonical, "firing")
        piece = f"opsctl-llm-inference-{piece_name(piece_of(key))}"
        before = len(kube_api.requests)
        assert service.accept_alertmanager(trigger, 0.0).status == 202
        incident_writes = lambda: [r for r in kube_api.requests[before:]  # noqa: E731
                                   if r.method in ("PUT", "POST") and "-incident-" in r.path + json.dumps(r.body or {})]
        wait_until(lambda: incident_writes(), what="the trigger's alert taken into its incident")
        split_now = lambda: json.loads(kube_api.get("", "configmaps", NS, SPLIT_CM)["data"]["split.json"])["weights"]  # noqa: E731
        assert split_now() != FAILED_OVER  # the worker waits for the response, in hand
        let_go.set()  # the sibling's bounded steps end
        thread.join(30)
        wait_until(lambda: json.loads(kube_api.get("", "configmaps", NS, SPLIT_CM)["data"]["split.json"])["weights"]
                   == FAILED_OVER, what="the trigger's failover")
        cm = lambda: json.loads(kube_api.get("", "configmaps", NS, piece)["data"]["state.json"])  # noqa: E731
        wait_until(lambda: cm()["events"][key]["state"] == "done", what="the trigger finished")
        writes = [r.method for r in kube_api.requests[before:] if r.method in ("PUT", "POST", "PATCH")
                  and (r.path.endswith(piece) or piece in json.dumps(r.body or {}))]
        assert len(writes) == 2, writes  # recorded claimed (a create: the first delivery), finished
        assert cm()["events"][key].get("attempts") == 1
    finally:
        kube_api.clear_faults()
        service.stop()
