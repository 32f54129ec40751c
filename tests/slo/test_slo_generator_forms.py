"""Every SLO form slo-generator 2.6's Prometheus backend runs gives, in `opsctl slo report`, the numbers
slo-generator itself computes (its `compute()`, its own query building, a client on the same real
Prometheus at the same instant), and `opsctl slo rules` generates rules for it that promtool accepts."""

from __future__ import annotations

import json
import subprocess
import textwrap
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.conftest import require_binary, write_config
from tests.slo import data as d

END = 1_795_000_000
STEPS = 2 * 8640
AT = "2026-11-18T11:06:40Z"
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200,
           "period": 28 * 86400}

HEAD = """\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata:
  name: {name}
  labels: {{service_name: {service}{backend}}}
spec:
  description: {name}
  backend: prometheus
  method: {method}
  goal: 0.999
  service_level_indicator:
"""

FORMS = {
    "ratio-valid": ("good_bad_ratio", """\
    filter_good: 'llm_proxy_requests_total{backend="internal",outcome="ok"}'
    filter_valid: 'llm_proxy_requests_total{backend="internal"}'
"""),
    "ratio-bad": ("good_bad_ratio", """\
    filter_good: 'llm_proxy_requests_total{backend="internal",outcome="ok"}'
    filter_bad: 'llm_proxy_requests_total{backend="internal",outcome="server_error"}'
"""),
    "ratio-window-placeholder": ("good_bad_ratio", """\
    filter_good: 'llm_proxy_requests_total{backend="databricks",outcome="ok"}[window]'
    filter_valid: 'llm_proxy_requests_total{backend="databricks"}[window]'
"""),
    "ratio-operators": ("good_bad_ratio", """\
    filter_good: 'llm_proxy_requests_total{outcome="ok"}'
    filter_valid: 'llm_proxy_requests_total'
    operators: [rate, sum]
"""),
    "distribution-cut": ("distribution_cut", """\
    expression: 'llm_proxy_request_duration_seconds_bucket{backend="internal"}'
    threshold_bucket: 0.5
"""),
    "query-sli": ("query_sli", """\
    expression: >-
      sum(increase(llm_proxy_requests_total{outcome="ok"}[window]))
      / sum(increase(llm_proxy_requests_total[window]))
"""),
}


def slo_file(directory, name, *, backend=True, service="checkout"):
    method, sli = FORMS[name]
    text = HEAD.format(name=name, method=method, service=service,
                       backend=", backend: internal" if backend and name != "query-sli" else "") + sli
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    from tests.conftest import PrometheusServer

    traffic = {
        "internal": d.make_traffic(END, STEPS, 2000, error_share=0.0005, slow=[(STEPS - 900, STEPS - 400)],
                                   incidents=[(STEPS - 60, STEPS - 1, 0.01)]),
        "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 2000, STEPS - 1700, 0.002)]),
    }
    work = tmp_path_factory.mktemp("forms")
    om = work / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    server = PrometheusServer(work, openmetrics=om)
    yield server
    server.stop()


class PrometheusClient:
    """The client slo-generator's Prometheus backend calls, on a real server, pinned to one instant."""

    def __init__(self, url, at):
        self.url, self.at = url, at

    def query(self, metric):
        body = urllib.parse.urlencode({"query": metric, "time": self.at}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=body, timeout=30) as response:
            return response.read().decode()


def slo_generator_sli(path, url, at):
    from slo_generator.compute import compute

    steps = [{"name": n, "window": s, "burn_rate_threshold": 1, "alert": False, "message_alert": "a",
              "message_ok": "b"} for n, s in WINDOWS.items()]
    shared = {"backends": {"prometheus": {}}, "exporters": {},
              "error_budget_policies": {"default": {"steps": steps}}}
    config = yaml.safe_load(path.read_text())
    from datetime import datetime

    ts = int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp())
    reports = compute(config, shared, timestamp=ts, client=PrometheusClient(url, ts))
    return {r["error_budget_policy_step_name"]: r for r in reports}


@pytest.mark.prometheus
@pytest.mark.slow
@pytest.mark.parametrize("form", sorted(FORMS))
def test_report_equals_slo_generator_for_each_form(opsctl, tmp_path, prometheus, form):
    slos = tmp_path / "slos"
    slos.mkdir()
    path = slo_file(slos, form)
    cfg = write_config(tmp_path, slo_dir=slos)
    result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", prometheus.url, "--at", AT, "-o", "json")
    assert result.exit_code in (0, 1), result.output
    [row] = json.loads(result.stdout)
    theirs = slo_generator_sli(path, prometheus.url, AT)
    for window in WINDOWS:
        assert theirs[window]["valid"], theirs[window]
    # slo-generator rounds its SLI to 6 decimals.
    assert row["sli"] == pytest.approx(theirs["period"]["sli_measurement"], abs=6e-7), form
    for window in WINDOWS:
        if window == "period":
            continue
        ours = 1 - row["burn_rate"][window] * (1 - 0.999)
        assert ours == pytest.approx(theirs[window]["sli_measurement"], abs=6e-7), (form, window)
    # And the error is real in the data: not every window is trivially perfect.
    assert min(theirs[w]["sli_measurement"] for w in WINDOWS) < 0.9999


