"""The Alertmanager configuration generated from automation.policies (`opsctl slo routes`):
amtool accepts it, the committed copies are current, policies outside the paging route get their
own opsctl route, and a real Alertmanager running it sends PagerDuty and the opsctl webhook one
notification whose group key hashes to the incident's dedup key (opsctl/incident/grouping.py)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import urllib.request

import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.incident.grouping import dedup_key, service_group_key
from opsctl.slo.routing import RouteTargets, routing_document
from tests.conftest import REPO, free_port, require_binary, run_opsctl, stop_process, wait_http
from tests.deploy.test_alertmanager import Capture

BUILTIN = REPO / "opsctl" / "defaults" / "opsctl.yaml"


def generate(*args: str) -> str:
    result = run_opsctl(*args) if "routes" in args else run_opsctl(*args, "slo", "routes")
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("part", ["all", "automation"])
def test_amtool_check_config_accepts_the_generated_routing(tmp_path, part):
    path = tmp_path / "alertmanager.yml"
    path.write_text(generate("--config", str(REPO / "opsctl.yaml"), "slo", "routes", "--part", part))
    result = subprocess.run([require_binary("amtool"), "check-config", str(path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_the_committed_routing_is_what_the_shipped_configs_generate():
    assert (REPO / "deploy" / "alertmanager.yml").read_text() == generate("--config", str(REPO / "opsctl.yaml"))
    assert (REPO / "opsctl" / "defaults" / "alertmanager.yaml").read_text() == generate("--config", str(BUILTIN))
    assert (REPO / "deploy" / "alertmanager-opsctl-receiver.yml").read_text() == generate(
        "--config", str(REPO / "opsctl.yaml"), "slo", "routes", "--part", "automation")


def test_check_names_a_stale_file_and_exits_1(tmp_path):
    stale = tmp_path / "alertmanager.yml"
    stale.write_text((REPO / "deploy" / "alertmanager.yml").read_text().replace("group_wait: 1s", "group_wait: 2s"))
    result = run_opsctl("--config", REPO / "opsctl.yaml", "slo", "routes", "--check", stale)
    assert result.exit_code == 1
    assert f"{stale} differs from what the config generates" in result.stderr


def test_secrets_are_referenced_by_file_never_inlined():
    text = (REPO / "deploy" / "alertmanager.yml").read_text()
    doc = yaml.safe_load(text)
    for receiver in doc["receivers"]:
        for pd in receiver.get("pagerduty_configs") or []:
            assert pd["routing_key_file"] == "/etc/alertmanager/secrets/pagerduty/routing-key"
        for hook in receiver.get("webhook_configs") or []:
            assert hook["http_config"]["authorization"]["credentials_file"].startswith("/etc/alertmanager/secrets/")
    assert "routing_key:" not in text and "credentials:" not in text and "service_key:" not in text


def test_the_paging_receiver_holds_pagerduty_and_the_opsctl_webhook_grouped_by_service():
    doc = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    [paging] = [r for r in doc["route"]["routes"] if r.get("matchers") == ['severity="page"']]
    assert paging["group_by"] == ["service"] and not paging.get("continue", False)
    receiver = {r["name"]: r for r in doc["receivers"]}[paging["receiver"]]
    assert len(receiver["pagerduty_configs"]) == 1
    assert [h["url"] for h in receiver["webhook_configs"]] == ["http://opsctl.opsctl.svc:9095/v1/alertmanager"]


def test_only_policies_acting_outside_the_paging_route_get_an_opsctl_route():
    # The shipped policies: four pin severity page (the paging route takes them), one matches
    # category absent at any severity: it gets a route of its own, pages excluded (they reach serve once).
    cfg = load_config_file(BUILTIN)
    routes = routing_document(cfg)["route"]["routes"]
    opsctl = [r["matchers"] for r in routes if r["receiver"] == "opsctl"]
    assert opsctl == [['category="absent"', 'severity!="page"']]


def test_a_policy_s_match_re_becomes_a_regex_matcher(tmp_path):
    text = (BUILTIN.read_text()
            .replace("      match: {category: absent}\n",
                     "      match: {severity: ticket}\n      match_re: {slo: \".*-latency-.*\"}\n"))
    path = tmp_path / "opsctl.yaml"
    path.write_text(text)
    routes = routing_document(load_config_file(path))["route"]["routes"]
    assert [r["matchers"] for r in routes if r["receiver"] == "opsctl"] == [
        ['severity="ticket"', 'slo=~".*-latency-.*"', 'severity!="page"']]


def alert(name, severity, slo, *, category, backend="databricks", service="llm-inference"):
    return {"labels": {"alertname": name, "severity": severity, "slo": slo, "backend": backend, "service": service,
                       "category": category, "long_window": "1h", "short_window": "5m"},
            "annotations": {"summary": f"{slo} burning", "burn_rate": "20.00", "runbook_url": "https://r.test/x.md"}}


def post(base, alerts):
    request = urllib.request.Request(f"{base}/api/v2/alerts", data=json.dumps(alerts).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def test_real_alertmanager_group_key_hashes_to_the_incident_dedup_key(tmp_path):
    binary = require_binary("prometheus-alertmanager")
    capture = Capture()
    cfg = load_config_file(REPO / "opsctl.yaml")
    secrets = tmp_path / "secrets"
    for name, value in (("pagerduty/routing-key", "pd-key-0123456789abcdef"), ("tickets/token", "ticket-token"),
                        ("opsctl/token", "opsctl-token")):
        (secrets / name).parent.mkdir(parents=True, exist_ok=True)
        (secrets / name).write_text(value + "\n")
    doc = routing_document(cfg, RouteTargets(serve_url=capture.url, ticket_url=capture.url + "/tickets",
                                             secrets_dir=str(secrets)))
    for receiver in doc["receivers"]:
        for pd in receiver.get("pagerduty_configs") or []:
            pd["url"] = capture.url + "/v2/enqueue"
    config = tmp_path / "alertmanager.yml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "w")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/-/ready", timeout=30)
        # An auth page, then a latency page on the same service: one group (grouped by service).
        post(base, [alert("SloBurnRatePage", "page", "llm-inference-databricks-availability", category="availability"),
                    alert("SloBurnRatePage", "page", "llm-inference-other-availability", category="availability",
                          service="other-service")])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (len(capture.on("/v1/alertmanager")) < 2
                                               or len(capture.on("/v2/enqueue")) < 2):
            time.sleep(0.2)
        post(base, [alert("SloBurnRatePage", "page", "llm-inference-databricks-latency-1s", category="latency")])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(capture.on("/v1/alertmanager")) < 3
                                               or len(capture.on("/v2/enqueue")) < 3):
            time.sleep(0.2)
        hooks = capture.on("/v1/alertmanager")
        pages = capture.on("/v2/enqueue")
        assert len(hooks) >= 3 and len(pages) >= 2, (hooks, pages)
        by_service: dict[str, set[str]] = {}
        for hook in hooks:
            by_service.setdefault(hook["body"]["commonLabels"]["service"], set()).add(hook["body"]["groupKey"])
        route_key = cfg.automation.incident.paging_route_key
        for service in ("llm-inference", "other-service"):
            # What Alertmanager carried is what grouping.py computes, and hashes to the incident's key.
            assert by_service[service] == {service_group_key(route_key, service)}
            expected = hashlib.sha256(f'{{}}/{{severity="page"}}:{{service="{service}"}}'.encode()).hexdigest()
            assert dedup_key(service_group_key(route_key, service)) == expected
        # PagerDuty's events from the same receiver carry that very dedup key: one incident per service.
        assert {p["body"]["dedup_key"] for p in pages} == {
            dedup_key(service_group_key(route_key, s)) for s in ("llm-inference", "other-service")}
        assert {p["body"]["routing_key"] for p in pages} == {"pd-key-0123456789abcdef"}
        # A group of two alerts with different summaries: PagerDuty refuses a blank summary, so both are named.
        [both] = [p for p in pages if "latency-1s" in p["body"]["payload"]["summary"]]
        assert both["body"]["payload"]["summary"] == ("llm-inference: 2 alert(s) firing: "
                                                      "llm-inference-databricks-availability burning; "
                                                      "llm-inference-databricks-latency-1s burning; ")
        assert {h["headers"]["Authorization"] for h in hooks} == {"Bearer opsctl-token"}
        later = [h for h in hooks if any(a["labels"]["slo"].endswith("latency-1s") for a in h["body"]["alerts"])]
        assert later and {h["body"]["groupKey"] for h in later} == {service_group_key(route_key, "llm-inference")}
    finally:
        stop_process(proc)
        log.close()
        capture.close()
