"""`opsctl slo dashboard`: a provisioning-ready Grafana JSON model whose every panel query parses in a
real Prometheus, reads only series the generated rules record (each selector found by parsing the
query) with the service's matcher, and round-trips through grafana-foundation-sdk's models."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from opsctl.slo.dashboard import panel_queries, service_uid
from opsctl.slo.dashboard_check import query_problems, schema_problems, selectors
from tests.conftest import write_config

METRIC = re.compile(r"\b(slo:[a-z_]+:[a-z_0-9]+)\b")


@pytest.fixture
def made(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    out = tmp_path / "dashboard.json"
    result = opsctl("--config", str(cfg), "slo", "dashboard", "--out", str(out))
    assert result.exit_code == 0, result.output
    rules = yaml.safe_load(opsctl("--config", str(cfg), "slo", "rules").stdout)
    return json.loads(out.read_text()), rules


def queries(doc):
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in doc["annotations"]["list"]]
    exprs += [v["definition"] for v in doc["templating"]["list"] if v["type"] == "query"]
    return exprs


def test_the_dashboard_has_the_four_views_and_a_slo_variable(made):
    doc, _ = made
    assert doc["uid"] == "opsctl-slo-llm-inference" and doc["schemaVersion"] >= 30
    assert [p["title"] for p in doc["panels"]] == [
        "Error budget left (28d)", "Burn rate per alert window", "SLI over time", "Traffic split"]
    assert {v["name"] for v in doc["templating"]["list"]} == {"datasource", "slo"}
    burn = doc["panels"][1]["targets"]
    # One burn series per alert window and one threshold line per pair, at the rules' factors.
    assert sum("vector(" in t["expr"] for t in burn) == 4
    assert {t["expr"] for t in burn if "vector(" in t["expr"]} == {
        "vector(13.44)", "vector(5.6)", "vector(2.8)", "vector(0.9333333333)"}


def test_every_query_names_only_series_the_generated_rules_record(made):
    doc, rules = made
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    named = {m for q in queries(doc) for m in METRIC.findall(q)}
    assert named and named <= recorded, named - recorded
    assert query_problems(panel_queries(doc), recorded) == []


def test_every_selector_of_every_query_carries_the_service(made):
    doc, _ = made
    found = [s for _, q in panel_queries(doc) for s in selectors(q.removeprefix("label_values(").rsplit(",", 1)[0]
                                                                    if q.startswith("label_values(") else q)]
    assert len(found) >= 12
    for s in found:
        assert ("service", "=", "llm-inference") in [(m.label, m.op, m.value) for m in s.matchers], s


def test_the_split_divides_by_the_same_services_total():
    """The split's denominator is matched on service: no scalar() over every service's `all` rate."""
    from opsctl.slo.dashboard import _split_expr

    expr = _split_expr('service="a"')
    assert "scalar(" not in expr and "/ on(service) group_left()" in expr
    assert [(s.metric, [(m.label, m.value) for m in s.matchers]) for s in selectors(expr)] == [
        ("slo:sli_valid:rate5m", [("service", "a"), ("backend", "all"), ("backend", "")]),
        ("slo:sli_valid:rate5m", [("service", "a"), ("backend", "all")])]


def test_the_board_round_trips_through_grafanas_schema(made):
    doc, _ = made
    assert schema_problems(doc) == []


def test_the_schema_check_finds_a_misplaced_key(made):
    doc, _ = made
    bad = json.loads(json.dumps(doc))
    bad["panels"][0]["gridpos"] = bad["panels"][0].pop("gridPos")  # misspelt: Grafana drops it
    bad["templating"]["list"][1]["refersh"] = 2
    problems = schema_problems(bad)
    assert sorted(p.split(":")[0] for p in problems) == ["/panels[0]/gridpos", "/templating/list[1]/refersh"], problems


def test_the_query_check_finds_unknown_series_and_missing_service_matchers():
    recorded = {"slo:objective:ratio"}
    problems = query_problems([
        ("ok", 'max by (service, backend) (slo:objective:ratio{service="a"} offset 5m) / on(service) group_left() '
               'llm_proxy_requests_total{service="a"}'),
        ("typo", 'slo:objectve:ratio{service="a"}'),
        ("unscoped", 'sum(rate(llm_proxy_requests_total{backend="internal"}[5m]))'),
        ("bare", '{service="a"}'),
        ("variable", "label_values(slo:objective:ratio, slo)"),
    ], recorded)
    assert [p.split(":")[0] for p in problems] == ["typo", "unscoped", "bare", "variable"], problems


def test_selectors_are_found_past_functions_keywords_and_numbers():
    expr = ('sum by (a) (rate(x:y{a="b}"}[5m] offset 1h)) / on(a) group_left(c) max without (d) (z) '
            '> bool 1e-05 unless vector(2)')
    assert [(s.metric, [m.value for m in s.matchers]) for s in selectors(expr)] == [
        ("x:y", ["b}"]), ("z", [])]


def test_uids_carry_the_service_and_fit_grafanas_bound():
    assert service_uid("llm-inference") == "opsctl-slo-llm-inference"
    long_a, long_b = "a" * 30 + "-one", "a" * 30 + "-two"
    assert len(service_uid(long_a)) <= 40 and len(service_uid(long_b)) <= 40
    assert service_uid(long_a) != service_uid(long_b)


@pytest.mark.prometheus
def test_every_query_parses_in_a_real_prometheus(made, prometheus_factory, tmp_path):
    doc, rules = made
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
    server = prometheus_factory(rule_files=[rules_file])
    for expr in queries(doc):
        if expr.startswith("label_values("):
            continue  # a Grafana template function, not PromQL
        promql = expr.replace("$slo", ".+")
        body = urllib.parse.urlencode({"query": promql}).encode()
        try:
            with urllib.request.urlopen(f"{server.url}/api/v1/query", data=body, timeout=10) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            pytest.fail(f"{promql!r} does not parse: {exc.read()[:300]!r}")
        assert answer["status"] == "success", (promql, answer)
