"""Today's trials a day for the A/B's days needed: the plan's figure when declared, a window of a
day or more as it is, a shorter window scaled by the weekly profile (not one hour x 24). Expected
figures come from the profile's knots by hand, not from the simulator's interpolation."""

from __future__ import annotations

import statistics
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from opsctl.metrics.sim_calendar import WEEKLY_PROFILE
from opsctl.quality.abtest import daily_trials

EASTERN = ZoneInfo("America/New_York")
MEAN_KNOT = statistics.mean(k for day in WEEKLY_PROFILE for k in day)  # a week's mean share of peak


def test_a_declared_daily_figure_wins():
    got = daily_trials(1000, 3600, 0, declared=400_000)
    assert (got.trials, got.basis) == (400_000, "plan")


def test_a_whole_day_window_is_read_as_it_is():
    got = daily_trials(2_000_000, 2 * 86400, datetime(2026, 11, 17, 11, tzinfo=EASTERN).timestamp())
    assert (got.trials, got.basis) == (1_000_000, "window")


def test_a_peak_hour_is_scaled_by_the_weekly_profile_not_by_24():
    # Tuesday 10:00-11:00 ET: the profile runs linearly from the 10:00 knot (0.95) to the 11:00 knot
    # (0.98); its mean over the hour is 0.965. A mean day holds 24 x MEAN_KNOT (0.5104) peak-hours.
    at = datetime(2026, 11, 17, 11, tzinfo=EASTERN).timestamp()
    tuesday = WEEKLY_PROFILE[1]
    inside = (tuesday[10] + tuesday[11]) / 2
    assert inside == pytest.approx(0.965)
    got = daily_trials(10_000, 3600, at)
    assert got.basis == "weekly profile"
    assert got.trials == pytest.approx(10_000 * 24 * MEAN_KNOT / inside, abs=1)  # 126,929, not 240,000
    assert got.trials < 10_000 * 24 * 0.55


def test_a_night_hour_is_scaled_up():
    # Saturday 03:00-04:00 ET: knots 0.15 and 0.14, mean 0.145: the quietest hours stand for more
    at = datetime(2026, 11, 21, 4, tzinfo=EASTERN).timestamp()
    inside = (WEEKLY_PROFILE[5][3] + WEEKLY_PROFILE[5][4]) / 2
    got = daily_trials(1_000, 3600, at)
    assert got.trials == pytest.approx(1_000 * 24 * MEAN_KNOT / inside, abs=1)
    assert got.trials > 24 * 1_000


def test_no_trials_no_figure():
    assert daily_trials(0, 3600, 0) is None
