"""`opsctl slo dashboard`: a provisioning-ready Grafana JSON model whose every panel query parses in a
real Prometheus and reads only series the generated rules record."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

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
    assert doc["uid"] == "opsctl-slo" and doc["schemaVersion"] >= 30
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
