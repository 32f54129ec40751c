"""The in-process recorded reads (`recorded_plan`, `Recorded`: the guards' report and `slo alerts`)
select each SLO's recorded series by its service as well as its name.

Two services, `east` and `west`, each with SLOs named alike (`internal-availability`, ...), their
recorded series in one real Prometheus (tests/slo/test_report_fleet.py's `write_fleet`: the rules'
evaluation interval set to 1h, so each event is recorded once; the values drawn there, and the
expected figures computed there from them). Read by `slo` alone, each probe and sum answers both
services' series (refused as two series); read by (service, slo), each service gets its own."""

from __future__ import annotations

import pytest

from tests.slo.test_report_fleet import AT, PERIOD, backfilled_prometheus, write_fleet, write_openmetrics

SERVICES = ["east", "west"]
INTERVAL = 3600


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    root = tmp_path_factory.mktemp("recorded-by-service")
    families: dict = {}
    catalog, _, expected = write_fleet(root / "twins", SERVICES, "http://127.0.0.1:1", seed=23, prefixed=False,
                                       families=families)
    server = backfilled_prometheus(root / "prom", write_openmetrics(root / "recorded.om", families))
    defaults = catalog / "_defaults.yaml"
    defaults.write_text(defaults.read_text().replace("http://127.0.0.1:1", server.url))
    yield server, catalog, expected
    server.stop()


def _config(catalog, service):
    from opsctl.config.catalog import load_service_config

    return load_service_config(catalog_dir=str(catalog), service=service)


def _slos(cfg):
    from opsctl.slo.loading import load_slos

    return load_slos([cfg.slo_dir], cfg.backends, config=cfg)


def _source(url):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    return PrometheusSource(Settings(url=url, timeout=10, report_deadline=60))


@pytest.mark.prometheus
def test_the_names_are_shared_so_a_read_by_slo_alone_would_mix_them(twins):
    _server, catalog, expected = twins
    names = {s: {n for (svc, n) in expected if svc == s} for s in SERVICES}
    assert names["east"] == names["west"] and len(names["east"]) == 3


@pytest.mark.prometheus
def test_recorded_plan_and_its_sums_read_each_services_own_series(twins):
    from opsctl.slo.recorded import recorded_plan

    server, catalog, expected = twins
    source = _source(server.url)
    for service in SERVICES:
        slos = _slos(_config(catalog, service))
        plan = recorded_plan(slos, source, AT, PERIOD, INTERVAL, service=service)
        assert plan.usable == {s.name for s in slos}, plan.why
        queries = {s.name: plan.queries(s.name, PERIOD) for s in slos}
        asked = [q for qs in queries.values() for q in qs.values()]
        answers = dict(zip(asked, source.query_many(asked, AT)))
        for slo in slos:
            want = expected[(service, slo.name)]
            counts = plan.counts(slo.name, PERIOD, answers)
            assert counts.valid == want["events"], (service, slo.name)
            assert counts.valid - counts.good == want["bad_events"], (service, slo.name)


@pytest.mark.prometheus
def test_the_guards_report_reads_each_services_own_recorded_series(twins):
    """The error-budget guard's `build_report(..., recorded_interval=)`: no grouped reads, the
    per-SLO recorded plan, keyed by the config's service."""
    from opsctl.slo.report import build_report

    server, catalog, expected = twins
    source = _source(server.url)
    for service in SERVICES:
        cfg = _config(catalog, service)
        results = build_report(_slos(cfg), source, AT, PERIOD, recorded_interval=INTERVAL, service=service,
                               grouped_reads=False)
        assert len(results) == 3
        for r in results:
            want = expected[(service, r.slo.name)]
            assert r.long_windows == "recorded", r.long_windows_why
            assert r.sli == pytest.approx(want["sli"], rel=1e-12, abs=1e-15)
            assert r.counts["period"].valid == want["events"]
            for window in ("1d", "3d"):
                assert r.burn_rate[window] == pytest.approx(want["burn_rate"][window], rel=1e-9), (r.slo.name, window)


@pytest.mark.prometheus
def test_slo_alerts_read_each_services_own_recorded_1d_and_3d(twins):
    """`slo alerts`' evaluator: the ticket alerts' long windows 1d and 3d from each service's own
    recorded sums (the error ratios the alerts divide by the budget and compare to their factors).
    No raw series are loaded, so the short windows have no data and nothing fires: the long
    windows' counts are read as the evaluator reads them (`_recorded_at`, `_counts_at`)."""
    from opsctl.slo.alert_counts import _counts_at, error_ratio
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    server, catalog, expected = twins
    source = _source(server.url)
    for service in SERVICES:
        cfg = _config(catalog, service)
        settings = RuleSettings.from_config(cfg)
        plans = plan_rules(_slos(cfg), settings)
        evaluation = AlertEvaluator(plans, source, settings).evaluate(AT)
        assert {name: how for name, (how, _why) in evaluation.long_windows.items()} == {
            p.name: "recorded" for p in plans}
        recorded = AlertEvaluator(plans, source, settings)._recorded_at(AT)
        counts = _counts_at(source, AT, {p.name: (p, {"1d", "3d"}) for p in plans}, recorded)
        for plan in plans:
            for window in ("1d", "3d"):
                want = expected[(service, plan.name)]["burn_rate"][window] * (1 - plan.slo.goal)
                assert error_ratio(*counts[plan.name][window]) == pytest.approx(want, rel=1e-9), (plan.name, window)