def test_an_slo_without_a_backend_label_is_reported_and_ties_no_guard(tmp_path):
    from opsctl.slo.loading import load_slos

    slos = tmp_path / "slos"
    slos.mkdir()
    slo_file(slos, "ratio-valid", backend=False)
    [slo] = load_slos([slos], ["internal", "databricks"])
    assert slo.backend is None


def test_rules_are_generated_for_every_form_and_carry_the_configs_service(opsctl, tmp_path):
    promtool = require_binary("promtool")
    slos = tmp_path / "slos"
    slos.mkdir()
    for form in FORMS:  # half the files name the service (the config's), half name none
        slo_file(slos, form, service="checkout")
        if len(list(slos.iterdir())) % 2:
            path = slos / f"{form}.yaml"
            path.write_text(path.read_text().replace("service_name: checkout", "slo_name: x"))
    cfg = write_config(tmp_path, slo_dir=slos)
    cfg.write_text(cfg.read_text().replace("service: llm-inference\n", "service: checkout\n", 1))
    out = tmp_path / "rules.yaml"
    result = opsctl("--config", str(cfg), "slo", "rules", "--out", str(out))
    assert result.exit_code == 0, result.output
    check = subprocess.run([promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    every = [g for g in yaml.safe_load(out.read_text())["groups"] if g["name"].startswith("opsctl-slo-")]
    all_groups = [g for g in every if not g["name"].endswith("-fast")]
    assert len(all_groups) == 2 * len(FORMS)  # per SLO: its rules and alerts, and its period group
    # and the fast-burn tier's group for each SLO counting events; a 99.9% latency SLO has one too
    # (factor 0.03 / 0.001 = 30x, above the 1h/5m pair's 13.44x: docs/decisions/0400)
    fast = {g["name"] for g in every if g["name"].endswith("-fast")}
    assert fast and all(g.replace("-fast", "") in {x["name"] for x in all_groups} for g in fast)
    assert [g for g in fast if "distribution-cut" in g]
    assert not [g for g in fast if "query-sli" in g]
    for group in all_groups:
        for rule in group["rules"]:
            assert rule["labels"]["service"] == "checkout", (group["name"], rule)
    groups = [g for g in all_groups if not g["name"].endswith("-period")]
    exprs = {g["name"].rsplit("-", 2)[-2] + "-" + g["name"].rsplit("-", 2)[-1]: "\n".join(r["expr"] for r in g["rules"])
             for g in groups}
    # distribution_cut: good = the buckets at the threshold (any spelling of 0.5), valid = the _count.
    assert 'llm_proxy_request_duration_seconds_bucket{backend="internal",le=~"0\\\\.50*"}[5m]' in exprs["distribution-cut"]
    assert 'llm_proxy_request_duration_seconds_count{backend="internal"}[5m]' in exprs["distribution-cut"]
    assert "sum(rate(llm_proxy_requests_total[5m]))" in exprs["ratio-operators"]
    assert "outcome=\"server_error\"}[5m])) or vector(0)" in exprs["ratio-bad"]


def test_unknown_keys_are_refused_with_the_file_and_key_path(opsctl, tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    path = slo_file(slos, "ratio-valid")
    path.write_text(path.read_text().replace("  goal: 0.999\n", "  goal: 0.999\n  gaol: 0.99\n")
                    .replace("    filter_valid:", "    filter_vaild: 'x'\n    filter_valid:"))
    cfg = write_config(tmp_path, slo_dir=slos)
    result = opsctl("--config", str(cfg), "slo", "validate")
    assert result.exit_code == 2
    assert f"{path}: spec.gaol: unknown key" in result.stderr
    assert f"{path}: spec.service_level_indicator.filter_vaild: unknown key" in result.stderr


@pytest.mark.parametrize("sli, message", [
    ("    filter_good: 'x{a=\"b\"}'\n", "filter_valid: missing: give filter_valid"),
    ("    filter_good: 'x'\n    filter_valid: 'y'\n    filter_bad: 'z'\n", "filter_bad: give filter_valid or filter_bad, not both"),
    ("    filter_good: 'rate(x[5m])'\n    filter_valid: 'y'\n", "needs the `[window]` placeholder"),
    ("    filter_good: 'x'\n    filter_valid: 'y'\n    operators: ['sum)']\n", "operators: must be a list of PromQL function names"),
])
def test_malformed_ratio_forms_name_the_key(tmp_path, sli, message):
    from opsctl.errors import ConfigError
    from opsctl.slo.loading import load_slos

    path = tmp_path / "x.yaml"
    path.write_text(HEAD.format(name="x", method="good_bad_ratio", service="s", backend="") + sli)
    with pytest.raises(ConfigError) as info:
        load_slos([path], ["internal"])
    assert message in str(info.value)
    assert f"{path}: spec.service_level_indicator." in str(info.value)


def test_distribution_cut_needs_a_bucket_selector_and_a_bound(tmp_path):
    from opsctl.errors import ConfigError
    from opsctl.slo.loading import load_slos

    path = tmp_path / "x.yaml"
    path.write_text(HEAD.format(name="x", method="distribution_cut", service="s", backend="")
                    + "    expression: 'llm_proxy_request_duration_seconds_count'\n    threshold_bucket: abc\n")
    with pytest.raises(ConfigError) as info:
        load_slos([path], ["internal"])
    text = str(info.value)
    assert "spec.service_level_indicator.expression: must select a histogram's `_bucket` series" in text \
        or "spec.service_level_indicator.threshold_bucket" in text
