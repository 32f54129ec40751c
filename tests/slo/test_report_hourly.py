"""The fleet report's long windows and period coverage read from the rules' hourly increases
(docs/decisions/0420-fleet-read-on-coarse-records.md) give the figures the base increases give,
and those are the raw counts worked out here, against a real Prometheus holding the records the
generated rules wrote over a week of minute data (tests/slo/hourly_fleet.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.slo.hourly_fleet import backfill, make_fleet, rules_of

AT = 1_795_000_000 - 1_795_000_000 % 3600 + 23 * 60  # 23 minutes past an hour: both edges read
# 28 days: base window 5m (each minute's events in 5 records), windows 1d, 3d, 28d;
# 7 days: the table scaled by 1/4, base window 1m, windows 6h, 18h, 7d.
LONG = {28: {"1d": 86400, "3d": 3 * 86400, "period": 28 * 86400},
        7: {"6h": 6 * 3600, "18h": 18 * 3600, "period": 7 * 86400}}


@pytest.fixture(scope="module", params=[28, 7], ids=["28d", "7d"])
def fleet_prom(request, tmp_path_factory):
    work = tmp_path_factory.mktemp("hourly-fleet")
    fleet = make_fleet(work, services=2, per_service=2, days=request.param + 0.25, end=AT, period_days=request.param)
    server, _stats = backfill(fleet, short_from=AT - 900)
    yield fleet, server, request.param
    server.stop()


def _report(fleet, server, hourly: bool):
    from opsctl.config import PrometheusSource as PromSettings
    from opsctl.metrics.prometheus import PrometheusSource
    from opsctl.slo.report import build_report, fleet_reads

    cfg, by_service = rules_of(fleet)
    source = PrometheusSource(PromSettings(url=server.url, timeout=120, report_deadline=600))
    shared: dict = {}
    out = {}
    for service, (slos, _rules) in by_service.items():
        for r in build_report(slos, source, AT, cfg.slos.period_seconds, coverage=True, recorded_interval=60,
                              service=service, reads=fleet_reads(shared, source, AT), hourly=hourly):
            out[r.slo.name] = r
    return out


def _events(fleet, name: str, seconds: int, period: int) -> tuple[float, float]:
    """(good, valid) over (AT - seconds, AT] as the base increases count them: a minute's events
    at u are in the base records at u, u + 1m, ... (per_base of them), and the window sums those
    recorded in (AT - seconds, AT], over per_base (at a 7-day period the base window is 1m: every
    minute's events once, those at AT - seconds not at all; at 28 days, 5m: the newest four
    minutes' events in part, as are the four before the window's start)."""
    from opsctl.slo import conventions as cv

    per_base = cv.base_window(60, period)[1] // 60
    ts, req, err = fleet.ts, fleet.requests[name].astype(float), fleet.errors[name].astype(float)
    weight = sum(((ts + 60 * j > AT - seconds) & (ts + 60 * j <= AT)).astype(float) for j in range(per_base)) / per_base
    valid, bad = float((req * weight).sum()), float((err * weight).sum())
    return valid - bad, valid


@pytest.mark.prometheus
@pytest.mark.slow
def test_long_windows_from_the_hourly_records_equal_the_base_records_and_the_raw_counts(fleet_prom):
    fleet, server, days = fleet_prom
    hourly, fine = _report(fleet, server, True), _report(fleet, server, False)
    names = [n for slos in fleet.services.values() for n in slos]
    assert sorted(hourly) == sorted(fine) == sorted(names)
    long = LONG[days]
    for name in names:
        h, f = hourly[name], fine[name]
        assert "hourly slo:sli_good:increase1h" in h.long_windows_why, h.long_windows_why
        assert "hourly" not in f.long_windows_why, f.long_windows_why
        assert h.long_windows == f.long_windows == "recorded"
        assert h.data_since is None and f.data_since is None  # the records span the period
        for window, seconds in long.items():
            good, valid = _events(fleet, name, seconds, days * 86400)
            for got in (h.counts[window], f.counts[window]):
                assert got.valid == pytest.approx(valid, rel=1e-12), (name, window)
                assert got.good == pytest.approx(good, rel=1e-12), (name, window)
        assert h.sli == pytest.approx(f.sli, rel=1e-12)
        assert h.error_budget_remaining == pytest.approx(f.error_budget_remaining, rel=1e-9, abs=1e-12)
        assert set(h.burn_rate) == set(f.burn_rate)
        for window, burn in f.burn_rate.items():
            assert h.burn_rate[window] == pytest.approx(burn, rel=1e-9, abs=1e-12), (name, window)
        assert np.isfinite(h.sli)


@pytest.mark.prometheus
@pytest.mark.slow
def test_without_the_hourly_records_the_report_reads_the_base_ones(tmp_path):
    """Rules loaded before the hourly increases existed: no hourly sample at any hour, so the
    coverage and the windows come from the base records, as before (the same raw counts)."""
    fleet = make_fleet(tmp_path, services=1, per_service=2, days=7.25, end=AT, period_days=7)
    server, stats = backfill(fleet, short_from=AT - 900, hourly=False)
    try:
        assert stats["hourly"] == 0
        rows = _report(fleet, server, True)
    finally:
        server.stop()
    for name, row in rows.items():
        assert row.long_windows == "recorded" and "hourly" not in row.long_windows_why, row.long_windows_why
        for window, seconds in LONG[7].items():
            good, valid = _events(fleet, name, seconds, 7 * 86400)
            assert row.counts[window].valid == pytest.approx(valid, rel=1e-12), (name, window)
            assert row.counts[window].good == pytest.approx(good, rel=1e-12), (name, window)
