"""Pure burn-rate math and the multi-window pairing, with factors derived for the period."""

from __future__ import annotations

import pytest

from opsctl.slo.budget import WindowCounts, budget_remaining, burn_rate, evaluate_status
from opsctl.slo.conventions import ALERT_PAIRS

DAY = 86400


@pytest.mark.parametrize("period_days, expected", [
    (30, [14.4, 6.0, 3.0, 1.0]),
    (28, [13.44, 5.6, 2.8, 0.28 * 10 / 3]),
])
def test_factors_match_googles_table_for_30_days_and_scale_for_28(period_days, expected):
    assert [p.factor(period_days * DAY) for p in ALERT_PAIRS] == pytest.approx(expected)


def test_burn_rate_is_error_ratio_over_budget():
    assert burn_rate(WindowCounts(good=9990, valid=10000), 0.9999) == pytest.approx(10.0)
    assert budget_remaining(WindowCounts(good=9990, valid=10000), 0.9999) == pytest.approx(-9.0)


def test_zero_events_has_no_burn_rate_but_is_data():
    assert burn_rate(WindowCounts(good=0, valid=0), 0.9999) is None
    assert WindowCounts(good=0, valid=0).has_data


def burns(**values):
    base = {w: 0.0 for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d")}
    base.update({k.replace("_", ""): v for k, v in values.items()})
    return base


def test_page_needs_both_windows_of_a_pair_above_the_factor():
    period = 28 * DAY
    assert evaluate_status(burns(_1h=20, _5m=20), [], True, period).level == "page"
    assert evaluate_status(burns(_1h=20, _5m=1), [], True, period).level == "ok"
    assert evaluate_status(burns(_6h=6, _30m=6), [], True, period).level == "page"
    assert evaluate_status(burns(_1d=3, _2h=3), [], True, period).level == "ticket"
    assert evaluate_status(burns(_3d=0.95, _6h=0.95), [], True, period).level == "ticket"
    assert evaluate_status(burns(_3d=0.9, _6h=0.9), [], True, period).level == "ok"


def test_missing_windows_are_unknown_never_ok():
    status = evaluate_status(burns(), ["1h"], True, 28 * DAY)
    assert status.level == "unknown" and "1h" in status.reason
    assert evaluate_status(burns(), [], False, 28 * DAY).level == "unknown"
