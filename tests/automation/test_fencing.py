"""Team mode that survives its own faults (issue 22, items 1, 2, 3 and 5), on the loopback Kubernetes
API server: the leader's term fences a paused leader, a lost answer is recognised as its own write,
a short API outage delays an action instead of losing it, and one clock (the API server's) decides.

Two replicas run in this process (an `AutomationService` each, with its own state dir, identity,
pager and ticket ledgers), each reaching the API server through its own fault proxy
(tests/automation/fault_proxy.py). A paused leader is simulated deterministically rather than with
SIGSTOP: its proxy holds every request it sends (its Lease renewals too, so the Lease expires and the
follower takes over), and on release everything it had sent lands, as a resumed process's would.
The slow-clock row needs a process with its own clock: that replica is `opsctl serve` under
Debian's `faketime`. Tests count actions (pages, tickets, notes, split changes), never time them.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from opsctl.automation.action_record import ActionRecord
from tests.automation.fault_proxy import FaultProxy, writes_to
from tests.automation.helpers import FAILOVER_POLICY, alert, kube_responses, message, wait_for, write_serve_config
from tests.fakes.kube_api import FakeKubeAPI
from tests.conftest import split_configmap

NS = "llm"
SPLIT_CM = "grammar-traffic-split"
NORMAL = {"databricks": 80, "internal": 20}
FAILED_OVER = {"databricks": 0, "internal": 100}
STARTS = "2026-11-29T12:00:00.5Z"
FIRING = message(alert(fingerprint="f1", starts_at=STARTS))
RESOLVED = message(alert(fingerprint="f1", starts_at=STARTS, status="resolved"))
LEASE_DURATION = 4

pytestmark = pytest.mark.slow


def replica_config(directory: Path, api_url: str, healthy_store: Path, identity: str, *, hold_down: str = "1s",
                   timeout: int = 60, lease_duration: int = LEASE_DURATION) -> Path:
    (directory / "state").mkdir(parents=True, exist_ok=True)
    shutil.copy(healthy_store, directory / "state" / "metrics.sqlite")
    extra = f"""\
metrics: {{max_data_age: 3650d}}  # the healthy store holds a day ending at a fixed past instant
state: {{backend: kubernetes, namespace: {NS}}}
traffic:
  actuator: configmap
  kubernetes: {{host: "{api_url}", namespace: {NS}, timeout: {timeout}}}
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
    automation = f"""\
hold_down: {hold_down}
leader_election: {{lease_duration: {lease_duration}s, renew_deadline: 3s, retry_period: 1s, identity: {identity}}}
"""
    return write_serve_config(directory, policies=FAILOVER_POLICY, automation_extra=automation, extra=extra)


class Replica:
    """One `opsctl serve` replica without its HTTP front (the service the server wraps), behind its proxy."""

    def __init__(self, directory: Path, api: FakeKubeAPI, healthy_store: Path, identity: str, **options):
        from opsctl.automation.executors import LiveExecutor
        from opsctl.automation.service import AutomationService
        from opsctl.config.loading import load_config_file

        self.dir = directory
        self.identity = identity
        self.proxy_api = api
        self.proxy = FaultProxy(api.url).start()
        cfg = load_config_file(replica_config(directory, self.proxy.url, healthy_store, identity, **options))
        self.service = AutomationService(cfg, LiveExecutor(cfg))
        self.service.start()

    def post(self, payload: dict):
        from opsctl.automation.payloads import AlertmanagerMessage

        return self.service.accept_alertmanager(AlertmanagerMessage.parse(payload), time.time())

    def leads(self) -> bool:
        return self.service.elector.is_leader

    def events(self, result: str) -> float:
        value = self.service.metrics.registry.get_sample_value("opsctl_automation_events_total", {"result": result})
        return value or 0.0

    def handled(self) -> float:
        """Events this replica finished handling, whatever the end (done, retried, failed, fenced)."""
        return sum(self.events(r) for r in ("done", "retried", "failed", "fenced"))

    def pages(self) -> list[dict]:
        """Every trigger this replica sent its pager (a repeat folded into an open incident counts too)."""
        return [entry for i in ledger(self.dir, "paging/ledger.json").get("incidents", []) for entry in i["log"]
                if entry["type"] == "trigger"]

    def page_titles(self) -> list[str]:
        return [i["title"] for i in ledger(self.dir, "paging/ledger.json").get("incidents", [])]

    def tickets(self) -> list[dict]:
        return ledger(self.dir, "tickets/ledger.json").get("tickets", [])

    def notes(self) -> list[dict]:
        """Notes (the local pager records them as change events naming the policy)."""
        return [c for c in ledger(self.dir, "paging/ledger.json").get("changes", [])
                if (c.get("custom_details") or {}).get("policy")]

    def stop(self) -> None:
        self.proxy.resume()
        self.proxy.release()
        self.proxy.up()
        self.service.stop(timeout=5)
        self.proxy.stop()


