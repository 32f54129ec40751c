"""serve and the in-process drill build their policy engine with one builder
(opsctl/automation/engine_factory.py): from one config, a drill's engine and `opsctl serve`'s have
the same policies, causes, actions, ticket categories, timings and traffic rate limit."""

from __future__ import annotations

import json

from opsctl.automation.engine_factory import shape
from tests.drills.conftest import DrillEnv
from tests.drills.test_automation import SHIPPED_CONFIG


def distinct_config() -> str:
    """The shipped config with values no default has: so equal shapes mean both read this config."""
    text = SHIPPED_CONFIG
    for old, new in [
        ("  hold_down: 10m ", "  hold_down: 17m "),
        ("  rate_limit: {max_changes: 6, window: 1h}", "  rate_limit: {max_changes: 9, window: 47m}"),
        ("      causes: [auth]\n", "      causes: [auth]\n      hold_down: 3m\n"),
    ]:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def test_a_drill_and_serve_built_from_one_config_have_the_same_policy_engine(tmp_path):
    from opsctl.automation.executors import open_executor
    from opsctl.automation.service import AutomationService
    from opsctl.config.loading import load_config_file

    env = DrillEnv(tmp_path, distinct_config())
    result = env.run("drill", "run", str(env.scenario("auth-throttling")), "-o", "json")
    assert result.exit_code == 0, result.output
    drill = json.loads(result.stdout)["automation"]["engine"]

    cfg = load_config_file(env.config)
    service = AutomationService(cfg, open_executor(cfg), state_file=tmp_path / "serve.sqlite")
    served = json.loads(json.dumps(shape(service.engine).to_dict()))
    assert drill == served

    # What they agree on is this config's, read off the engines (numbers from the edits above).
    assert drill["hold_down_seconds"] == 17 * 60 and drill["fenced"] is True
    assert drill["rate_limit"] == {"max_changes": 9, "window_seconds": 47 * 60}
    policies = {p["name"]: p for p in drill["policies"]}
    assert list(policies) == ["failover-on-availability-page", "failover-on-auth-page", "failover-on-latency-page",
                              "hold-on-quality-page", "page-on-absent-metrics"]
    auth = policies["failover-on-auth-page"]
    assert auth["causes"] == ["auth"] and auth["hold_down_seconds"] == 180
    assert auth["actions"] == ["failover", "page", "ticket", "note", "restore"]
    assert auth["ticket_categories"]["auth"] == "platform" and auth["ticket_categories"]["server_error"] == "inference"
    assert policies["failover-on-availability-page"]["causes"] == ["capacity", "server_error", "timeout"]
    assert policies["page-on-absent-metrics"]["actions"] == ["page", "note"]
    assert policies["page-on-absent-metrics"]["ticket_categories"] == {}
