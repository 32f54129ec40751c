"""A refused change's attempt travels on its error in one declared slot (`OpsctlError.carried`),
read typed by `controller.result_of`: the guards that refused, the split it read, its operation."""

from __future__ import annotations

import pytest

from opsctl.config.loading import load_config_file
from opsctl.errors import GuardRefused, OpsctlError, UsageError
from opsctl.traffic.controller import ChangeResult, result_of
from opsctl.traffic.ramp import outcome_of
from opsctl.traffic.service import TrafficService


def test_a_guard_refusal_carries_the_refused_attempt(make_env):
    env = make_env(rate="{max_changes: 1, window: 1h}")
    traffic = TrafficService(load_config_file(env.config), hooks=[], actor="tester")
    first = traffic.set({"databricks": 70, "internal": 30}, reason="one")
    with pytest.raises(GuardRefused) as refused:
        traffic.set({"databricks": 60, "internal": 40}, reason="two")
    carried = result_of(refused.value)
    assert isinstance(carried, ChangeResult)
    assert carried.outcome == "refused" and carried.action == "set" and carried.reason == "two"
    assert carried.operation_id != first.operation_id
    assert carried.before is not None and carried.before.weight("databricks") == 70
    assert [g.name for g in carried.guards if not g.ok] == ["rate"]
    assert outcome_of(refused.value) is None  # a change's result is not a ramp's outcome
    assert env.stored()["weights"] == {"databricks": 70, "internal": 30}


def test_a_plan_refused_by_bounds_carries_its_attempt_too(make_env):
    env = make_env()
    traffic = TrafficService(load_config_file(env.config), hooks=[], actor="tester")
    with pytest.raises(UsageError) as refused:
        traffic.set({"databricks": 70, "internal": 20}, reason="does not add up")
    carried = result_of(refused.value)
    assert carried is not None and carried.outcome == "refused"
    assert [g.name for g in carried.guards if not g.ok] == ["bounds"]  # checked with the policy guards


def test_an_error_from_outside_the_controller_carries_nothing():
    assert result_of(OpsctlError("no attempt")) is None
    assert outcome_of(GuardRefused("no ramp")) is None