def ledger(directory: Path, name: str) -> dict:
    path = directory / "state" / name
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, NORMAL))
    return kube_api


@pytest.fixture
def replicas(tmp_path, api, healthy_store):
    started: list[Replica] = []

    def start(identity: str, **options) -> Replica:
        replica = Replica(tmp_path / identity, api, healthy_store, identity, **options)
        started.append(replica)
        return replica

    yield start
    for replica in reversed(started):
        replica.stop()


def split(api) -> dict:
    return json.loads(api.get("", "configmaps", NS, SPLIT_CM)["data"]["split.json"])["weights"]


def record(api) -> dict:
    raw = (api.get("", "configmaps", NS, SPLIT_CM)["metadata"].get("annotations") or {}).get("opsctl.io/traffic-record")
    return json.loads(raw) if raw else {}


def changes(api) -> list[str]:
    return [c["action"] for c in record(api).get("changes", [])]


def saved_response(api) -> dict:
    """The one response (what the policy does about databricks in the incident), once its failover's
    outcome is written on the incident (the write follows the failover)."""
    return wait_for(lambda: next((r for r in responses(api) if r.get("failover") not in (None, "started")), None),
                    timeout=30, what="the response saved")


def responses(api) -> list[dict]:
    return kube_responses(api, NS)


def lease_epoch(api) -> int:
    return api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")["spec"].get("leaseTransitions") or 0


def leader_then_follower(replicas) -> tuple[Replica, Replica]:
    a = replicas("serve-a")
    wait_for(a.leads, what="serve-a to lead")
    b = replicas("serve-b")
    wait_for(lambda: b.service.elector.holder == "serve-a", what="serve-b to see serve-a lead")
    assert not b.leads()
    return a, b


def take_over_while_paused(a: Replica, b: Replica) -> None:
    """A is paused (nothing it sends reaches the API server): its Lease expires and B takes it."""
    a.proxy.pause()
    wait_for(b.leads, timeout=LEASE_DURATION + 20, what="serve-b to take over from the paused serve-a")
    assert lease_epoch(b.proxy_api) > 0


# -- item 1: fencing ------------------------------------------------------------------------------


def test_a_paused_leader_whose_failover_write_was_in_flight_is_fenced_and_acts_no_more(api, replicas):
    a, b = leader_then_follower(replicas)
    a.proxy.hold(writes_to(f"/configmaps/{SPLIT_CM}"))
    assert a.post(FIRING).body["status"] == "accepted"
    assert a.proxy.arrived.wait(30), "the leader never wrote the split"
    take_over_while_paused(a, b)
    # The follower, now leader, finishes the episode: failover, page, ticket and note, once.
    wait_for(lambda: b.tickets() and b.notes(), timeout=30, what="serve-b to finish the incident")
    assert split(api) == FAILED_OVER

    a.proxy.resume()
    a.proxy.release()  # the held write lands now: 409, and the re-read finds a newer term
    wait_for(lambda: a.handled() >= 1, timeout=30, what="serve-a to finish with the event it held")

    assert a.pages() == [] and a.tickets() == [] and a.notes() == []
    assert changes(api) == ["failover"]
    assert a.events("fenced") == 1
    assert record(api)["term"] == f"serve-b@{lease_epoch(api)}"
    assert len(b.pages()) == 1 and len(b.tickets()) == 1 and len(b.notes()) == 1
    response = saved_response(api)
    assert len(responses(api)) == 1 and response["owned"] is True and response["failover"] == "applied"

    # The resolve restores: the response is B's, and its saved split is the one B's failover wrote.
    assert b.post(RESOLVED).body["status"] == "accepted"
    wait_for(lambda: split(api) == NORMAL, timeout=30, what="the restore")
    assert changes(api) == ["failover", "restore"]
    assert a.pages() == [] and a.tickets() == [] and a.notes() == []


