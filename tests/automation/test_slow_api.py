"""`opsctl serve` in kubernetes mode while the API server is slow or gone (issue 22 item 4): the
event loop never waits on it, so liveness and readiness keep answering, and liveness never depends
on it. A separate `serve` process is the point (its probes are what a kubelet sees)."""

from __future__ import annotations

import json
import threading

import pytest

from tests.automation.helpers import Serve, alert, bearer, message, request, wait_for
from tests.automation.test_ha import NS, SPLIT_CM, ha_config, holder, ledger_items, role, split
from tests.fakes.kube_api import FakeKubeAPI
from tests.conftest import split_configmap

pytestmark = pytest.mark.slow

PROBES = 15
PROBE_TIMEOUT = 1.0  # seconds: a fifth of one API call's latency below


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    return kube_api


def probe(url: str) -> int | None:
    """The status of one probe answered within PROBE_TIMEOUT, None if it was not."""
    try:
        return request(url, timeout=PROBE_TIMEOUT).status
    except OSError:  # timed out (socket.timeout, URLError wrapping it) or refused
        return None


def test_probes_answer_at_once_while_every_api_call_takes_five_seconds(tmp_path, api, healthy_store):
    server = Serve(ha_config(tmp_path / "a", api.url, healthy_store), env={"POD_NAME": "serve-a"})
    replies: list = []
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        fault = api.inject(verb="*", resource="*", delay=5.0)

        def deliver(i: int) -> None:
            body = json.dumps(message(alert(fingerprint=f"5{i:015x}"))).encode()
            replies.append(request(f"{server.url}/v1/alertmanager", body, headers=bearer(), timeout=180))

        senders = [threading.Thread(target=deliver, args=(i,), daemon=True) for i in range(3)]
        for sender in senders:
            sender.start()
        wait_for(lambda: fault.fired >= 1, what="a delivery's recording to reach the slow API server")
        health = [probe(f"{server.url}/healthz") for _ in range(PROBES)]
        ready = [probe(f"{server.url}/readyz") for _ in range(PROBES)]
        assert not replies, "the probes ran while every delivery was still being recorded"
        assert health == [200] * PROBES
        assert ready == [200] * PROBES, "the last known reachability of the shared state: it answered"
        metrics = request(f"{server.url}/metrics", timeout=PROBE_TIMEOUT).body.decode()
        assert "opsctl_serve_recording 3.0" in metrics or "opsctl_serve_recording 2.0" in metrics \
            or "opsctl_serve_recording 1.0" in metrics
        api.clear_faults()
        for sender in senders:
            sender.join(timeout=120)
        assert sorted(r.status for r in replies) == [202, 202, 202]

        api.down()  # the API server is gone: not ready, still alive
        wait_for(lambda: probe(f"{server.url}/readyz") == 503, what="/readyz to say the state is unreachable")
        assert "state unavailable" in request(f"{server.url}/readyz", timeout=PROBE_TIMEOUT).json()["reason"]
        assert [probe(f"{server.url}/healthz") for _ in range(PROBES)] == [200] * PROBES
        api.up()
        wait_for(lambda: probe(f"{server.url}/readyz") == 200, what="/readyz to recover with the API server")
    finally:
        api.clear_faults()
        server.stop()


# The shipped sizes (lease 20 s, renew 15 s, retry 2 s) against a 5 s API, scaled by 0.4 so the test
# stays bounded: every call 2 s, lease 8 s, renew 6 s; retry 1 s (0.8 s rounded up to the config's
# 1 s minimum, which only leaves less room for renewals).
SCALED_DELAY = 2.0
SCALED_LEASE = "lease_duration: 8s, renew_deadline: 6s, retry_period: 1s"


def scaled_config(directory, api_url, healthy_store):
    path = ha_config(directory, api_url, healthy_store)
    text = path.read_text()
    assert "lease_duration: 4s, renew_deadline: 3s, retry_period: 1s" in text
    path.write_text(text.replace("lease_duration: 4s, renew_deadline: 3s, retry_period: 1s", SCALED_LEASE))
    return path


