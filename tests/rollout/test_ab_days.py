"""The A/B check's days needed at today's traffic: with no `daily_trials` in the plan, an hour's
trials are scaled to a day by the weekly profile (an early-morning hour stands for more than 1/24
of a day), said in the result as `<metric>_daily_basis`; with one, the plan's figure. The expected
figure is worked out from the profile's hourly knots and US Eastern time here, apart from the code."""

from __future__ import annotations

import statistics
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from opsctl.metrics.sim_calendar import WEEKLY_PROFILE
from opsctl.rollout.plan import build_plan
from tests.rollout.conftest import END
from tests.rollout.test_analyses import ab_plan, cfg  # noqa: F401  (the fixture)


def profile_at(ts: float) -> float:
    """The weekly profile at `ts`: linear between the knots at whole local hours (US Eastern)."""
    local = datetime.fromtimestamp(ts, timezone.utc).astimezone(ZoneInfo("America/New_York"))
    hour = local.hour + local.minute / 60 + local.second / 3600
    day = WEEKLY_PROFILE[local.weekday()]
    nxt = day[local.hour + 1] if local.hour < 23 else WEEKLY_PROFILE[(local.weekday() + 1) % 7][0]
    return day[local.hour] + (nxt - day[local.hour]) * (hour - local.hour)


def arms(cfg, seconds: int):
    from opsctl.metrics import simulator
    from opsctl.metrics.sim_arms import write_arm_counters

    series = simulator.simulate(END - seconds, END, backends={"internal": "internal", "databricks": "vendor"},
                                split={"internal": 50, "databricks": 50}, peak_rps=60, seed=3)
    write_arm_counters(cfg.state_path / "metrics.sqlite", series, seed=3,
                       accept={"internal": 0.32, "databricks": 0.32})


@pytest.mark.parametrize("declared", [None, 400_000])
def test_days_needed_scale_an_hour_by_the_weekly_profile_or_take_the_plans_figure(cfg, declared):
    from opsctl.rollout.analyses import Evidence, measure

    arms(cfg, 3600)
    body = ab_plan("1h")
    if declared is None:
        del body["stages"][0]["ab"]["daily_trials"]
    plan = build_plan(body, "p.yaml")
    stage = plan.stages[0].ab
    result = measure(stage.analysis[0], Evidence(cfg, plan, END), stage)
    trials = result["acceptance_n_baseline"] + result["acceptance_n_new"]
    if declared is None:
        # END is Wednesday 06:06:40 ET: the hour before it climbs the 05:00 and 06:00 knots (0.25,
        # 0.36), far under the week's mean hour; the old one-hour-x-24 figure understates the day
        inside = statistics.mean(profile_at(END - 3600 + 10 * i + 5) for i in range(360))
        mean_day = statistics.mean(k for day in WEEKLY_PROFILE for k in day)
        expected = trials * 24 * mean_day / inside
        assert result["acceptance_daily_basis"] == "weekly profile"
        assert result["acceptance_daily_trials"] == pytest.approx(expected, rel=1e-3)
        assert result["acceptance_daily_trials"] > trials * 24 * 1.3
    else:
        assert result["acceptance_daily_basis"] == "plan" and result["acceptance_daily_trials"] == declared
        expected = declared
    # the smaller arm (half) fills the n needed in n / (daily x 0.5) days
    assert result["acceptance_days"] == pytest.approx(result["acceptance_needed"] / (expected * 0.5), abs=0.01)
