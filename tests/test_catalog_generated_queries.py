"""The remaining generated selectors carry their service (issue 25 item 2): the queries written
into runbooks, the latency judge's histogram, `slo report --at`'s alignment and the chain drill's
hop queries. Each is parsed (opsctl.metrics.promql.selectors_in) and, where a real Prometheus
holding two services is at hand, asked and compared with that service's own traffic."""

from __future__ import annotations

import json

import pytest

from opsctl.config.catalog import Catalog
from opsctl.metrics import schema
from tests.conftest import run_opsctl
from tests.test_catalog_selectors import (  # noqa: F401  (shared_prometheus is a fixture)
    END, WINDOW, Recording, _assert_scoped, _configs, _in_window, shared_prometheus, write_catalog)

AT = "2025-11-20T00:00:00Z"  # END


def _queries_in(value, out: list[str]) -> list[str]:
    """Every runbooks Query expression in a runbook's context (what the templates can show)."""
    from opsctl.runbooks.facts import Query

    if isinstance(value, Query):
        out.append(value.expr)
    elif isinstance(value, dict):
        for v in value.values():
            _queries_in(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _queries_in(v, out)
    return out


def test_every_runbook_query_of_a_catalog_service_carries_its_service(tmp_path):
    from opsctl.runbooks.generator import plan_runbooks
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    directory = write_catalog(tmp_path, ["chat", "search"])
    for cfg in Catalog(directory).load_all():
        plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
        runbooks = plan_runbooks(cfg, plans)
        exprs = [e for r in runbooks for e in _queries_in(r.context, [])]
        # the breakdowns, outcome, token and peak queries all select the proxy's own series
        assert any("histogram_quantile" in e for e in exprs) and any("max_over_time" in e for e in exprs)
        _assert_scoped(exprs, cfg.service)


def test_the_shipped_single_config_runbook_queries_have_no_service_matcher():
    """Matcher off for a single config without metrics.service_label: the runbooks stay as they were."""
    from opsctl.runbooks import facts

    assert facts.peak_query().expr == f"max_over_time(sum(rate({schema.REQUESTS}[5m]))[7d:5m])"
    assert facts.outcome_query("throttled").expr == \
        f'sum by (backend) (rate({schema.REQUESTS}{{outcome="throttled"}}[5m]))'


def test_chain_drill_hop_queries_carry_the_service(shared_prometheus):
    from opsctl.drills.chain.readings import BURN_RECORDS, burn_query, outcomes_query, recorded_service_matcher
    from opsctl.metrics.base import open_source
    from opsctl.metrics.promql import selectors_in

    directory, server, series = shared_prometheus
    for service, cfg in _configs(directory, server.url).items():
        outcomes = outcomes_query("internal", WINDOW, cfg.service_matcher)
        _assert_scoped([outcomes], service)
        total = open_source(cfg).query_many([f"sum({outcomes})"], END)[0]
        assert total == pytest.approx(_in_window({"internal": series[service]["internal"]}, schema.REQUEST_COLUMNS),
                                      rel=0.01)
        for record in BURN_RECORDS:  # the recorded SLO series carry `service` (slo/rules.py)
            (selector,) = selectors_in(burn_query(record, "internal", recorded_service_matcher(cfg)))
            assert ("service", "=", service) in {(m.label, m.op, m.value) for m in selector.matchers}


def test_latency_judge_reads_only_its_own_services_histogram(shared_prometheus):
    """`rollout latency` through the real CLI: its request counts are the service's own, not the sum."""
    directory, server, series = shared_prometheus
    for service in ("chat", "search"):
        result = run_opsctl("--catalog", directory, "--service", service, "rollout", "latency",
                            "--baseline", "internal", "--candidate", "databricks", "--window", f"{WINDOW}s",
                            "--margin", "0.01",  # the catalog's services have no 500 ms SLO to draw it from
                            "--prometheus-url", server.url, "--source", "prometheus", "--at", AT, "-o", "json")
        assert result.exit_code in (0, 1, 3), (result.stdout, result.stderr)
        data = json.loads(result.stdout)
        for key, backend in (("n_a", "internal"), ("n_b", "databricks")):
            own = _in_window({backend: series[service][backend]}, schema.REQUEST_COLUMNS)
            assert data[key] == pytest.approx(own, rel=0.01), (service, key)


def test_slo_report_at_alignment_asks_only_for_its_own_services_samples(shared_prometheus):
    from opsctl.metrics.base import open_source
    from opsctl.slo.report_source import align_at

    directory, server, _ = shared_prometheus
    for service, cfg in _configs(directory, server.url).items():
        source = Recording(open_source(cfg))
        if source.step_seconds() is not None:
            pytest.skip("a configured metrics.prometheus.step aligns without asking")
        align_at(source, END - 3, True, scope=cfg.service_matcher)
        _assert_scoped(source.asked, service)
