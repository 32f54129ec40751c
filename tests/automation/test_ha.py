"""Two `opsctl serve` replicas with separate state dirs, in kubernetes state mode against the loopback
API server (Lease, shared state ConfigMaps, the split ConfigMap), and an on-call CLI with a third:
they act as one team (issue 12 Deliver 4 and 8)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.automation.helpers import (
    FAILOVER_POLICY, TOKEN, Serve, alert, kube_incidents, kube_responses, page_key, message, request, wait_for,
    write_serve_config,
)
from tests.conftest import run_opsctl, split_configmap

NS = "llm"
SPLIT_CM = "grammar-traffic-split"
FIRING = message(alert(fingerprint="b7"))
RESOLVED = message(alert(fingerprint="b7", status="resolved"))
INCIDENT = page_key()  # the incident's page: Alertmanager's dedup key (issue 36)
LEASE_DURATION, RETRY = 4, 1

pytestmark = pytest.mark.slow


def ha_config(directory: Path, api_url: str, healthy_store: Path, *, hold_down: str = "2s",
              leader_only: bool = False) -> Path:
    import shutil

    (directory / "state").mkdir(parents=True, exist_ok=True)
    shutil.copy(healthy_store, directory / "state" / "metrics.sqlite")
    extra = f"""\
metrics: {{max_data_age: 3650d}}  # the healthy store holds a day ending at a fixed past instant
state: {{backend: kubernetes, namespace: {NS}}}
traffic:
  actuator: configmap
  kubernetes: {{host: "{api_url}", namespace: {NS}}}
  configmap: {{name: {SPLIT_CM}, key: split.json}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
paging: {{provider: local}}
tickets:
  provider: local
  vendors:
    databricks:
      categories: {{inference: Model Serving, platform: Workspace}}
      severities: {{Sev1: "Severity 1", Sev2: "Severity 2", Sev3: "Severity 3", Sev4: "Severity 4"}}
freezes: []
"""
    # The hold-down restore these tests count (one "restore" change a failover); the canary restore
    # is tests/traffic/test_canary_restore.py's.
    automation = f"""\
hold_down: {hold_down}
restore: null
leader_election: {{lease_duration: {LEASE_DURATION}s, renew_deadline: 3s, retry_period: {RETRY}s,
                  ready_only_when_leader: {str(leader_only).lower()}}}
"""
    return write_serve_config(directory, policies=FAILOVER_POLICY, automation_extra=automation, extra=extra)


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, {"databricks": 80, "internal": 20}))
    return kube_api


def split(api) -> dict:
    return json.loads(api.get("", "configmaps", NS, SPLIT_CM)["data"]["split.json"])["weights"]


def changes(api) -> list[dict]:
    """The change record that rides with the split (one write with it)."""
    annotations = api.get("", "configmaps", NS, SPLIT_CM)["metadata"].get("annotations") or {}
    raw = annotations.get("opsctl.io/traffic-record")
    return json.loads(raw)["changes"] if raw else []


def shared(api, name: str) -> dict:
    cm = api.get("", "configmaps", NS, f"opsctl-llm-inference-{name}")
    return json.loads(cm["data"]["state.json"]) if cm else {}


def holder(api) -> str | None:
    lease = api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")
    return (lease or {}).get("spec", {}).get("holderIdentity")


def ledger_items(directories: list[Path], name: str, key: str) -> list[dict]:
    """Every replica's local pager or ticket ledger, together (each replica has its own state dir)."""
    items = []
    for d in directories:
        path = d / "state" / name
        if path.exists():
            items += json.loads(path.read_text())[key]
    return items


def role(server: Serve) -> str:
    return request(f"{server.url}/readyz").json()["reason"]


def test_firing_to_one_replica_retry_and_resolve_to_the_other_act_once_and_restore(tmp_path, api, healthy_store):
    a_dir, b_dir, cli_dir = tmp_path / "a", tmp_path / "b", tmp_path / "laptop"
    a = Serve(ha_config(a_dir, api.url, healthy_store), env={"POD_NAME": "serve-a"})
    b = None
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        b = Serve(ha_config(b_dir, api.url, healthy_store), env={"POD_NAME": "serve-b"})
        wait_for(lambda: "follower" in role(b), what="serve-b to follow")
        assert "leader" in role(a)

        assert a.post_alertmanager(FIRING).json()["status"] == "accepted"
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, what="the failover")
        # Alertmanager's retry, to B: a follower writes no incident (decision 0216), so it answers 503
        # and the resend reaching the leader finds the alert in its incident: a duplicate.
        refused = b.post_alertmanager(FIRING)
        assert refused.status == 503 and refused.headers.get("retry-after") == "1"
        assert a.post_alertmanager(FIRING).json()["status"] == "duplicate"
        wait_for(lambda: ledger_items([a_dir, b_dir], "tickets/ledger.json", "tickets"), what="the ticket")

        # The on-call's laptop (a third state dir) sees what the automation did.
        laptop = ha_config(cli_dir, api.url, healthy_store)
        history = run_opsctl("--config", str(laptop), "traffic", "history", "-o", "json")
        assert history.exit_code == 0, history.stderr
        assert [e["incident"] for e in json.loads(history.stdout) if e["action"] == "failover"] == [INCIDENT]

        assert b.post_alertmanager(RESOLVED).status == 503  # to the follower: resent ...
        assert a.post_alertmanager(RESOLVED).json()["status"] == "accepted"  # ... and written by the leader
        wait_for(lambda: split(api) == {"databricks": 80, "internal": 20}, timeout=30, what="the restore")
        closed = wait_for(lambda: [r for r in kube_responses(api, NS) if r["state"] == "closed"],
                          what="the response closed")
        assert len(closed) == 1 and [i["page"]["dedup_key"] for i in kube_incidents(api, NS)] == [INCIDENT]

        assert [c["action"] for c in changes(api)] == ["failover", "restore"]
        assert len(ledger_items([a_dir, b_dir], "paging/ledger.json", "incidents")) == 1
        assert len(ledger_items([a_dir, b_dir], "tickets/ledger.json", "tickets")) == 1
        # Only the leader acted, and no delivery was kept anywhere: the incident is the record.
        assert not ledger_items([b_dir], "paging/ledger.json", "incidents")
        assert not ledger_items([b_dir], "tickets/ledger.json", "tickets")
        with api.lock:
            assert not [name for (_, plural, _, name) in api.objects if plural == "configmaps" and "deliver" in name]
        (incident,) = kube_incidents(api, NS)
        assert [(a["fingerprint"], a["status"]) for a in incident["alerts"]] == [("b7", "resolved")]
    finally:
        if b is not None:
            b.stop()
        a.stop()


