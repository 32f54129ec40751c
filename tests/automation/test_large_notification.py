"""One Alertmanager notification of 1,200 matching alerts (~450 kB) to `opsctl serve` in kubernetes
mode (issue 22 item 6): answered 202 and acted on; before issue 22 every retry was 503 ("over the
524288 byte bound") and those alerts were never acted on. Since decision 0216 the notification is
not recorded as deliveries: its alerts join their incident in one write of the incident's
ConfigMap (within a ConfigMap's bound), and its resend writes nothing. A separate `serve` process is
the point: the notification goes through its HTTP front door."""

from __future__ import annotations

import json

import pytest

from tests.automation.helpers import Serve, alert, bearer, kube_incidents, message, request, wait_for
from tests.automation.test_ha import NS, SPLIT_CM, ha_config, holder, ledger_items, split
from tests.conftest import split_configmap

pytestmark = pytest.mark.slow

ALERTS = 1200


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    return kube_api


def incident_writes(api) -> list[str]:
    """The writes (create, replace) the API server received for ConfigMaps of the incidents."""
    with api.lock:
        return [f"{r.method} {r.path}" for r in api.requests if r.method in ("POST", "PUT", "PATCH")
                and "/configmaps" in r.path and "grammar-traffic-split" not in r.path]


def test_a_notification_of_1200_alerts_is_one_write_of_its_incident_and_acted_on(tmp_path, api, healthy_store):
    alerts = [alert(fingerprint=f"{i:016x}", pod=f"llm-proxy-{i:05d}", namespace="llm-serving",
                    instance=f"10.0.{i // 250}.{i % 250}:9090", job="llm-proxy") for i in range(ALERTS)]
    for a in alerts:
        a["annotations"]["description"] = ("error budget burning at 14.4x over 1h and 5m; the vendor endpoint"
                                           " answers 5xx: see the runbook")
    body = json.dumps(message(*alerts)).encode()
    assert len(body) > 450_000, len(body)
    server = Serve(ha_config(tmp_path / "a", api.url, healthy_store), env={"POD_NAME": "serve-a"})
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        before = len(incident_writes(api))
        reply = request(f"{server.url}/v1/alertmanager", body, headers=bearer(), timeout=120)
        assert reply.status == 202, reply.body[:300]
        assert reply.json()["events"] == ALERTS
        # One write of the incident (a create, opening it) and one of the index pointing at it.
        assert len(incident_writes(api)) - before == 2, incident_writes(api)[before:]
        (incident,) = kube_incidents(api, NS)
        assert len(incident["alerts"]) == ALERTS
        (response,) = incident["responses"]
        assert len(response["alerts"]) == ALERTS
        for (group, plural, namespace, name), obj in list(api.objects.items()):
            if plural == "configmaps":
                assert len(json.dumps(obj)) < 1024 * 1024, f"{name} within a ConfigMap's bound"
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, timeout=60, what="the failover")
        directory = tmp_path / "a"
        wait_for(lambda: ledger_items([directory], "tickets/ledger.json", "tickets"), timeout=60, what="the ticket")
        assert len(ledger_items([directory], "paging/ledger.json", "incidents")) == 1, "one incident, one page"
        assert len(ledger_items([directory], "tickets/ledger.json", "tickets")) == 1
        wait_for(lambda: server.metrics().get('opsctl_automation_events_total{result="done"}', 0) >= 1
                 and not server.metrics().get("opsctl_automation_queue_depth"), what="the actions taken")
        writes = len(incident_writes(api))
        again = request(f"{server.url}/v1/alertmanager", body, headers=bearer(), timeout=120)
        assert again.status == 202 and again.json()["status"] == "duplicate"
        assert len(incident_writes(api)) == writes, "the resend wrote nothing"
    finally:
        server.stop()
