"""A refused change's result travels as a return value (#26 item 1): `check=False` returns the
refused attempt (the guards that refused, the split it read, its operation) with its error and exit
code, `check=True` (the default) raises that error, which carries nothing but the refusal; an
aborted ramp returns its outcome the same way."""

from __future__ import annotations

import pytest

from opsctl.config.loading import load_config_file
from opsctl.errors import GuardRefused, OpsctlError, UsageError
from opsctl.traffic.change import ChangeResult
from opsctl.traffic.ramp import RampOutcome
from opsctl.traffic.service import TrafficService
from opsctl.traffic.split import Split

CAP5 = ("capacity: {backend: internal, source: static, replicas: 5, rps_per_replica: 100, headroom: 0.25,"
        " max_replicas: 5}\n")


def service(env) -> TrafficService:
    return TrafficService(load_config_file(env.config), hooks=[], actor="tester")


def test_a_guard_refusal_returns_the_refused_attempt_with_its_error(make_env):
    env = make_env(rate="{max_changes: 1, window: 1h}")
    traffic = service(env)
    first = traffic.set({"databricks": 70, "internal": 30}, reason="one")
    assert first.error is None and first.exit_code == 0
    refused = traffic.set({"databricks": 60, "internal": 40}, reason="two", check=False)
    assert isinstance(refused, ChangeResult)
    assert refused.outcome == "refused" and refused.action == "set" and refused.reason == "two"
    assert isinstance(refused.error, GuardRefused) and refused.exit_code == 4
    assert refused.operation_id != first.operation_id
    assert refused.before is not None and refused.before.weight("databricks") == 70
    assert [g.name for g in refused.guards if not g.ok] == ["rate"]
    assert "error" not in refused.to_dict()  # rendered as before: the message says why
    assert env.stored()["weights"] == {"databricks": 70, "internal": 30}


def test_check_raises_the_same_refusal_and_the_error_carries_no_result(make_env):
    env = make_env(rate="{max_changes: 1, window: 1h}")
    traffic = service(env)
    traffic.set({"databricks": 70, "internal": 30}, reason="one")
    with pytest.raises(GuardRefused) as refused:
        traffic.set({"databricks": 60, "internal": 40}, reason="two")
    assert "refused by guard rate" in refused.value.message
    assert not hasattr(refused.value, "carried") and not hasattr(refused.value, "result")
    assert [e["outcome"] for e in env.audit()] == ["applied", "refused"]  # audited once, either way


def test_a_plan_refused_by_bounds_returns_its_attempt_too(make_env):
    env = make_env()
    refused = service(env).set({"databricks": 70, "internal": 20}, reason="does not add up", check=False)
    assert refused.outcome == "refused" and isinstance(refused.error, UsageError) and refused.exit_code == 2
    assert [g.name for g in refused.guards if not g.ok] == ["bounds"]  # checked with the policy guards


def test_an_emergency_without_an_incident_is_a_returned_refusal(make_env):
    env = make_env()
    refused = service(env).set({"databricks": 60, "internal": 40}, emergency=True, check=False)
    assert refused.outcome == "refused" and refused.exit_code == 2 and "--incident" in refused.message
    assert env.audit()[-1]["outcome"] == "refused"


def test_an_aborted_ramp_returns_its_outcome_with_the_steps_it_took(make_env):
    env = make_env(capacity=CAP5)  # internal carries 40% at most: the third step (50%) is refused
    outcome = service(env).ramp(lambda current: Split.of({"internal": 60, "databricks": 40}),
                                step=10, interval=0, reason="r", check=False)
    assert isinstance(outcome, RampOutcome) and outcome.status == "aborted"
    assert isinstance(outcome.error, GuardRefused) and outcome.exit_code == 4
    assert [r.outcome for r in outcome.results] == ["applied", "applied", "refused", "applied"]  # ... and the rollback
    assert env.stored()["weights"] == {"databricks": 80, "internal": 20}
    assert "error" not in outcome.to_dict()


def test_a_completed_ramp_has_no_error(make_env):
    env = make_env()
    outcome = service(env).ramp(lambda current: Split.of({"internal": 30, "databricks": 70}),
                                step=10, interval=0, reason="r", check=False)
    assert outcome.status == "completed" and outcome.error is None and outcome.exit_code == 0


def test_what_has_no_result_is_raised_either_way(make_env):
    env = make_env()
    with pytest.raises(UsageError):
        service(env).failover("vendorx", "INC-1", check=False)  # an unknown backend: no attempt was made
    with pytest.raises(OpsctlError):
        service(env).restore("INC-9", check=False)  # no failover recorded for the incident
