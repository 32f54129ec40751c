"""`/metrics` shows how many deliveries wait for a retry (issue 22, item 3's last clause):
`opsctl_automation_deliveries_waiting` is 1 while a delivery's failover cannot act, and 0 once it
has acted, in local mode (`opsctl serve` with the file actuator) and in team mode (the loopback
Kubernetes API refusing the split write). Counted, never timed."""

from __future__ import annotations

import json

import pytest

from tests.automation.helpers import Serve, alert, message, recorded_split, wait_for, write_live_config
from tests.fakes.kube_api import FakeKubeAPI

WAITING = "opsctl_automation_deliveries_waiting"
FIRING = message(alert(fingerprint="b1"))
FAILED_OVER = {"databricks": 0, "internal": 100}


@pytest.mark.slow
def test_local_mode_a_delivery_whose_failover_fails_shows_as_waiting_then_zero_once_it_acts(tmp_path, healthy_store):
    config = write_live_config(tmp_path, automation_extra="hold_down: 1h\n", healthy_store=healthy_store)
    blocker = tmp_path / "state" / "traffic" / "split.json"
    blocker.mkdir(parents=True)  # a directory where the actuator writes the split: every write fails
    server = Serve(config)
    try:
        assert server.metrics()[WAITING] == 0
        assert server.post_alertmanager(FIRING).status == 202
        wait_for(lambda: server.metrics()[WAITING] == 1, timeout=30, what="the delivery waiting for its retry")
        assert server.metrics().get('opsctl_automation_events_total{result="retried"}', 0) >= 1
        blocker.rmdir()  # the actuator works again: the next retry acts
        wait_for(lambda: recorded_split(tmp_path) == FAILED_OVER, timeout=60, what="the retried failover")
        wait_for(lambda: server.metrics()[WAITING] == 0, timeout=30, what="nothing waiting once it acted")
        assert server.metrics()['opsctl_automation_events_total{result="done"}'] == 1
    finally:
        server.stop()


def scrape(service) -> dict[str, float]:
    """The service's /metrics text (what the endpoint serves), parsed here without opsctl's code."""
    body, _ = service.metrics.render()
    samples = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


@pytest.mark.slow
def test_team_mode_a_delivery_the_api_server_refuses_to_act_on_shows_as_waiting_then_zero(tmp_path, healthy_store):
    from tests.automation.test_fencing import NORMAL, NS, SPLIT_CM, Replica, split

    api = FakeKubeAPI().start()
    api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
              "data": {"split.json": json.dumps({"weights": NORMAL, "shadow": {}})}})
    a = None
    try:
        a = Replica(tmp_path / "serve-a", api, healthy_store, "serve-a", hold_down="1h")
        wait_for(a.leads, what="serve-a to lead")
        api.inject(verb="patch|update", resource="configmaps", name=SPLIT_CM, status=403)  # refused at once
        assert scrape(a.service)[WAITING] == 0
        assert a.post(FIRING).body["status"] == "accepted"
        wait_for(lambda: scrape(a.service)[WAITING] == 1, timeout=30, what="the delivery waiting for its retry")
        assert split(api) == NORMAL
        api.clear_faults()
        wait_for(lambda: split(api) == FAILED_OVER, timeout=60, what="the retried failover")
        wait_for(lambda: scrape(a.service)[WAITING] == 0, timeout=30, what="nothing waiting once it acted")
        assert scrape(a.service)['opsctl_automation_events_total{result="done"}'] == 1
    finally:
        if a is not None:
            a.stop()
        api.stop()