def gate_split_writes(api) -> tuple[threading.Event, threading.Event]:
    """Hold every write to the split ConfigMap until released: the leader hangs mid-failover."""
    arrived, release = threading.Event(), threading.Event()
    original = api.handle

    def handle(method, raw_path, *args, **kwargs):
        if method in ("PATCH", "PUT") and f"/configmaps/{SPLIT_CM}" in raw_path:
            arrived.set()
            release.wait(60)
        return original(method, raw_path, *args, **kwargs)

    api.handle = handle
    return arrived, release


def test_a_leader_killed_mid_failover_is_taken_over_within_the_lease_and_the_incident_completes_once(
        tmp_path, api, healthy_store):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a = Serve(ha_config(a_dir, api.url, healthy_store), env={"POD_NAME": "serve-a"})
    b = None
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        b = Serve(ha_config(b_dir, api.url, healthy_store), env={"POD_NAME": "serve-b"})
        wait_for(lambda: "follower" in role(b), what="serve-b to follow")
        arrived, release = gate_split_writes(api)

        assert a.post_alertmanager(FIRING).json()["status"] == "accepted"
        assert arrived.wait(30), "the leader never wrote the split"
        (response,) = kube_responses(api, NS)
        assert response["failover"] == "started"  # written on the incident before acting
        os.kill(a.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        a.proc.wait(10)
        release.set()  # the write A sent lands, as the API server completes a request whose client died

        wait_for(lambda: holder(api) == "serve-b", timeout=LEASE_DURATION + 10, what="serve-b to take over")
        took = time.monotonic() - killed
        # The Lease expires lease_duration after the follower last saw it renewed; it looks every retry_period.
        print(f"takeover {took:.2f}s after the SIGKILL")
        assert took <= LEASE_DURATION + 2 * RETRY + 3, took  # + scheduling slack on a loaded machine
        wait_for(lambda: ledger_items([b_dir], "tickets/ledger.json", "tickets"), what="B to finish the incident")
        assert split(api) == {"databricks": 0, "internal": 100}

        assert b.post_alertmanager(RESOLVED).json()["status"] == "accepted"
        wait_for(lambda: split(api) == {"databricks": 80, "internal": 20}, timeout=30, what="the restore")
        wait_for(lambda: [r for r in kube_responses(api, NS) if r["state"] == "closed"], what="the response closed")
        assert [c["action"] for c in changes(api)] == ["failover", "restore"]  # the failover once
        assert len(ledger_items([a_dir, b_dir], "paging/ledger.json", "incidents")) == 1
        assert len(ledger_items([a_dir, b_dir], "tickets/ledger.json", "tickets")) == 1
        (response,) = kube_responses(api, NS)
        assert response["failover"] == "applied" and response["owned"] is True
    finally:
        if b is not None:
            b.stop()
        a.stop()


def test_sigterm_releases_the_lease_so_the_follower_takes_over_at_once(tmp_path, api, healthy_store):
    a = Serve(ha_config(tmp_path / "a", api.url, healthy_store), env={"POD_NAME": "serve-a"})
    b = None
    try:
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        # B asks to be Ready only while it leads (Serve waits for /healthz then).
        b = Serve(ha_config(tmp_path / "b", api.url, healthy_store, leader_only=True), env={"POD_NAME": "serve-b"},
                  ready_path="/healthz")
        wait_for(lambda: "follower" in role(b), what="serve-b to follow")
        assert request(f"{b.url}/readyz").status == 503
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(20) == 0
        assert holder(api) in (None, "", "serve-b")  # released on the way out
        wait_for(lambda: holder(api) == "serve-b", timeout=2 * RETRY + 2, what="serve-b to lead")
        wait_for(lambda: request(f"{b.url}/readyz").status == 200, what="B Ready as the leader")
        assert role(b) == "ready, leader"
    finally:
        if b is not None:
            b.stop()
        a.stop()


def test_fifty_copies_of_one_notification_to_three_replicas_fail_over_page_and_ticket_once(
        tmp_path, api, healthy_store):
    """Alertmanager's copies of one notification (its retries, its HA peers) spread by the Service
    over three replicas: a follower writes nothing and answers 503 (decision 0216), each resend goes
    to the next replica, and every copy ends answered 2xx by the leader; the incident holds the alert
    once, and the split, the page and the ticket happen once."""
    dirs = [tmp_path / n for n in ("a", "b", "c")]
    servers: list[Serve] = []
    try:
        servers.append(Serve(ha_config(dirs[0], api.url, healthy_store), env={"POD_NAME": "serve-a"}))
        wait_for(lambda: holder(api) == "serve-a", what="serve-a to lead")
        for d, name in zip(dirs[1:], ("serve-b", "serve-c")):
            servers.append(Serve(ha_config(d, api.url, healthy_store), env={"POD_NAME": name}))
            wait_for(lambda s=servers[-1]: "follower" in role(s), what=f"{name} to follow")
        body = json.dumps(FIRING).encode()
        answers: list[tuple[int, str]] = []
        refused = [0]
        lock = threading.Lock()

        def copy(i: int) -> None:
            for attempt in range(12):  # bounded, as Alertmanager's retries within a group interval
                reply = request(f"{servers[(i + attempt) % 3].url}/v1/alertmanager", body,
                                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
                if reply.status < 500:
                    with lock:
                        answers.append((reply.status, reply.json()["status"]))
                    return
                with lock:
                    refused[0] += 1

        threads = [threading.Thread(target=copy, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(answers) == 50 and {s for s, _ in answers} == {202}
        assert sorted(set(s for _, s in answers)) == ["accepted", "duplicate"]
        assert sum(s == "accepted" for _, s in answers) == 1  # the one copy that wrote the alert
        assert refused[0] >= 1  # the followers answered their copies 503, written nowhere
        wait_for(lambda: split(api) == {"databricks": 0, "internal": 100}, what="the failover")
        wait_for(lambda: ledger_items(dirs, "tickets/ledger.json", "tickets"), what="the ticket")
        (incident,) = kube_incidents(api, NS)
        assert [a["fingerprint"] for a in incident["alerts"]] == ["b7"]
        assert [c["action"] for c in changes(api)] == ["failover"]
        assert len(ledger_items(dirs, "paging/ledger.json", "incidents")) == 1
        assert len(ledger_items(dirs, "tickets/ledger.json", "tickets")) == 1
        assert not ledger_items(dirs[1:], "paging/ledger.json", "incidents")  # only the leader acted
    finally:
        for server in reversed(servers):
            server.stop()
