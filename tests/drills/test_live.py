"""A live-mode drill, in wall-clock time, against a real Prometheus and loopback fakes that speak the
real protocols: the Kubernetes API (the Istio fault on the vendor egress route, the traffic split's
VirtualService), PagerDuty (Events API v2 + REST API v2, HTTPS) and Zendesk (tickets, HTTPS).

The fake LLM proxy turns the fake cluster's state into the client-side metrics Prometheus scrapes
every second, so the fault the drill injects through the Kubernetes API is what the burn-rate
alerts detect, and the failover the drill applies is what makes the errors stop. Deadlines are in
seconds (a test-specific scenario), so the whole drill takes well under a minute.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest

from tests.conftest import REPO
from tests.drills.conftest import DrillEnv
from tests.fakes.fixtures import FAST_RETRY, ca, ca_file  # noqa: F401  (fixtures)
from tests.fakes.kube_api import FakeKubeAPI
from tests.fakes.llm_proxy import FakeLLMProxy
from tests.fakes.pagerduty import FakePagerDuty
from tests.fakes.zendesk import FakeZendesk
from tests.tickets.conftest import CATEGORY_FIELD, SEVERITY_FIELD, ZD_EMAIL, ZD_TOKEN

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

ROUTING_KEY = "R0UTING-k3y-drill-5ecret"
API_TOKEN = "api-t0ken-drill-5ecret"
ISTIO = ("networking.istio.io", "virtualservices")


def traffic_vs() -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "llm-inference", "namespace": "llm"},
            "spec": {"hosts": ["llm.llm.svc.cluster.local"], "http": [{"name": "primary", "route": [
                {"destination": {"host": "vllm.llm.svc.cluster.local", "port": {"number": 8000}}, "weight": 20},
                {"destination": {"host": "databricks-egress.llm.svc.cluster.local", "port": {"number": 443}},
                 "weight": 80}]}]}}


def egress_vs() -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "databricks-egress", "namespace": "llm-staging"},
            "spec": {"hosts": ["databricks-egress.llm.svc.cluster.local"], "http": [{"name": "egress", "timeout": "30s",
                     "route": [{"destination": {"host": "example.cloud.databricks.com", "port": {"number": 443}}}]}]}}


def live_config(prom_url, kube_url, pd, zd, ca_file, state) -> str:
    return f"""\
service: llm-inference
backends:
  internal: {{kind: internal}}
  databricks: {{kind: vendor, vendor: databricks}}
metrics:
  source: prometheus
  prometheus: {{url: "{prom_url}", timeout: 5, report_deadline: 20}}
slos: {{dir: "{REPO / 'slos'}", period: 28d}}
alerting:
  evaluation_interval: 10s
  page: {{for_duration: 0s, min_request_rate: 1.0}}
  ticket: {{for_duration: 0s, min_request_rate: 0.1}}
paging:
  provider: pagerduty
  pagerduty:
    routing_key: {{env: PD_ROUTING_KEY}}
    api_token: {{env: PD_API_TOKEN}}
    service_id: PSVC001
    from_email: oncall-bot@example.com
    events_url: {pd.url}
    api_url: {pd.url}
    ca_file: {ca_file}
    retry: {FAST_RETRY}
tickets:
  provider: zendesk
  zendesk:
    url: {zd.url}
    email: {ZD_EMAIL}
    api_token: {{env: ZD_TOKEN}}
    category_field_id: {CATEGORY_FIELD}
    ca_file: {ca_file}
    retry: {FAST_RETRY}
  vendors:
    databricks:
      provider: zendesk
      categories: {{inference: model_serving, platform: workspace_platform}}
      severities: {{Sev1: urgent, Sev2: high, Sev3: normal, Sev4: low}}
traffic:
  actuator: istio
  default_split: {{databricks: 80, internal: 20}}
  kubernetes: {{namespace: llm, host: "{kube_url}", timeout: 5}}
  istio: {{name: llm-inference, route: primary}}
  destinations:
    internal: {{host: vllm.llm.svc.cluster.local, port: 8000}}
    databricks: {{host: databricks-egress.llm.svc.cluster.local, port: 443}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 100, headroom: 0.25, max_replicas: 10}}
freezes: []
drills:
  live: {{fault_namespaces: [llm-staging]}}
automation:   # the drill's alerts go to this policy engine: it fails over and files the ticket
  policies:
    - name: failover-on-availability-page
      match: {{severity: page, category: availability}}
      match_re: {{backend: "internal|databricks"}}
      actions: {{failover: {{}}, ticket: {{category: inference, severity: Sev1}}}}
