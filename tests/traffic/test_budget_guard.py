"""The budget guard never blocks moving traffic away from a backend that burns faster than the one
it moves to: the measured case of issue 12 (7 days of data, a 30-minute internal blip three days
ago that spent internal's budget, Databricks answering 5xx now)."""

from __future__ import annotations

import json

import pytest

from opsctl.config import load_config
from opsctl.traffic.service import TrafficService
from tests.traffic.conftest import DAY, END, PER_STEP, d

WEEK = 7 * DAY
BLIP_SHARE = 0.05  # internal: 5% errors for 30 minutes, three days ago
OUTAGE_SHARE = 0.3  # databricks: 30% 5xx for the last hour, ~3000x a 99.99% budget


def incident_week() -> dict:
    blip_start = WEEK - 3 * DAY
    return {
        "internal": d.make_traffic(END, WEEK, PER_STEP["internal"], incidents=[(blip_start, blip_start + 179, BLIP_SHARE)]),
        "databricks": d.make_traffic(END, WEEK, PER_STEP["databricks"], incidents=[(WEEK - 360, WEEK - 1, OUTAGE_SHARE)]),
    }


@pytest.fixture(scope="module")
def week_store(tmp_path_factory):
    from tests.traffic.conftest import write_metrics

    path = tmp_path_factory.mktemp("week") / "metrics.sqlite"
    write_metrics(path, incident_week())
    return path


@pytest.fixture
def week_env(make_env, week_store):
    import shutil

    env = make_env(metrics=False)
    shutil.copy(week_store, env.state / "metrics.sqlite")
    return env


def test_the_data_reproduces_the_case_internal_spent_its_budget_databricks_burns_now():
    # Independent of the guard: internal's 7-day errors exceed a 99.99% budget of its 7-day requests,
    # and databricks' last-hour error ratio is about 3000 times that budget.
    internal_requests = WEEK * PER_STEP["internal"]
    internal_errors = 180 * round(PER_STEP["internal"] * BLIP_SHARE)
    assert internal_errors > 0.0001 * internal_requests
    assert round(OUTAGE_SHARE / 0.0001) == 3000


@pytest.mark.slow
def test_a_routine_failover_away_from_the_faster_burning_backend_applies(week_env):
    cfg = load_config(str(week_env.config))
    result = TrafficService(cfg, hooks=[]).failover("databricks", "INC-12", emergency=False, reason="vendor 5xx")
    assert result.outcome == "applied", result.message
    budget = next(g for g in result.guards if g.name == "budget")
    assert budget.ok and not budget.overridden
    assert "moving away from databricks" in budget.message and "spent its error budget" in budget.message
    assert budget.details["burn_now_away"]["databricks"] > 1000 > budget.details["burn_now_toward"]["internal"]
    assert result.after.weight("internal") == 100


@pytest.mark.slow
def test_moving_traffic_toward_the_burning_backend_is_still_refused(week_env):
    result = week_env.run("traffic", "set", "databricks=90", "internal=10", "--reason", "routine", "--yes", "-o", "json")
    assert result.exit_code == 4, result.output
    budget = next(g for g in json.loads(result.stdout)["guards"] if g["name"] == "budget")
    assert not budget["ok"] and "burns at page level" in budget["message"]
