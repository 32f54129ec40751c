"""End to end: a real Prometheus evaluates the generated burn-rate rules over a scrape target whose
errors the test controls, a real Alertmanager notifies `opsctl serve`, which fails over through the
file actuator and restores the split once the alert resolved and the hold-down passed.

Test-specific numbers make it fire and resolve within about two minutes. The SLO period is the
28-30-day table's own (28d), so its page factors hold unscaled: 13.44 over 1h/5m (2% of the budget
in 1h) and 5.6 over 6h/30m (5% in 6h). A 98% objective puts the page thresholds on the error ratio
at 13.44 x 0.02 = 0.2688 and 5.6 x 0.02 = 0.112; rule groups run every 10 s with `for: 10s`;
Prometheus scrapes every second. Every window is longer than the test, so each error ratio is
errors / requests since the first scrape. With databricks failing every request for the first E
seconds, the 6h/30m pair holds until the run is E / 0.112 (about 9 x E) long and then resolves.
(A short period would not do: windows scale with the period and the factors stay, so at 1d the
page threshold of a loose objective is over 1, a burn no error ratio reaches.)
"""

from __future__ import annotations

import json
import textwrap
import time
import urllib.parse
import urllib.request

import pytest

from tests.automation.helpers import Alertmanager, Serve, actions, audit, recorded_split, wait_for, write_serve_config
from tests.automation.proxy_target import ProxyTarget
from tests.conftest import free_port, run_opsctl

pytestmark = [pytest.mark.slow, pytest.mark.prometheus, pytest.mark.alertmanager]

ERROR_SECONDS = 8  # databricks answers every request with server_error this long after the first scrape
HOLD_DOWN = 3
RATES = {"databricks": 400.0, "internal": 10.0}  # requests/s: the 30m guard (>= 1 req/s) holds after 4.5 s

SLO = """\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata:
  name: llm-inference-{backend}-availability
  labels: {{service_name: llm-inference, feature_name: {backend}, slo_name: availability, backend: {backend}}}
spec:
  description: test objective for {backend}
  backend: prometheus
  method: good_bad_ratio
  exporters: []
  service_level_indicator:
    filter_good: 'llm_proxy_requests_total{{backend="{backend}",outcome="ok"}}'
    filter_valid: 'llm_proxy_requests_total{{backend="{backend}",outcome=~"ok|auth_error|throttled|server_error|timeout"}}'
  goal: 0.98
"""

POLICY = """\
- name: availability
  match: {alertname: SloBurnRatePage, severity: page}
  match_re: {slo: ".+-availability", backend: "internal|databricks"}
  actions: {page: {}, failover: {}, ticket: {}, note: true, restore: true}
"""

EXTRA = """\
alerting:
  evaluation_interval: 10s
  page: {for_duration: 10s, min_request_rate: 1.0}
  ticket: {for_duration: 10m, min_request_rate: 1.0}
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
  rate_limit: {max_changes: 50, window: 1h}
capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}
freezes: []
paging: {provider: local}
tickets:
  provider: local
  vendors:
    databricks:
      categories: {inference: Model Serving}
      severities: {Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}
"""


def _first_scrape(url: str) -> float | None:
    """When Prometheus first scraped the target: the start of every window in this test."""
    query = urllib.parse.urlencode({"query": 'min_over_time(timestamp(up{job="llm-proxy"})[10m:1s])'})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as resp:
        results = json.loads(resp.read())["data"]["result"]
    return float(results[0]["value"][1]) if results else None


def test_a_burn_rate_page_fails_over_and_the_split_returns_after_resolution_and_hold_down(tmp_path, prometheus_factory):
    slo_dir = tmp_path / "slos"
    slo_dir.mkdir()
    for backend in RATES:
        (slo_dir / f"{backend}-availability.yaml").write_text(SLO.format(backend=backend))
    am_port = free_port()
    with ProxyTarget(RATES) as target:
        target.set_error_share("databricks", 1.0)
        # The rules come from opsctl's generator with this test's alerting settings.
        rules_config = write_serve_config(tmp_path, policies=POLICY, extra=EXTRA, slo_dir=slo_dir, period="28d")
        rules = tmp_path / "rules.yml"
        result = run_opsctl("--config", str(rules_config), "slo", "rules", str(slo_dir), "--out", str(rules))
        assert result.exit_code == 0, result.output
        prometheus = prometheus_factory(config_yaml=textwrap.dedent(f"""\
            global: {{scrape_interval: 1s, evaluation_interval: 1s}}
            rule_files: ["{rules}"]
            alerting:
              alertmanagers: [{{static_configs: [{{targets: ["127.0.0.1:{am_port}"]}}]}}]
            scrape_configs:
              - job_name: llm-proxy
                static_configs: [{{targets: ["127.0.0.1:{target.port}"]}}]
            """))
        serve_dir = tmp_path / "serve"
        serve_dir.mkdir()
        metrics = f'metrics:\n  source: prometheus\n  prometheus: {{url: "{prometheus.url}", timeout: 5, report_deadline: 20}}\n'
        config = write_serve_config(serve_dir, policies=POLICY, extra=metrics + EXTRA, slo_dir=slo_dir, period="28d",
                                    automation_extra=f"hold_down: {HOLD_DOWN}s\n")
        server = Serve(config)
        am = Alertmanager(tmp_path / "am", f"{server.url}/v1/alertmanager", port=am_port)
        try:
            first = wait_for(lambda: _first_scrape(prometheus.url), timeout=30, what="the first scrape")
            time.sleep(max(0.0, first + ERROR_SECONDS - time.time()))
            target.set_error_share("databricks", 0.0)

            wait_for(lambda: recorded_split(serve_dir) == {"databricks": 0, "internal": 100}, timeout=90, what="the failover")
            failed_over = time.time()
            (failover,) = [e for e in audit(serve_dir) if e["action"] == "failover"]
            assert failover["outcome"] == "applied" and failover["emergency"] is False
            guards = {g["name"]: g for g in failover["guards"]}
            assert guards["budget"]["ok"] and not guards["budget"].get("overridden")  # internal judged healthy
            assert guards["capacity"]["ok"]

            wait_for(lambda: recorded_split(serve_dir) == {"databricks": 80, "internal": 20}, timeout=180, what="the restore")
            restored = time.time()
            (restore,) = [e for e in audit(serve_dir) if e["action"] == "restore"]
            assert restore["outcome"] == "applied"
            # The service records the restore action once the controller returned, just after the split.
            wait_for(lambda: [a for a in actions(serve_dir) if a["action"] == "restore"], what="the restore on record")
            done = [(a["action"], a["status"]) for a in actions(serve_dir) if a["action"] != "note"]
            assert done == [("failover", "applied"), ("page", "applied"), ("ticket", "applied"), ("restore", "applied")]
            # Prometheus saw between E-1 and E+1 seconds of errors (1 s scrapes), so the 6h/30m pair
            # (threshold 5.6 x (1 - 0.98)) cannot resolve before (E - 1) / 0.112 seconds into the run;
            # then the hold-down.
            assert restored - first >= (ERROR_SECONDS - 1) / (5.6 * (1 - 0.98)) + HOLD_DOWN
            assert restored - failed_over >= HOLD_DOWN
            print(f"after the first scrape: failover {failed_over - first:.1f}s, restored {restored - first:.1f}s")
        finally:
            am.stop()
            server.stop()
