"""The drill's burn meter reads the SLO's own counts the way the SLO report does: filter_valid, and
filter_bad (valid = good + bad). Expected figures are computed here from the counts written to a
real embedded store, not through opsctl; on a real Prometheus, a query_sli SLO (a PromQL expression
the embedded store does not evaluate) burns as the event-count forms do on the same traffic."""

from __future__ import annotations

import pytest

from opsctl.drills.measure import BurnMeter
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.slo.model import load_slos
from tests.slo.test_slo_generator_forms import slo_file

T0 = 1_795_000_000  # on the 10-second grid
STEPS = 360  # one hour of 10-second steps
OK, ERR = 990.0, 10.0  # per step: 1% server errors
GOAL = 0.999
PERIOD = 28 * 86400

FORMS = ("ratio-valid", "ratio-bad")  # the SLO files of tests/slo/test_slo_generator_forms.py (goal 0.999)


@pytest.fixture
def meter_for(tmp_path):
    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    store.write_steps("internal", [T0 + 10 * i for i in range(1, STEPS + 1)],
                      {"req_ok": [OK] * STEPS, "req_server_error": [ERR] * STEPS})
    slo_dir = tmp_path / "slos"
    slo_dir.mkdir()

    def make(form: str) -> BurnMeter:
        slo_file(slo_dir, form)
        [slo] = [s for s in load_slos([slo_dir], ["internal", "databricks"]) if s.name.endswith(form)]
        return BurnMeter(store, [slo], PERIOD), slo.name

    yield make
    store.close()


@pytest.mark.parametrize("form", FORMS)
def test_the_burn_rate_of_every_slo_form_is_its_error_ratio_over_its_budget(meter_for, form):
    meter, name = meter_for(form)
    at = T0 + 10 * STEPS
    sample = meter.sample(at, [300, 1800], since=None)[name]
    expected = (ERR / (OK + ERR)) / (1 - GOAL)  # 1% errors against a 0.1% budget: 10x
    assert sample.burn[300] == pytest.approx(expected, rel=1e-6)
    assert sample.burn[1800] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("form", FORMS)
def test_the_budget_a_drill_spent_counts_bad_events_against_the_periods_budget(meter_for, form):
    meter, name = meter_for(form)
    at = T0 + 10 * STEPS
    meter.measure_period(at, history_seconds=3600)  # the store holds one hour: scaled to the period
    period_valid = (OK + ERR) * STEPS * PERIOD / 3600
    assert meter.period_valid[name] == pytest.approx(period_valid, rel=1e-6)
    since = at - 600
    sample = meter.sample(at, [300], since=since)[name]
    assert sample.bad_since == pytest.approx(ERR * 60, rel=1e-6)
    assert meter.spent(name, sample) == pytest.approx(ERR * 60 / ((1 - GOAL) * period_valid), rel=1e-6)



@pytest.mark.prometheus
def test_on_prometheus_a_query_sli_slo_burns_as_the_event_count_forms_do(tmp_path):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource
    from tests.conftest import PrometheusServer
    from tests.slo import data as d

    end, steps = 1_795_000_000, 720  # two hours of 10-second steps, 1% server errors throughout
    om = tmp_path / "traffic.om"
    om.write_text(d.openmetrics({"internal": d.make_traffic(end, steps, 1000, error_share=0.01)}))
    server = PrometheusServer(tmp_path, openmetrics=om)
    try:
        slo_dir = tmp_path / "slos"
        slo_dir.mkdir()
        for form in (*FORMS, "query-sli"):
            slo_file(slo_dir, form)
        slos = load_slos([slo_dir], ["internal", "databricks"])
        meter = BurnMeter(PrometheusSource(Settings(url=server.url, timeout=10, report_deadline=60)), slos, PERIOD)
        samples = meter.sample(end, [300, 1800], since=None)
    finally:
        server.stop()
    expected = 0.01 / (1 - GOAL)  # the error ratio over the budget: 10x
    assert {s.method for s in slos} == {"good_bad_ratio", "query_sli"}
    for name, sample in samples.items():
        assert sample.burn[300] == pytest.approx(expected, rel=1e-6), name
        assert sample.burn[1800] == pytest.approx(expected, rel=1e-6), name