def test_a_leader_paused_during_its_restore_cannot_undo_the_new_leaders_later_failover(api, replicas):
    a, b = leader_then_follower(replicas)
    assert a.post(FIRING).body["status"] == "accepted"
    wait_for(lambda: a.tickets() and a.notes(), timeout=30, what="serve-a's failover")
    assert split(api) == FAILED_OVER

    a.proxy.hold(writes_to(f"/configmaps/{SPLIT_CM}"))  # its restore write will hang in flight
    assert a.post(RESOLVED).body["status"] == "accepted"
    assert a.proxy.arrived.wait(30), "the leader never wrote its restore"
    take_over_while_paused(a, b)
    wait_for(lambda: split(api) == NORMAL, timeout=30, what="serve-b to restore")
    # A new alert fires: the new leader fails over again.
    later = message(alert(fingerprint="f2", starts_at="2026-11-29T13:00:00.5Z"))
    assert b.post(later).body["status"] == "accepted"
    wait_for(lambda: split(api) == FAILED_OVER, timeout=30, what="serve-b's second failover")
    # The new alert joins the open incident (inside its correlation window): one ticket per vendor
    # per incident (issue 36), so serve-b notes the new response's failover rather than filing again.
    wait_for(lambda: b.notes(), timeout=30, what="serve-b's note for the new response")
    assert not b.tickets()
    assert changes(api) == ["failover", "restore", "failover"]

    a.proxy.resume()
    a.proxy.release()  # A's stale restore lands: 409, then fenced (and its precondition fails)
    wait_for(lambda: any(r.action == "restore" for r in a_restores(a)), timeout=30,
             what="serve-a's stale restore to come back")
    assert split(api) == FAILED_OVER
    assert changes(api) == ["failover", "restore", "failover"]


def a_restores(a: Replica) -> list[ActionRecord]:
    return [r for r in a.service.actions.actions(action="restore")]


# -- item 2: read your own write --------------------------------------------------------------------


def test_a_failover_whose_answer_was_lost_is_recognised_owned_and_restored(api, replicas):
    a, _b = leader_then_follower(replicas)
    a.proxy.lose_answer(writes_to(f"/configmaps/{SPLIT_CM}"))  # applied, answer dropped
    assert a.post(FIRING).body["status"] == "accepted"
    wait_for(lambda: a.tickets() and a.notes(), timeout=30, what="the incident's actions")
    assert a.proxy.lost, "the proxy dropped no answer"
    assert split(api) == FAILED_OVER
    response = saved_response(api)
    assert len(responses(api)) == 1 and response["failover"] == "applied" and response["owned"] is True
    # On-call is asked to confirm the failover, never told it failed.
    (title,) = a.page_titles()
    assert "FAILED" not in title and "failed over away from databricks automatically" in title

    assert a.post(RESOLVED).body["status"] == "accepted"
    wait_for(lambda: split(api) == NORMAL, timeout=30, what="the restore")
    assert changes(api) == ["failover", "restore"]
    assert len(a.pages()) == 1 and len(a.tickets()) == 1


# -- item 3: no stall -------------------------------------------------------------------------------


