"""`slo alerts` with nothing kept firing: the fast tier's walk back over its `keep_firing_for` is
asked only where its condition held within the keep (the rule's own expression per alert, in one
range query over the keep's evaluations), so a quiet evaluation costs one request more than one
without any keep, not one batch per evaluation the keep spans (18 at the shipped 3m and 10 s).

Real Prometheus, backfilled with the traffic of tests/slo/test_keep_firing.py (databricks half failing
from ONSET, moved away at FAILOVER); requests counted by Prometheus itself. Where the alert may be kept
(inside and at the end of its keep), the screened evaluation fires exactly what the full walk fires,
at instants on the 10 s evaluation grid and off it; on the grid that is also the forward replay of
Prometheus' alert states (test_keep_firing.replay).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import REPO
from tests.slo import data as d
from tests.slo import rules_data as r
from tests.slo import test_keep_firing as k

pytestmark = pytest.mark.prometheus


class Unscreened:
    """The same Prometheus, read without PromQL of opsctl's own making: the evaluator walks back over
    every candidate's keep (the old way), its windows' queries unchanged."""

    speaks_promql = False

    def __init__(self, source):
        self.source, self.description = source, source.description

    def query_many(self, queries, at):
        return self.source.query_many(queries, at)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.config import load_config_file
    from opsctl.metrics.prometheus import PrometheusSource
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from tests.conftest import PrometheusServer

    work = tmp_path_factory.mktemp("screen")
    _, cfg_path, _, _ = k._generate(tmp_path_factory, k.CONFIG)
    t = k.traffic()
    om = work / "traffic.om"
    om.write_text(d.openmetrics({"databricks": r.shifted(t, k.BASE)}))
    (work / "prom").mkdir()
    server = PrometheusServer(work / "prom", openmetrics=om)
    settings = RuleSettings.from_config(load_config_file(cfg_path))
    plans = plan_rules(load_slos([REPO / "slos" / "databricks-availability.yaml"], {"databricks", "internal"}),
                       settings)
    source = PrometheusSource(Settings(url=server.url, timeout=10, report_deadline=60))
    source.check()
    try:
        yield server, source, plans, settings, t
    finally:
        server.stop()


def _fast(evaluation) -> list[tuple[str, str]]:
    return sorted((a.alertname, f"{a.burn_rate:.6f}") for a in evaluation.firing if a.alertname == "SloFastBurnPage")


def query_requests(url: str) -> int:
    """Prometheus' own count of the instant- and range-query requests it answered (its /metrics)."""
    import re
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(int(float(m.group(1))) for m in re.finditer(
        r'^prometheus_http_requests_total\{[^}]*handler="/api/v1/query(?:_range)?"[^}]*\} (\S+)$', text, re.M))


def _requests(server, fn) -> int:
    before = query_requests(server.url)
    fn()
    return query_requests(server.url) - before


def test_the_fast_alert_has_a_keep_to_walk(served):
    _, _, plans, _, _ = served
    [fast] = [a for a in plans[0].alerts if a.fast]
    assert fast.keep_firing_seconds == k.KEEP and fast.interval == k.STEP  # 18 evaluations kept


@pytest.mark.parametrize("when, late", [("before the onset", 0.0), ("long after the keep", 3.5)])
def test_a_quiet_evaluation_costs_one_request_more_than_one_without_a_keep(served, when, late):
    """The same evaluation with the fast alert's keep removed is the baseline: nothing can be kept
    firing, so the only cost of the keep is the one screening request (before: 18 batches more)."""
    from opsctl.slo.alerts import evaluate_plans

    server, source, plans, settings, t = served
    at = k.BASE + (int(t.ts[k.ONSET]) - 120 if when == "before the onset" else int(t.ts[-1]) - 60) + late
    no_keep = [replace(p, alerts=tuple(replace(a, keep_firing_seconds=0) for a in p.alerts)) for p in plans]
    quiet = evaluate_plans(plans, source, at, settings)
    assert _fast(quiet) == [] == _fast(evaluate_plans(plans, Unscreened(source), at, settings))
    baseline = _requests(server, lambda: evaluate_plans(no_keep, source, at, settings))
    screened = _requests(server, lambda: evaluate_plans(plans, source, at, settings))
    assert screened == baseline + 1
    # What the screen saves: the walk asks one batch per evaluation the keep spans back from `at`.
    walked = _requests(server, lambda: evaluate_plans(plans, Unscreened(source), at, settings))
    unscreened = _requests(server, lambda: evaluate_plans(no_keep, Unscreened(source), at, settings))
    assert walked == unscreened + k.KEEP // k.STEP


@pytest.mark.slow
def test_where_the_alert_may_be_kept_the_screened_evaluation_fires_what_the_full_walk_fires(served):
    from opsctl.slo.alerts import evaluate_plans

    server, source, plans, settings, t = served
    expected = k.replay(t, k.KEEP)
    last = max(at for at in expected if k.condition(t, at)[0])  # the condition's last holding evaluation
    instants = [last, last + 10, last + k.KEEP, last + k.KEEP + 10]  # kept from its first failing evaluation
    seen_kept = 0
    for at in instants:
        for late in (0.0, 3.5):
            screened = _fast(evaluate_plans(plans, source, k.BASE + at + late, settings))
            assert screened == _fast(evaluate_plans(plans, Unscreened(source), k.BASE + at + late, settings)), (at, late)
            if late == 0.0:
                assert bool(screened) is (at in expected), at
                seen_kept += bool(screened) and at > last
    kept = [at for at in instants if at > last and at in expected]  # firing on its condition's last value
    assert seen_kept == len(kept) == 2  # last + 10 and last + KEEP (under KEEP since last + 10); resolved after
