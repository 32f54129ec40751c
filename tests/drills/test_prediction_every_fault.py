"""Predictions for every fault of a scenario, made before the method runs (issue 37 item 3): for
every shipped scenario with a fault, the earliest page predicted over all its faults from their
parameters (prediction.first_page) lies within 20% of the first page the embedded drill measured,
multi-fault ones included; an internal fault predicts no ticket."""

from __future__ import annotations

import json

import pytest

from opsctl.config import load_config_file
from opsctl.drills.prediction import fault_onsets, first_page
from opsctl.drills.scenario import load_scenario
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.drills.conftest import CHAOS, SHIPPED, DrillEnv

# quality-regression pages through its quality rule, not a burn-rate alert: no burn to predict from
# (its own test below); every other faulted scenario is predicted
FAULTED = [n for n in SHIPPED if load_scenario(CHAOS / f"{n}.yaml").faults and n != "quality-regression"]


def predicted(env: DrillEnv, name: str, t0: float):
    cfg = load_config_file(env.config)
    plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
    scenario = load_scenario(CHAOS / f"{name}.yaml")
    split = {"databricks": 80.0, "internal": 20.0}  # the split every shipped scenario starts from
    return first_page(cfg, scenario, plans, split, start=t0, tick=cfg.alerting.interval_seconds)


def test_onsets_follow_the_methods_pauses_as_written():
    # both-degraded: the internal loss after a 1m pause, the vendor tail after 3m more
    assert fault_onsets(load_scenario(CHAOS / "both-degraded.yaml")) == [0.0, 180.0]


@pytest.mark.slow
@pytest.mark.parametrize("name", FAULTED)
def test_the_predicted_first_page_is_within_20_percent_of_the_measured_one(tmp_path, name):
    env = DrillEnv(tmp_path)
    result = env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "-o", "json")
    report = json.loads(result.stdout)
    measured = report["measurements"]["time_to_page"]
    t0 = env.state_of(env.run_dir())["t0"]
    pred = predicted(env, name, t0)
    assert measured is not None, report["measurements"]
    assert pred.first is not None, pred
    ratio = measured / pred.first.page_seconds
    print(f"{name}: measured {measured:g}s predicted {pred.first.page_seconds:g}s ratio {ratio:.3f}")
    assert 0.8 <= ratio <= 1.2, (measured, pred)


def test_a_quality_regression_predicts_no_burn_rate_page(tmp_path):
    pred = predicted(DrillEnv(tmp_path), "quality-regression", 1_763_474_460.0)
    assert pred.first is None and "touches no SLO's bad events" in pred.faults[0].why


def test_an_internal_fault_predicts_no_ticket_and_a_vendor_fault_the_category_of_its_cause(tmp_path):
    env = DrillEnv(tmp_path)
    by_name = {n: predicted(env, n, 1_763_474_460.0) for n in ("oom-kill-loop", "vendor-503-storm",
                                                                "slow-token-endpoint", "both-degraded")}
    oom = by_name["oom-kill-loop"].first
    assert oom.backend == "internal" and oom.ticket_category is None and "no vendor ticket" in oom.why
    storm = by_name["vendor-503-storm"].first
    assert (storm.cause, storm.ticket_category) == ("capacity", "inference")  # runbooks.tickets.capacity_category
    token = by_name["slow-token-endpoint"].first
    assert (token.cause, token.ticket_category) == ("auth", "platform")  # auth_category
    both = by_name["both-degraded"]
    assert [f.backend for f in both.faults] == ["internal", "databricks"] and both.first.fault == 0
