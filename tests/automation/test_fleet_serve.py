"""One `opsctl serve` for a catalog of three services (issue 25 item 3), in kubernetes state mode against
the loopback API server: each alert acts by the policies and on the split of the service its `service`
label names; one service's failing or hung actuator does not hold another's failover back; an alert
naming no service of the catalog is answered, counted and never acted on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.automation.helpers import (
    PD_SECRET_NEW, kube_incidents, kube_responses, TOKEN, alert, bearer, page_key, message, pd_event, request, signed, wait_for,
)
from tests.conftest import REPO, free_port, stop_process, wait_http
from tests.fakes.kube_api import FakeKubeAPI, Fault

NS = "llm"
# Each service's split before anything happens (different, so a write to the wrong one shows).
SPLITS = {"search": {"databricks": 80, "internal": 20}, "chat": {"databricks": 60, "internal": 40},
          "embed": {"databricks": 90, "internal": 10}}

pytestmark = pytest.mark.slow  # a serve subprocess with three services and their Leases, a few seconds each

FAILOVER = """\
- name: {name}
  match: {{alertname: SloBurnRatePage, severity: page}}
  match_re: {{backend: "internal|databricks"}}
  actions: {{page: {{}}, failover: {{}}, note: true, restore: true}}
"""
PAGE_ONLY = """\
- name: chat-page-only
  match: {alertname: SloBurnRatePage, severity: page}
  actions: {page: {}}
"""


def write_catalog(root: Path, api_url: str, healthy_store: Path) -> Path:
    catalog = root / "services"
    catalog.mkdir(parents=True)
    (catalog / "_defaults.yaml").write_text(textwrap.dedent(f"""\
        backends:
          internal: {{kind: internal, description: vLLM pods}}
          databricks: {{kind: vendor, vendor: databricks, description: Databricks Model Serving}}
        slos: {{dir: "{root / 'slos'}", period: 28d, require_service_matcher: false}}
        state_dir: "{root / 'state'}"
        metrics: {{max_data_age: 3650d}}
        state: {{backend: kubernetes, namespace: {NS}}}
        traffic:
          actuator: configmap
          kubernetes: {{host: "{api_url}", namespace: {NS}, timeout: 2}}
          rate_limit: {{max_changes: 50, window: 1h}}
        capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25,
                    max_replicas: 10}}
        paging: {{provider: local}}
        tickets: {{provider: local}}
        freezes: []
        automation:
          hold_down: 1h
          pagerduty_secrets: [{{env: FLEET_PD_SECRET}}]
          leader_election: {{lease_duration: 4s, renew_deadline: 3s, retry_period: 1s}}
        """))
    policies = {"search": FAILOVER.format(name="search-failover"), "chat": PAGE_ONLY,
                "embed": FAILOVER.format(name="embed-failover")}
    for name, policy in policies.items():
        (catalog / f"{name}.yaml").write_text(
            f"service: {name}\ntraffic:\n  configmap: {{name: {name}-split, key: split.json}}\n"
            "automation:\n  policies:\n" + textwrap.indent(policy, "    "))
        state = root / "state" / name
        state.mkdir(parents=True)
        shutil.copy(healthy_store, state / "metrics.sqlite")
        slos = root / "slos" / name  # the budget guard's SLOs, over the healthy day of the copied store
        slos.mkdir(parents=True)
        for slo in ("databricks-availability.yaml", "internal-availability.yaml"):
            shutil.copy(REPO / "slos" / slo, slos / slo)
    return catalog


class FleetServe:
    """`opsctl --catalog DIR serve` as a subprocess (it runs until stopped, ended by SIGTERM like a pod)."""

    def __init__(self, catalog: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = catalog.parent / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")
        env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG", "OPSCTL_SERVICE", "OPSCTL_CATALOG")}
        env.update(PYTHONPATH=str(REPO), OPSCTL_WEBHOOK_TOKEN=TOKEN, POD_NAME="serve-a", FLEET_PD_SECRET=PD_SECRET_NEW)
        self.proc = subprocess.Popen([sys.executable, "-m", "opsctl", "--catalog", str(catalog), "serve",
                                      "--bind", f"127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=catalog.parent)
        try:
            wait_http(f"{self.url}/readyz", timeout=30)
        except Exception:
            self.stop()
            raise RuntimeError(f"opsctl serve did not start:\n{self.log_text()}")

    def post(self, payload: dict):
        return request(f"{self.url}/v1/alertmanager", json.dumps(payload).encode(), headers=bearer())

    def metrics(self) -> dict[str, float]:
        text = request(f"{self.url}/metrics").body.decode()
        return {name: float(value) for line in text.splitlines() if line and not line.startswith("#")
                for name, _, value in [line.rpartition(" ")]}

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


@pytest.fixture
def api():
    fake = FakeKubeAPI().start()
    for name, weights in SPLITS.items():
        fake.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-split", "namespace": NS},
                   "data": {"split.json": json.dumps({"weights": weights, "shadow": {}})}})
    yield fake
    fake.stop()


@pytest.fixture
def fleet(tmp_path, api, healthy_store):
    server = FleetServe(write_catalog(tmp_path, api.url, healthy_store))
    try:
        # Each service elects its own leader on its own Lease.
        wait_for(lambda: all(holder(api, s) == "serve-a" for s in SPLITS), what="serve-a to lead every service")
        yield server
    finally:
        server.stop()
        print(server.log_text())  # shown when the test fails


def split(api, service: str) -> dict:
    return json.loads(api.get("", "configmaps", NS, f"{service}-split")["data"]["split.json"])["weights"]


def holder(api, service: str) -> str | None:
    lease = api.get("coordination.k8s.io", "leases", NS, f"opsctl-{service}-serve")
    return (lease or {}).get("spec", {}).get("holderIdentity")


def held(api, service: str) -> list[str]:
    """The fingerprints of the alerts the service's incidents hold (deliveries are not kept: 0216)."""
    return sorted(a["fingerprint"] for i in kube_incidents(api, NS, service) for a in i.get("alerts", []))