def test_an_intent_whose_answer_was_lost_is_acted_on_at_once_not_after_a_lease(api, replicas):
    """The claim a delivery log took is gone (decision 0216): the write the answer waits for is the
    incident's, and its answer can be lost as the claim's was. The write landed; the store
    recognises it as its own (its write id) and the alert is answered and acted on at once."""
    a, _b = leader_then_follower(replicas)
    a.proxy.lose_answer(lambda method, path: method == "POST" and "/configmaps" in path)  # the incident's create
    assert a.post(FIRING).body["status"] == "accepted"
    wait_for(lambda: split(api) == FAILED_OVER, timeout=30, what="the failover after a lost answer of the intent")
    (lost,) = a.proxy.lost
    assert lost.startswith("POST /api/v1/namespaces/llm/configmaps")
    wait_for(lambda: a.tickets(), timeout=30, what="the ticket")
    assert len(a.pages()) == 1 and changes(api) == ["failover"]
    assert len(responses(api)) == 1


def test_an_api_outage_mid_failover_delays_the_failover_by_the_outage_only(api, replicas):
    a, _b = leader_then_follower(replicas)
    split_writes = writes_to(f"/configmaps/{SPLIT_CM}")
    a.proxy.down(split_writes)  # the API server is gone when the failover is written
    assert a.post(FIRING).body["status"] == "accepted"
    wait_for(lambda: a.proxy.cut >= 3, timeout=30, what="the failover write to be retried")
    assert split(api) == NORMAL
    a.proxy.up()  # back: the retry inside the deadline lands
    wait_for(lambda: split(api) == FAILED_OVER, timeout=30, what="the failover once the API server is back")
    wait_for(lambda: a.tickets(), timeout=30, what="the ticket")
    (title,) = a.page_titles()
    assert "FAILED" not in title
    assert changes(api) == ["failover"] and len(a.pages()) == 1


def test_the_api_server_killed_mid_failover_and_back_with_its_state_delays_the_incident_by_the_outage_only(
        tmp_path, healthy_store):
    api = FakeKubeAPI(state=tmp_path / "etcd.json").start()
    api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
              "data": {"split.json": json.dumps({"weights": NORMAL, "shadow": {}})}})
    a = None
    try:
        a = Replica(tmp_path / "serve-a", api, healthy_store, "serve-a")
        wait_for(a.leads, what="serve-a to lead")
        api.inject(verb="patch", resource="configmaps", name=SPLIT_CM, hold=True, times=1)
        assert a.post(FIRING).body["status"] == "accepted"
        wait_for(lambda: api.held() == 1, timeout=30, what="the failover write in flight")
        api.down()  # killed: the held write is dropped unapplied
        # Down long enough that the leader could not renew within renew_deadline: it steps down.
        wait_for(lambda: not a.leads(), timeout=30, what="serve-a to step down during the outage")
        assert a.proxy.unreachable >= 1
        api.up()  # back, with every acknowledged write (the state file)
        wait_for(lambda: split(api) == FAILED_OVER, timeout=30, what="the failover after the restart")
        wait_for(lambda: a.tickets() and a.notes(), timeout=30, what="the rest of the incident")
        assert changes(api) == ["failover"]
        assert len(a.pages()) == 1 and len(a.tickets()) == 1
        (title,) = a.page_titles()
        assert "FAILED" not in title
    finally:
        if a is not None:
            a.stop()
        api.stop()


def test_an_outage_past_the_retry_deadline_delays_the_incident_by_the_outage_not_by_a_300s_lease(
        tmp_path, healthy_store):
    api = FakeKubeAPI(state=tmp_path / "etcd.json").start()
    api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
              "data": {"split.json": json.dumps({"weights": NORMAL, "shadow": {}})}})
    a = None
    try:
        a = Replica(tmp_path / "serve-a", api, healthy_store, "serve-a")
        a.service.incidents.state.kube.retry_deadline = 2.0  # every call gives up 2 s into an outage
        wait_for(a.leads, what="serve-a to lead")
        api.inject(verb="patch", resource="configmaps", name=SPLIT_CM, hold=True, times=1)
        assert a.post(FIRING).body["status"] == "accepted"
        wait_for(lambda: api.held() == 1, timeout=30, what="the failover write in flight")
        api.down()
        # The failover gave up, and neither the event nor the incident could be handed back.
        wait_for(lambda: [r for r in a.service.actions.actions(action="failover") if r.status == "failed"],
                 timeout=30, what="the failover to give up")
        wait_for(lambda: not a.leads(), timeout=30, what="serve-a to step down during the outage")
        api.up()
        wait_for(lambda: split(api) == FAILED_OVER, timeout=40, what="the failover once the API server is back")
        wait_for(lambda: a.tickets() and a.notes(), timeout=30, what="the rest of the incident")
        # One page: the failover really failed once (its write was dropped unapplied), so the page may
        # say so if it went out as the API server came back; either way it is not repeated.
        assert changes(api) == ["failover"] and len(a.pages()) == 1 and len(a.tickets()) == 1
    finally:
        if a is not None:
            a.stop()
        api.stop()


