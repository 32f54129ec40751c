"""Two services of one catalog, each with an SLO named `availability`, their rules loaded together
(issue 25, names and labels): every recorded-series selector the rules and runbooks generate carries
the service matcher beside `slo`, so one service burning fires only its own alerts.

`promtool test rules` on one file of both services' rules: chat answers 10% of its requests with a
5xx from minute 10 on, search answers every request. At a 99.9% goal chat burns 100x over every
window that lies inside the burst, far above every pair's factor (13.44, 5.6, 2.8, 0.93) and below
the fast tier's 300x; search burns 0x. So at minute 40 (past the 15m `for:` of the tickets) the
firing alerts are exactly chat's four burn-rate pairs, and none of search's.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from opsctl.metrics.promql import selectors_in
from tests.conftest import require_binary, run_opsctl
from tests.slo import rules_data as r

SERVICES = ("chat", "search")
BURNING = "chat"
STEPS = 40 * 6  # 40 minutes of 10 s samples
REQUESTS = 100  # per 10 s step: 10 requests/s, above every pair's minimum rate
ERRORS = 10  # per step from minute 10 on, in the burning service: 10% bad
BURST_FROM = 10 * 6


def write_catalog(root: Path) -> Path:
    directory = root / "services"
    directory.mkdir(parents=True)
    (directory / "_defaults.yaml").write_text(textwrap.dedent("""\
        backends:
          internal: {kind: internal}
          databricks: {kind: vendor, vendor: databricks}
        slos: {dir: ../slos}
        state_dir: ../state
        quality: {rules: {enabled: false}}
        """) + r.ALERTING_CONFIG)
    for service in SERVICES:
        (directory / f"{service}.yaml").write_text(f"service: {service}\n")
        slos = root / "slos" / service
        slos.mkdir(parents=True)
        (slos / "availability.yaml").write_text(textwrap.dedent(f"""\
            apiVersion: sre.google.com/v2
            kind: ServiceLevelObjective
            metadata:
              name: availability
              labels: {{service_name: {service}, feature_name: databricks, slo_name: availability, backend: databricks}}
            spec:
              description: {service} on databricks
              backend: prometheus
              method: good_bad_ratio
              exporters: []
              service_level_indicator:
                filter_good: 'llm_proxy_requests_total{{service="{service}",backend="databricks",outcome="ok"}}'
                filter_valid: 'llm_proxy_requests_total{{service="{service}",backend="databricks",outcome=~"ok|server_error"}}'
              goal: 0.999
            """))
    return directory


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Both services' rules in one file (their groups), each group tagged with its service."""
    root = tmp_path_factory.mktemp("same-name")
    directory = write_catalog(root)
    groups = []
    for service in SERVICES:
        result = run_opsctl("--catalog", str(directory), "--service", service, "slo", "rules")
        assert result.exit_code == 0, result.output
        groups += [(service, g) for g in yaml.safe_load(result.stdout)["groups"]]
    path = root / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [g for _, g in groups]}, sort_keys=False, width=1000))
    return root, directory, path, groups


def _recorded(selectors):
    return [s for s in selectors if s.metric.startswith("slo:")]


def _carries(selector, service: str) -> bool:
    return {m.label: (m.op, m.value) for m in selector.matchers}.get("service") == ("=", service)


def test_both_services_rules_pass_one_promtool_check_with_distinct_groups(fleet):
    _, _, path, groups = fleet
    names = [g["name"] for _, g in groups]
    assert len(names) == len(set(names))
    checked = subprocess.run([require_binary("promtool"), "check", "rules", str(path)],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_recorded_selector_of_the_rules_carries_its_service(fleet):
    _, _, _, groups = fleet
    seen = 0
    for service, group in groups:
        for rule in group["rules"]:
            exprs = [rule["expr"]]
            # the `cause` annotation and summary read the per-cause ratios in a Go template query
            for text in rule.get("annotations", {}).values():
                exprs += text.split("`")[1::2]
            for selector in _recorded([s for e in exprs for s in selectors_in(e)]):
                seen += 1
                assert _carries(selector, service), (group["name"], selector)
                assert any(m.label == "slo" and m.value == "availability" for m in selector.matchers)
            for selector in selectors_in(rule["expr"]):
                if selector.metric.startswith("llm_proxy_"):
                    assert _carries(selector, service), (group["name"], rule["expr"])
    assert seen >= 2 * 10  # each service's alerts, derived windows, budget and cause lookups


def test_every_recorded_and_alerts_selector_of_the_runbooks_carries_its_service(fleet):
    from opsctl.config.catalog import Catalog
    from opsctl.runbooks.generator import plan_runbooks
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from tests.test_catalog_generated_queries import _queries_in

    _, directory, _, _ = fleet
    for cfg in Catalog(directory).load_all():
        plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
        runbooks = plan_runbooks(cfg, plans)
        exprs = [e for rb in runbooks for e in _queries_in(rb.context, [])]
        picked = [s for e in exprs for s in selectors_in(e) if s.metric.startswith("slo:") or s.metric == "ALERTS"]
        assert len(picked) >= 5, exprs
        for selector in picked:
            assert _carries(selector, cfg.service), selector


def _input_series() -> list[dict]:
    import numpy as np

    out = []
    for service in SERVICES:
        errors = np.zeros(STEPS, dtype=np.int64)
        if service == BURNING:
            errors[BURST_FROM:] = ERRORS
        ok = np.full(STEPS, REQUESTS, dtype=np.int64) - errors
        for outcome, per_step in (("ok", ok), ("server_error", errors)):
            out.append({"series": f'llm_proxy_requests_total{{service="{service}",backend="databricks",'
                                  f'outcome="{outcome}"}}',
                        "values": r.encode(np.concatenate([[0], np.cumsum(per_step)]))})
    return out


def _firing(service: str, severity: str, long: str, short: str) -> dict:
    alertname = {"page": "SloBurnRatePage", "ticket": "SloBurnRateTicket"}[severity]
    labels = {"alertname": alertname, "alertstate": "firing", "slo": "availability", "backend": "databricks",
              "service": service, "severity": severity, "category": "availability", "long_window": long,
              "short_window": short}
    return {"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}", "value": 1}


def test_only_the_burning_services_alerts_fire_when_both_share_an_slo_name(fleet):
    root, _, path, _ = fleet
    expected = [_firing(BURNING, sev, long, short) for sev, long, short, *_ in r.PAIRS]
    tests = [
        {"expr": 'ALERTS{alertstate="firing",alertname=~"SloBurnRate.*"}', "eval_time": "40m",
         "exp_samples": expected},
        {"expr": 'ALERTS{service="search"}', "eval_time": "40m", "exp_samples": []},
        # before the burst neither service's alerts are even pending
        {"expr": "ALERTS", "eval_time": "9m", "exp_samples": []},
    ]
    done = r.run_promtool_test(root, path, _input_series(), [], tests)
    assert done.returncode == 0, done.stdout + done.stderr