def lease_transitions(api) -> int:
    return api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")["spec"]["leaseTransitions"]


def test_the_leader_keeps_its_lease_and_fails_over_while_every_api_call_is_slow(tmp_path, api, healthy_store):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a = Serve(scaled_config(a_dir, api.url, healthy_store), env={"POD_NAME": "serve-a"})
    b = None
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        b = Serve(scaled_config(b_dir, api.url, healthy_store), env={"POD_NAME": "serve-b"})
        wait_for(lambda: "follower" in role(b), what="serve-b to follow")
        before = lease_transitions(api)
        fault = api.inject(verb="*", resource="*", delay=SCALED_DELAY)
        body = json.dumps(message(alert(fingerprint="5100000000000001"))).encode()
        # To the follower first: it writes no incident (decision 0216) and answers at once, without
        # waiting on the slow API server; Alertmanager's resend reaches the leader, which writes it.
        refused = request(f"{b.url}/v1/alertmanager", body, headers=bearer(), timeout=10)
        assert refused.status == 503 and refused.headers.get("retry-after") == "1"
        reply = request(f"{a.url}/v1/alertmanager", body, headers=bearer(), timeout=120)
        assert reply.status == 202
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, timeout=240, interval=0.5,
                 what="the failover under a slow API")
        wait_for(lambda: ledger_items([a_dir, b_dir], "tickets/ledger.json", "tickets"), timeout=240,
                 interval=0.5, what="the ticket under a slow API")
        assert fault.fired > 0
        assert holder(api) == "serve-a" and lease_transitions(api) == before  # no transition: it never stood down
        assert "stood down" not in a.log_text() and "lost Lease" not in a.log_text()
        assert len(ledger_items([a_dir, b_dir], "paging/ledger.json", "incidents")) == 1
        assert len(ledger_items([a_dir, b_dir], "tickets/ledger.json", "tickets")) == 1
        assert not ledger_items([b_dir], "paging/ledger.json", "incidents")  # the follower did nothing
    finally:
        api.clear_faults()
        if b is not None:
            b.stop()
        a.stop()


def test_the_executors_freeze_check_uses_the_api_servers_time_as_the_freeze_guard_does(tmp_path, healthy_store):
    """The API server's clock is 2 h ahead of this host, inside a freeze that has not begun by the host's
    clock; the policy makes a failover in a freeze an emergency. The executor must see the freeze the
    controller's guard sees (on the API server's time), so the failover goes through as an emergency
    instead of being refused as a routine change in a freeze."""
    from datetime import datetime, timedelta, timezone

    fake = FakeKubeAPI(clock_offset=7200).start()
    fake.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
               "data": {"split.json": json.dumps({"weights": {"databricks": 80, "internal": 20}, "shadow": {}})}})
    host = datetime.now(timezone.utc)
    start, end = ((host + timedelta(hours=h)).strftime("%Y-%m-%dT%H:%M") for h in (1, 3))
    path = ha_config(tmp_path / "a", fake.url, healthy_store)
    text = path.read_text()
    assert "freezes: []" in text and "failover: {}" in text
    path.write_text(text.replace("freezes: []", "freezes:\n  - {name: launch, timezone: UTC, start: \"%s\", end: \"%s\","
                                 " reason: launch}" % (start, end))
                    .replace("failover: {}", "failover: {emergency_in_freeze: true}"))
    server = Serve(path, env={"POD_NAME": "serve-a"})
    try:
        wait_for(lambda: holder(fake) == "serve-a", what="serve-a to lead")
        assert server.post_alertmanager(message(alert(fingerprint="f2ee2e0000000001"))).status == 202
        wait_for(lambda: split(fake) == {"databricks": 0, "internal": 100}, timeout=60, what="the emergency failover")
        record = json.loads(fake.get("", "configmaps", NS, SPLIT_CM)["metadata"]["annotations"]["opsctl.io/traffic-record"])
        (entry,) = [c for c in record["changes"] if c["action"] == "failover"]
        assert entry["emergency"] is True and "freeze" in entry["overrides"]
    finally:
        server.stop()
        fake.stop()
