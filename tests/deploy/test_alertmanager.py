"""deploy/alertmanager.yml: valid for `amtool check-config`, routes pages to PagerDuty and tickets to
the ticket queue, both also to the `opsctl serve` webhook; and a real Alertmanager on loopback running
the same routing tree delivers accordingly, with the secrets read from their files."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, free_port, require_binary, wait_http

CONFIG = REPO / "deploy" / "alertmanager.yml"


def amtool(*args):
    return subprocess.run([require_binary("amtool"), *args], capture_output=True, text=True, timeout=60)


def test_amtool_check_config_accepts_the_example():
    result = amtool("check-config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("labels, receivers", [
    (["alertname=SloBurnRatePage", "severity=page", "slo=llm-inference-service-availability"], "pagerduty,opsctl"),
    (["alertname=SloBurnRateTicket", "severity=ticket", "slo=llm-inference-internal-latency-1s"], "ticket-queue,opsctl"),
    (["alertname=DiskFull", "severity=warning"], "ticket-queue"),
    # the fast-burn tier: its own routes, and only those (one PagerDuty incident, not two)
    (["alertname=SloFastBurnPage", "severity=page", "tier=fast", "category=availability",
      "slo=llm-inference-databricks-availability"], "opsctl,pagerduty"),
    (["alertname=SloMetricsAbsent", "severity=page", "category=absent", "slo=llm-inference-internal-availability"],
     "pagerduty,opsctl"),
])
def test_routing_tree_sends_each_severity_to_its_receivers(labels, receivers):
    result = amtool("config", "routes", "test", f"--config.file={CONFIG}", f"--verify.receivers={receivers}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receivers


def test_the_fast_tier_waits_seconds_where_the_slower_pages_wait_tens():
    doc = yaml.safe_load(CONFIG.read_text())
    fast = [r for r in doc["route"]["routes"] if r.get("matchers") == ['tier="fast"']]
    assert {r["receiver"]: r["group_wait"] for r in fast} == {"opsctl": "1s", "pagerduty": "5s"}
    assert fast[0]["continue"] is True and not fast[1].get("continue", False)
    slow = {r["receiver"]: r["group_wait"] for r in doc["route"]["routes"] if r.get("matchers") != ['tier="fast"']}
    assert slow["opsctl"] == "10s" and slow["pagerduty"] == "30s"


def test_secrets_are_files_not_values():
    text = CONFIG.read_text()
    doc = yaml.safe_load(text)
    receivers = {r["name"]: r for r in doc["receivers"]}
    assert receivers["pagerduty"]["pagerduty_configs"][0]["routing_key_file"].startswith("/etc/alertmanager/secrets/")
    opsctl = receivers["opsctl"]["webhook_configs"][0]
    assert opsctl["url"] == "http://opsctl.opsctl.svc:9095/v1/alertmanager"
    assert opsctl["http_config"]["authorization"]["credentials_file"].startswith("/etc/alertmanager/secrets/")
    assert "routing_key:" not in text and "credentials:" not in text and "service_key:" not in text


class Capture:
    """A loopback HTTP server recording every POST: path, headers, JSON body."""

    def __init__(self):
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with capture.lock:
                    capture.requests.append({"path": self.path, "headers": dict(self.headers),
                                             "body": json.loads(body)})
                self.send_response(202 if self.path.startswith("/v2/enqueue") else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"status":"success","message":"Event processed","dedup_key":"x"}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def on(self, path):
        with self.lock:
            return [r for r in self.requests if r["path"] == path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def loopback_copy(work: Path, capture: Capture) -> Path:
    """The example with receivers on loopback, secrets in temp files, and waits cut to a second.
    The routing tree, matchers, grouping keys and inhibition stay as they are."""
    doc = yaml.safe_load(CONFIG.read_text())
    secrets = {"pagerduty": "pd-routing-key-0123456789abcdef", "tickets": "ticket-token", "opsctl": "opsctl-token"}
    for name, value in secrets.items():
        (work / name).write_text(value + "\n")
    for route in [doc["route"], *doc["route"]["routes"]]:
        for key in ("group_wait", "group_interval"):
            if key in route:
                route[key] = "1s"
    receivers = {r["name"]: r for r in doc["receivers"]}
    pd = receivers["pagerduty"]["pagerduty_configs"][0]
    pd["routing_key_file"] = str(work / "pagerduty")
    pd["url"] = f"{capture.url}/v2/enqueue"
    for name, secret, path in (("ticket-queue", "tickets", "/tickets"), ("opsctl", "opsctl", "/v1/alertmanager")):
        hook = receivers[name]["webhook_configs"][0]
        hook["url"] = capture.url + path
        hook["http_config"]["authorization"]["credentials_file"] = str(work / secret)
    path = work / "alertmanager.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def alert(name, severity, slo, burn="20.00"):
    return {
        "labels": {"alertname": name, "severity": severity, "slo": slo, "backend": "databricks",
                   "service": "llm-inference", "long_window": "1h", "short_window": "5m"},
        "annotations": {"summary": f"{slo}: error budget burning {burn}x over 1h", "burn_rate": burn,
                        "runbook_url": f"https://runbooks.test/{slo}-{severity}.md"},
    }


def test_real_alertmanager_delivers_pages_tickets_and_automation_copies(tmp_path):
    binary = require_binary("prometheus-alertmanager")
    capture = Capture()
    config = loopback_copy(tmp_path, capture)
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "w")
    proc = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/-/ready", timeout=30)
        import urllib.request

        alerts = [
            alert("SloBurnRatePage", "page", "llm-inference-databricks-availability"),
            alert("SloBurnRateTicket", "ticket", "llm-inference-internal-latency-1s"),
            # Inhibited: the same SLO pages.
            alert("SloBurnRateTicket", "ticket", "llm-inference-databricks-availability"),
        ]
        request = urllib.request.Request(f"{base}/api/v2/alerts", data=json.dumps(alerts).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if capture.on("/v2/enqueue") and capture.on("/tickets") and len(capture.on("/v1/alertmanager")) >= 2:
                break
            time.sleep(0.2)
        time.sleep(3)  # three more group waits: anything inhibited would have arrived by now

        pages = capture.on("/v2/enqueue")
        assert len(pages) == 1, pages
        event = pages[0]["body"]
        assert event["routing_key"] == "pd-routing-key-0123456789abcdef"
        assert event["event_action"] == "trigger"
        assert event["payload"]["severity"] == "critical"
        assert event["payload"]["summary"] == "llm-inference-databricks-availability: error budget burning 20.00x over 1h"
        assert event["payload"]["custom_details"]["slo"] == "llm-inference-databricks-availability"
        assert event["links"][0]["href"] == "https://runbooks.test/llm-inference-databricks-availability-page.md"

        tickets = capture.on("/tickets")
        assert [t["headers"]["Authorization"] for t in tickets] == ["Bearer ticket-token"]
        assert [a["labels"]["slo"] for t in tickets for a in t["body"]["alerts"]] == ["llm-inference-internal-latency-1s"]

        automation = capture.on("/v1/alertmanager")
        assert {r["headers"]["Authorization"] for r in automation} == {"Bearer opsctl-token"}
        delivered = sorted((a["labels"]["severity"], a["labels"]["slo"]) for r in automation for a in r["body"]["alerts"])
        assert delivered == [("page", "llm-inference-databricks-availability"),
                             ("ticket", "llm-inference-internal-latency-1s")]
        assert all(len(r["body"]["alerts"]) == 1 for r in automation), "one alert per automation notification"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
        capture.close()