state_dir: "{state}"
"""


LIVE_SCENARIO = {
    "version": 1,
    "title": "Live vendor outage (test scenario, seconds)",
    "max-duration": "90s",
    "environment": {"live": {"poll-interval": "1s"}},
    "steady-state-hypothesis": {"title": "healthy", "probes": [
        {"name": "no page alert", "probe": "alerts-firing", "severity": "page", "tolerance": 0},
        {"name": "split as configured", "probe": "traffic-split", "tolerance": {"databricks": 80, "internal": 20}}]},
    "method": [{"name": "vendor egress aborts 20% with 503", "action": "inject-fault", "pauses": {"before": "1s"},
                "fault": {"kind": "vendor-5xx", "backend": "databricks", "rate": 0.2, "duration": "5m",
                          "live": {"namespace": "llm-staging", "virtual-service": "databricks-egress"}}}],
    "paging": {"group-wait": "1s", "fast-group-wait": "1s", "automation-group-wait": "1s",
               "fast-automation-group-wait": "1s"},
    "responders": {"on-call": {"acknowledge-after": "2s", "escalate-after": "never"}},
    "stop-conditions": [{"condition": "real-incident-open"}],
    "expectations": [
        {"name": "detected", "expect": "detected", "slo": "databricks-availability", "within": "20s"},
        {"name": "paged", "expect": "paged", "within": "25s"},
        {"name": "acknowledged", "expect": "acknowledged", "within": "30s"},
        {"name": "failed over", "expect": "failover-applied", "from": "databricks", "full": True, "within": "40s"},
        {"name": "ticket in inference", "expect": "vendor-ticket", "vendor": "databricks", "category": "inference",
         "within": "45s"},
        {"name": "recovered", "expect": "slo-recovered", "slo": "service-availability", "window": "10s",
         "within": "75s"},
    ],
    "rollbacks": [{"action": "remove-faults"}, {"action": "restore-traffic"}, {"action": "resolve-pages"}],
}


def prom_value(url: str, query: str) -> float | None:
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout=5) as r:
        result = json.loads(r.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture
def live_world(tmp_path, ca, ca_file, prometheus_factory, monkeypatch):
    kube = FakeKubeAPI().start()
    kube.seed(traffic_vs())
    kube.seed(egress_vs())
    proxy = FakeLLMProxy(kube, rps=200).start()
    pd = FakePagerDuty(ca, routing_keys={ROUTING_KEY}, api_tokens={API_TOKEN: "full"})
    zd = FakeZendesk(ca, email=ZD_EMAIL, token=ZD_TOKEN, field_ids={CATEGORY_FIELD, SEVERITY_FIELD})
    with pd, zd:
        prom = prometheus_factory(config_yaml=(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: llm-proxy\n    static_configs:\n      - targets: ['{proxy.url[7:]}']\n"))
        deadline = time.monotonic() + 30
        while (prom_value(prom.url, "count_over_time(llm_proxy_requests_total{outcome=\"ok\",backend=\"databricks\"}[1m])")
               or 0) < 4:
            assert time.monotonic() < deadline, "Prometheus never scraped the fake proxy"
            time.sleep(0.25)
        env = {"PD_ROUTING_KEY": ROUTING_KEY, "PD_API_TOKEN": API_TOKEN, "ZD_TOKEN": ZD_TOKEN}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        drill = DrillEnv(tmp_path, live_config(prom.url, kube.url, pd, zd, ca_file, tmp_path / "state"))
        drill.state = tmp_path / "state"
        try:
            yield drill, kube, pd, zd, env
        finally:
            proxy.stop()
            kube.stop()


def test_a_live_drill_injects_a_real_istio_fault_pages_fails_over_files_the_ticket_and_leaves_nothing_behind(live_world):
    drill, kube, pd, zd, env = live_world
    scenario = drill.write_scenario("live-vendor-outage", LIVE_SCENARIO)
    started = time.monotonic()
    result = drill.run("drill", "run", str(scenario), "--live", "-o", "json", env=env)
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["mode"] == "live" and report["outcome"] == "passed"
    assert [v["name"] for v in report["expectations"] if v["passed"]] == [e["name"] for e in LIVE_SCENARIO["expectations"]]
    assert elapsed < 80

    # The fault went into the vendor egress route through the Kubernetes API, marked, and came out again.
    patches = [r for r in kube.requests if r.method == "PATCH" and "/virtualservices/databricks-egress" in r.path]
    injected, removed = patches[0].body, patches[-1].body
    assert injected["spec"]["http"][0]["fault"] == {"abort": {"percentage": {"value": 20.0}, "httpStatus": 503}}
    assert injected["metadata"]["annotations"] == {"opsctl.io/drill-run": report["run_id"]}
    assert "resourceVersion" in injected["metadata"]
    assert removed["metadata"]["annotations"] == {"opsctl.io/drill-run": None}
    egress = kube.get(*ISTIO, "llm-staging", "databricks-egress")
    assert "fault" not in egress["spec"]["http"][0]
    assert egress["spec"]["http"][0]["timeout"] == "30s", "the rest of the route is untouched"
    assert "opsctl.io/drill-run" not in (egress["metadata"].get("annotations") or {})
    assert any("[DRILL]" in e["message"] for e in kube.events("databricks-egress"))

    # The failover moved the vendor's share through the traffic VirtualService; the rollback put it back.
    split_writes = [r for r in kube.requests if r.method == "PATCH" and "/virtualservices/llm-inference" in r.path]
    weights = [{e["destination"]["host"].split(".")[0]: e["weight"] for e in w.body["spec"]["http"][0]["route"]}
               for w in split_writes]
    assert weights == [{"vllm": 100, "databricks-egress": 0}, {"vllm": 20, "databricks-egress": 80}]
    route = kube.get(*ISTIO, "llm", "llm-inference")["spec"]["http"][0]["route"]
    assert [e["weight"] for e in route] == [20, 80]

    # PagerDuty: one drill incident, marked, acknowledged, resolved; change events marked as a drill.
    [incident] = pd.incidents
    assert incident["incident_key"].startswith("opsctl-drill-")
    assert incident["status"] == "resolved"
    trigger = incident["alerts"][0]
    assert trigger["payload"]["summary"].startswith("[DRILL] ")
    assert trigger["payload"]["custom_details"]["drill"] is True
    assert trigger["payload"]["custom_details"]["drill_run"] == report["run_id"]
    actions = [r.json["event_action"] for r in pd.requests_to("POST", "/v2/enqueue")]
    assert actions == ["trigger", "acknowledge", "resolve"]
    assert len(pd.change_events) == 2 and all(c["payload"]["custom_details"]["drill"] is True for c in pd.change_events)

    # Zendesk: one drill ticket, in the category field value that maps to inference.
    [ticket] = zd.tickets.values()
    assert "drill" in ticket["tags"]
    assert ticket["subject"].startswith("[DRILL] ")
    assert {"id": CATEGORY_FIELD, "value": "model_serving"} in ticket["custom_fields"]

    # The user's audit log holds the drill's traffic changes, marked as a drill.
    entries = [json.loads(line) for line in (drill.state / "audit.jsonl").read_text().splitlines()]
    applied = [e for e in entries if e.get("kind") == "traffic" and e["outcome"] == "applied"]
    assert [e["action"] for e in applied] == ["failover", "restore"]
    assert all(e["drill"] is True and e["drill_run"] == report["run_id"] for e in applied)
    drill_events = [(e["event"], e.get("target", "")) for e in entries if e.get("kind") == "drill"]
    assert [event for event, _ in drill_events] == ["drill-started", "fault-injected", "fault-removed", "drill-finished"]
    assert "VirtualService llm-staging/databricks-egress" in drill_events[1][1]

    # Measured in wall-clock seconds: detection needs one scrape and one poll after the fault.
    m = report["measurements"]
    assert 0 < m["time_to_detect"] <= m["time_to_page"] <= m["time_to_acknowledge"]
    # The automation fails over on its own, without waiting for on-call to acknowledge.
    assert m["time_to_detect"] <= m["time_to_mitigate"] and "opsctl serve, policy" in applied[0]["reason"]
    assert report["clean"] and report["leftovers"] == []


def test_a_live_drill_killed_mid_run_is_rolled_back_by_cleanup_on_the_real_targets(live_world):
    import os
    import signal

    drill, kube, pd, zd, env = live_world
    scenario = drill.write_scenario("live-vendor-outage", LIVE_SCENARIO)
    proc = drill.popen("drill", "run", str(scenario), "--live")
    try:
        drill.wait_state(lambda s: s["split"]["written"] is not None, timeout=60, what="the live failover")
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "fault" in kube.get(*ISTIO, "llm-staging", "databricks-egress")["spec"]["http"][0]
    route = kube.get(*ISTIO, "llm", "llm-inference")["spec"]["http"][0]["route"]
    assert [e["weight"] for e in route] == [100, 0]
    assert [i["status"] for i in pd.incidents] != ["resolved"]
    # A new live drill refuses to start until the interrupted one is cleaned up.
    refused = drill.run("drill", "run", str(scenario), "--live", "--dry-run", env=env)
    assert refused.exit_code == 4 and "stopped without rolling back" in refused.stdout

    result = drill.run("drill", "cleanup", "-o", "json", env=env)
    assert result.exit_code == 0, result.output
    [cleaned] = json.loads(result.stdout)
    assert cleaned["status"] == "cleaned", cleaned
    egress = kube.get(*ISTIO, "llm-staging", "databricks-egress")
    assert "fault" not in egress["spec"]["http"][0]
    assert "opsctl.io/drill-run" not in (egress["metadata"].get("annotations") or {})
    route = kube.get(*ISTIO, "llm", "llm-inference")["spec"]["http"][0]["route"]
    assert [e["weight"] for e in route] == [20, 80]
    assert [i["status"] for i in pd.incidents] == ["resolved"]
    report = json.loads((drill.runs()[0] / "report.json").read_text())
    assert report["outcome"] == "aborted" and report["clean"]