# -- item 5: one time base --------------------------------------------------------------------------


def test_a_leader_whose_clock_is_90s_slow_acts_at_once_on_the_resend_the_follower_refused(tmp_path, api, healthy_store):
    """The leader runs under faketime 90 s behind: it must act on the alert at once, not when its own
    clock reaches the API server's (hold-downs, stamps and sweeps all read the API server's)."""
    from tests.automation.helpers import Serve
    from tests.conftest import require_binary

    faketime = require_binary("faketime")
    leader_dir, follower_dir = tmp_path / "slow", tmp_path / "follower"
    slow = SlowServe(replica_config(leader_dir, api.url, healthy_store, "serve-slow"), faketime)
    follower = None
    try:
        wait_for(lambda: (api.get("coordination.k8s.io", "leases", NS, "opsctl-serve") or {}).get("spec", {})
                 .get("holderIdentity") == "serve-slow", timeout=30, what="the slow replica to lead")
        follower = Serve(replica_config(follower_dir, api.url, healthy_store, "serve-follower"))
        # The follower does not write the incident (decision 0216): it answers 503, and Alertmanager's
        # resend reaches the leader, whose clock runs 90 s behind: the API server's clock decides.
        refused = follower.post_alertmanager(FIRING)
        assert refused.status == 503 and refused.headers.get("retry-after") == "1"
        from tests.automation.helpers import TOKEN, request

        body = json.dumps(FIRING).encode()
        reply = request(f"http://127.0.0.1:{slow.port}/v1/alertmanager", body,
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        assert reply.status == 202 and reply.json()["status"] == "accepted"
        wait_for(lambda: split(api) == FAILED_OVER, timeout=30, what="the slow leader's failover")
        assert changes(api) == ["failover"]
        (response,) = responses(api)
        assert response["failover"] in ("started", "applied")
    finally:
        if follower is not None:
            follower.stop()
        slow.stop()


class SlowServe:
    """`opsctl serve` in a process of its own whose wall clock runs 90 s behind (Debian's faketime;
    monotonic time left alone): a process with its own clock is the point, so a subprocess."""

    def __init__(self, config: Path, faketime: str):
        import os
        import subprocess
        import sys

        from tests.automation.helpers import TOKEN
        from tests.conftest import REPO, free_port, wait_http

        self.port = free_port()
        self.log = open(config.parent / "serve.log", "w")
        env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG",)}
        env.update(PYTHONPATH=str(REPO), OPSCTL_WEBHOOK_TOKEN=TOKEN, FAKETIME_DONT_FAKE_MONOTONIC="1")
        self.proc = subprocess.Popen([faketime, "-f", "-90s", sys.executable, "-m", "opsctl", "--config", str(config),
                                      "serve", "--bind", f"127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)  # faketime forks serve: stop the whole group
        try:
            wait_http(f"http://127.0.0.1:{self.port}/healthz", timeout=60)
        except Exception:
            self.stop()
            raise RuntimeError(f"opsctl serve under faketime did not start: {(config.parent / 'serve.log').read_text()}")

    def stop(self) -> None:
        import os
        import signal

        from tests.conftest import stop_process

        # faketime runs serve as its child and does not pass SIGTERM on: the group gets it, so no
        # serve outlives the test
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        stop_process(self.proc)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log.close()
