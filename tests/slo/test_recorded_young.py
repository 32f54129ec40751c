"""A young service: its data (2 days) are younger than the report's 3d and 28-day windows.

Summed over a window, the 5m increases recorded every minute count each event 5 times, except the
newest 4 minutes' events (recorded 4, 3, 2 and 1 times by the instants up to the report's). Where
data precede the window, its start edge (events of the 4 minutes before it, recorded in part)
makes up for that; where the data are younger than the window nothing does, and the recorded sum
over 5 undercounts by (1 + 2 + 3 + 4) / 5 = 2 minutes' worth of traffic. The report corrects those
windows from raw: 1/5 of the raw counts over the newest 1, 2, 3 and 4 minutes, added.

The data: one real Prometheus, raw counters at a steady rate every 10 s from a zero sample at the
start, and the recorded 5m increases at every minute (written here, from the same counts, as the
generated rules record them: with a steady rate Prometheus' increase() over those samples is the
exact count). Every expected figure below is the synthetic count itself, computed here."""

from __future__ import annotations

import pytest

from tests.slo.test_report_fleet import backfilled_prometheus, write_openmetrics

AT = 1_795_000_020 - 1_795_000_020 % 60  # on the minute grid
DAYS = 2
START = AT - DAYS * 86400  # the counters' zero sample
STEP = 10
GOOD, BAD = 997, 3  # events per 10 s step
PERIOD = 28 * 86400
SERVICE, NAME = "young", "young-availability"
SLO_YAML = f"""apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata:
  name: {NAME}
  labels: {{service_name: {SERVICE}, feature_name: service, slo_name: availability, backend: all}}
spec:
  description: 99% of the young service's requests succeed
  backend: prometheus
  method: good_bad_ratio
  exporters: []
  service_level_indicator:
    filter_good: 'young_requests_total{{service="{SERVICE}",outcome="ok"}}'
    filter_valid: 'young_requests_total{{service="{SERVICE}"}}'
  goal: 0.99
"""


def openmetrics_families() -> dict:
    steps = (AT - START) // STEP
    families: dict = {"ok": [], "error": [], "good": [], "valid": []}
    for k in range(steps + 1):
        t = START + k * STEP
        families["ok"].append(f'young_requests_total{{service="{SERVICE}",outcome="ok"}} {GOOD * k} {t}')
        families["error"].append(f'young_requests_total{{service="{SERVICE}",outcome="error"}} {BAD * k} {t}')
    labels = f'backend="all",service="{SERVICE}",slo="{NAME}"'
    for t in range(START + 60, AT + 1, 60):  # the rules' evaluations, every minute
        n = min(300, t - START) // STEP  # steps in (t - 5m, t]
        families["good"].append(f"slo:sli_good:increase5m{{{labels}}} {GOOD * n} {t}")
        families["valid"].append(f"slo:sli_valid:increase5m{{{labels}}} {(GOOD + BAD) * n} {t}")
    return families


@pytest.fixture(scope="module")
def young(tmp_path_factory):
    root = tmp_path_factory.mktemp("young")
    server = backfilled_prometheus(root / "prom", write_openmetrics(root / "young.om", openmetrics_families()))
    slo_file = root / "young.yaml"
    slo_file.write_text(SLO_YAML)
    yield server, slo_file
    server.stop()


def _report(server, slo_file, **kwargs):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource
    from opsctl.slo.loading import load_slos
    from opsctl.slo.report import build_report

    source = PrometheusSource(Settings(url=server.url, timeout=10, report_deadline=60))
    [result] = build_report(load_slos([slo_file], ["internal", "databricks"]), source, AT, PERIOD,
                            recorded_interval=60, service=SERVICE, **kwargs)
    return result


def _expected(seconds: int) -> tuple[int, int]:
    """(good, valid) events in (AT - seconds, AT]: every step's, up to the data's start."""
    steps = min(seconds, AT - START) // STEP
    return GOOD * steps, (GOOD + BAD) * steps


@pytest.mark.prometheus
@pytest.mark.parametrize("grouped_reads", [True, False], ids=["grouped", "per-slo"])
def test_a_young_services_long_windows_count_every_event(young, grouped_reads):
    server, slo_file = young
    result = _report(server, slo_file, grouped_reads=grouped_reads)
    assert result.long_windows == "recorded", result.long_windows_why
    for window, seconds in (("period", PERIOD), ("3d", 3 * 86400), ("1d", 86400)):
        good, valid = _expected(seconds)
        counts = result.counts[window]
        assert counts.valid == pytest.approx(valid, rel=1e-12), window
        assert counts.good == pytest.approx(good, rel=1e-12), window
    good, valid = _expected(PERIOD)
    assert result.sli == pytest.approx(good / valid, rel=1e-12)
    assert result.events == valid
    assert result.long_windows_why.endswith(
        "; 3d, period: the newest 4 evaluation intervals' events corrected from raw (data younger than the window)")


@pytest.mark.prometheus
def test_the_uncorrected_recorded_sum_undercounts_two_minutes_of_traffic(young):
    """The property corrected above, shown on the same data: the recorded period sum over 5 is
    2 minutes' events (12 steps) short of the data's count."""
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    server, _ = young
    source = PrometheusSource(Settings(url=server.url, timeout=10, report_deadline=60))
    [valid_sum] = source.query_many([f'sum_over_time(slo:sli_valid:increase5m{{slo="{NAME}"}}[{PERIOD - 1}s])'], AT)
    _good, valid = _expected(PERIOD)
    assert valid_sum / 5 == valid - 12 * (GOOD + BAD)
