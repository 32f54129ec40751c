"""A leader keeps its Lease while every API call takes 5 s, with the shipped Lease sizes (lease 20 s,
renew 15 s, retry 2 s), and one firing alert is acted on once (issue 22 items 3 and 4).

The replica starts while the API server is already slow, so it acquires the Lease under 5 s a call:
before the fix, the new leader's recovery of what a predecessor held (several state calls, 5 s
each) ran on the renewal thread, the leader stood down before it renewed, re-acquired and recovered
again, and never acted. One `serve` process; the test counts Lease events and actions, it times
nothing (the bounds are generous waits)."""

from __future__ import annotations

import json

import pytest

from tests.automation.helpers import Serve, alert, bearer, message, request, wait_for
from tests.automation.test_ha import NS, SPLIT_CM, ha_config, holder, ledger_items, split
from tests.conftest import split_configmap

pytestmark = pytest.mark.slow

SHIPPED_LEASE = "lease_duration: 20s, renew_deadline: 15s, retry_period: 2s"  # opsctl/config/automation.py
DELAY = 5.0  # seconds, every API call


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    return kube_api


def shipped_config(directory, api_url, healthy_store):
    path = ha_config(directory, api_url, healthy_store)
    text = path.read_text()
    assert "lease_duration: 4s, renew_deadline: 3s, retry_period: 1s" in text
    path.write_text(text.replace("lease_duration: 4s, renew_deadline: 3s, retry_period: 1s", SHIPPED_LEASE))
    return path


def lease(api) -> dict:
    return api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")


def lease_writes(api) -> list:
    return [r for r in api.requests if r.method in ("POST", "PUT") and "/leases" in r.path]


def test_a_leader_acquiring_under_5s_api_latency_keeps_its_lease_and_acts_once(tmp_path, api, healthy_store):
    a_dir = tmp_path / "a"
    fault = api.inject(verb="*", resource="*", delay=DELAY)
    # /healthz: liveness never waits on the API server; /readyz waits for its first (slow) answer.
    a = Serve(shipped_config(a_dir, api.url, healthy_store), env={"POD_NAME": "serve-a"}, ready_path="/healthz")
    try:
        wait_for(lambda: holder(api) == "serve-a", timeout=120, interval=0.5, what="serve-a to lead under latency")
        body = json.dumps(message(alert(fingerprint="5500000000000001"))).encode()
        assert request(f"{a.url}/v1/alertmanager", body, headers=bearer(), timeout=180).status == 202
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, timeout=300, interval=1.0,
                 what="the failover under 5 s API latency")
        wait_for(lambda: ledger_items([a_dir], "tickets/ledger.json", "tickets"), timeout=300, interval=1.0,
                 what="the ticket under 5 s API latency")
        renewals = len(lease_writes(api))
        wait_for(lambda: len(lease_writes(api)) >= renewals + 2, timeout=120, interval=0.5,
                 what="two more Lease renewals")  # it still renews once it has acted
        assert fault.fired > 0
        log = a.log_text()
        spec = lease(api)["spec"]
        assert spec["holderIdentity"] == "serve-a" and spec["leaseTransitions"] == 0
        assert log.count("acquired Lease") == 1, log[-3000:]  # acquired once, never re-acquired
        assert "lost Lease" not in log and "no longer leads" not in log, log[-3000:]
        assert len(ledger_items([a_dir], "paging/ledger.json", "incidents")) == 1
        assert len(ledger_items([a_dir], "tickets/ledger.json", "tickets")) == 1
        record = json.loads(api.get("", "configmaps", NS, SPLIT_CM)["metadata"]["annotations"]["opsctl.io/traffic-record"])
        assert [c["action"] for c in record["changes"]] == ["failover"]
    finally:
        api.clear_faults()
        a.stop()