def page_events(api, service: str) -> list[str]:
    """The PagerDuty event ids the service's incidents' pages took in."""
    return [e for i in kube_incidents(api, NS, service) for e in (i.get("page") or {}).get("events", [])]


def response_alerts(api, service: str) -> list[str]:
    """`policy/fingerprint` of every alert the service's incidents' responses hold."""
    return sorted(f"{r['policy']}/{a['fingerprint']}" for r in kube_responses(api, NS, service) for a in r["alerts"])


def pages(tmp_path: Path, service: str) -> list[dict]:
    path = tmp_path / "state" / service / "paging" / "ledger.json"
    return json.loads(path.read_text())["incidents"] if path.exists() else []


def page_alert(service: str | None, fingerprint: str, backend: str = "databricks") -> dict:
    a = alert(fingerprint=fingerprint, slo=f"{backend}-availability", backend=backend)
    if service is None:
        a["labels"].pop("service")
    else:
        a["labels"]["service"] = service
    return a


FAILED_OVER = {"databricks": 0, "internal": 100}


def test_one_serve_routes_each_services_alert_to_its_own_policies_and_split(fleet, api, tmp_path):
    answer = fleet.post(message(page_alert("search", "f1"), page_alert("chat", "f2"), page_alert("embed", "f3")))
    assert answer.status == 202, answer.body
    assert answer.json()["status"] == "accepted"
    assert sorted(answer.json()["services"]) == ["chat", "embed", "search"]

    wait_for(lambda: split(api, "search") == FAILED_OVER and split(api, "embed") == FAILED_OVER,
             what="search and embed failed over by their own policies")
    wait_for(lambda: len(pages(tmp_path, "chat")) == 1, what="chat's page-only policy paged")
    # chat's policy pages only: its split is as it was. Each service's log holds its own alert alone.
    assert split(api, "chat") == SPLITS["chat"]
    for service, fingerprint in (("search", "f1"), ("chat", "f2"), ("embed", "f3")):
        wait_for(lambda s=service: fleet.metrics().get(f'opsctl_automation_events_total{{result="done",service="{s}"}}')
                 == 1, what=f"{service}'s one alert done")
        assert held(api, service) == [fingerprint]
        policy = {"search": "search-failover", "chat": "chat-page-only", "embed": "embed-failover"}[service]
        assert response_alerts(api, service) == [f"{policy}/{fingerprint}"]
    # Each service's pages name its own policy; the failovers' records name theirs.
    assert len(pages(tmp_path, "search")) == 1 and len(pages(tmp_path, "embed")) == 1
    records = {s: json.loads(api.get("", "configmaps", NS, f"{s}-split")["metadata"]["annotations"]
                             ["opsctl.io/traffic-record"])["changes"] for s in ("search", "embed")}
    assert [c["action"] for c in records["search"]] == ["failover"]
    assert "search-failover" in records["search"][0]["reason"]
    assert "embed-failover" in records["embed"][0]["reason"]

    # A PagerDuty acknowledgement names an incident, not a service: every service is asked, and only
    # search, whose incident it is, takes it in (on its page) and notes it against its response.
    incident = page_key("search")  # the incident's page: Alertmanager's dedup key (issue 36)
    body = json.dumps(pd_event(event_id="01FLEET", incident_key=incident)).encode()
    acked = request(f"{fleet.url}/v1/pagerduty", body, headers=signed(body, PD_SECRET_NEW))
    assert acked.status == 202, acked.body
    assert sorted(acked.json()["services"]) == ["chat", "embed", "search"]
    assert {s: page_events(api, s) for s in SPLITS} == {"search": ["01FLEET"], "chat": [], "embed": []}
    wait_for(lambda: fleet.metrics().get('opsctl_automation_actions_total{action="pagerduty",'
                                         'policy="search-failover",service="search",status="noop"}') == 1,
             what="search's response noting the acknowledgement")

    # /metrics: each service's series carry its name.
    samples = fleet.metrics()
    assert samples['opsctl_automation_actions_total{action="failover",policy="search-failover",service="search",'
                   'status="applied"}'] == 1
    assert samples['opsctl_automation_actions_total{action="page",policy="chat-page-only",service="chat",'
                   'status="applied"}'] == 1
    assert not [k for k in samples if "chat-page-only" in k and 'service="chat"' not in k]
    assert not [k for k in samples if 'action="pagerduty"' in k and 'service="search"' not in k]
    assert samples['opsctl_webhook_deliveries_total{result="accepted",service="embed",source="alertmanager"}'] == 1


def test_a_failing_actuator_of_one_service_does_not_hold_back_anothers_failover(fleet, api):
    # search's split answers every write 500: its failover fails, and is retried with backoff.
    broken = api.inject(Fault(verb="patch|update", resource="configmaps", name="search-split", status=500))
    assert fleet.post(message(page_alert("search", "5a"))).status == 202
    wait_for(lambda: broken.fired >= 2, what="search's failover failing")

    assert fleet.post(message(page_alert("embed", "e1"))).status == 202
    wait_for(lambda: split(api, "embed") == FAILED_OVER, what="embed's failover while search's keeps failing")
    # In that order: embed acted while search had not (its split as it was, its writes refused).
    assert split(api, "search") == SPLITS["search"] and broken.fired >= 2
    samples = wait_for(lambda: (m := fleet.metrics()).get(
        'opsctl_automation_events_total{result="retried",service="search"}', 0) >= 1 and m,
        what="search's event handed back for a retry")
    assert samples['opsctl_automation_events_total{result="done",service="embed"}'] == 1
    assert samples.get('opsctl_automation_events_total{result="done",service="search"}', 0) == 0
    assert split(api, "search") == SPLITS["search"]

    api.clear_faults()  # search's API writes work again: its retry fails over
    wait_for(lambda: split(api, "search") == FAILED_OVER, timeout=30, what="search's failover once writes work")


def test_a_hung_actuator_of_one_service_does_not_delay_anothers_failover(fleet, api):
    # search's split write hangs (held by the fake until released): its worker waits on it.
    api.inject(Fault(verb="patch|update", resource="configmaps", name="search-split", hold=True))
    assert fleet.post(message(page_alert("search", "a1"))).status == 202
    wait_for(lambda: api.held() >= 1, what="search's failover write hanging")

    assert fleet.post(message(page_alert("embed", "a2"))).status == 202
    wait_for(lambda: split(api, "embed") == FAILED_OVER, what="embed's failover while search's hangs")
    assert api.held() >= 1 and split(api, "search") == SPLITS["search"]  # search's is still in the air

    api.clear_faults()
    api.release()
    wait_for(lambda: split(api, "search") == FAILED_OVER, timeout=30, what="search's failover once released")


def test_an_alert_naming_no_service_of_the_catalog_is_answered_counted_and_never_acted_on(fleet, api, tmp_path):
    unknown = fleet.post(message(page_alert("billing", "b1"), page_alert(None, "b2")))
    assert unknown.status == 422
    body = unknown.json()
    assert {(u["fingerprint"], u["reason"]) for u in body["unrouted"]} == {("b1", "unknown_service"),
                                                                            ("b2", "missing_label")}
    assert "service" in body["error"]

    # Mixed with a known one: the known one is taken, the other named in the answer.
    mixed = fleet.post(message(page_alert("embed", "b3"), page_alert("billing", "b4")))
    assert mixed.status == 202
    assert [(u["fingerprint"], u["reason"]) for u in mixed.json()["unrouted"]] == [("b4", "unknown_service")]
    assert list(mixed.json()["services"]) == ["embed"]
    wait_for(lambda: split(api, "embed") == FAILED_OVER, what="embed's failover")

    samples = fleet.metrics()
    assert samples['opsctl_fleet_alerts_unrouted_total{reason="unknown_service"}'] == 2
    assert samples['opsctl_fleet_alerts_unrouted_total{reason="missing_label"}'] == 1
    # Nothing of them was recorded or done by any service.
    assert {s: held(api, s) for s in SPLITS} == {"search": [], "chat": [], "embed": ["b3"]}
    assert response_alerts(api, "embed") == ["embed-failover/b3"]
    assert split(api, "search") == SPLITS["search"] and split(api, "chat") == SPLITS["chat"]
    assert pages(tmp_path, "search") == [] and pages(tmp_path, "chat") == []
    log = fleet.log_text()
    assert "service='billing' is not in the catalog" in log and "no service label" in log


def test_an_unknown_service_is_422_counted_by_its_name_and_logged_once_per_name_not_per_alert(fleet):
    # Three messages, five alerts: billing four times (two messages of two), payments once.
    for alerts in ((page_alert("billing", "c1"), page_alert("billing", "c2")), (page_alert("billing", "c3"),),
                   (page_alert("billing", "c4"), page_alert("payments", "c5"))):
        assert fleet.post(message(*alerts)).status == 422
    samples = fleet.metrics()
    assert samples['opsctl_fleet_alerts_unknown_service_total{name="billing"}'] == 4
    assert samples['opsctl_fleet_alerts_unknown_service_total{name="payments"}'] == 1
    assert samples['opsctl_fleet_alerts_unrouted_total{reason="unknown_service"}'] == 5
    lines = fleet.log_text().splitlines()
    assert len([x for x in lines if "service='billing' is not in the catalog" in x]) == 1
    assert len([x for x in lines if "service='payments' is not in the catalog" in x]) == 1
