"""`opsctl drill run --chain` up to the drill itself: `--chain-timeout` parsed and bounded, the
routing file found (the routing generated from the config unless --routing), a dry run's plan
shown with exit 4 when its preflight would refuse. Pinned before the body moved into
opsctl.drills.chain.launch (issue 26 item 4); nothing here starts a process."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

SCENARIO = str(REPO / "chaos" / "vendor-outage.yaml")
ROUTING = str(REPO / "deploy" / "alertmanager.yml")
PLAN_KEYS = ["dry_run", "expectations", "file", "hops", "method", "mode", "preflight", "rollbacks", "scenario", "setup", "verdict",
             "would_refuse"]


@pytest.mark.parametrize("text, error", [
    ("abc", "error: --chain-timeout: invalid duration 'abc': use forms like 30s, 5m, 1h30m, 28d\n"),
    ("10s", "error: --chain-timeout must be between 30s and 1h\n"),
    ("29s", "error: --chain-timeout must be between 30s and 1h\n"),
    ("61m", "error: --chain-timeout must be between 30s and 1h\n"),
])
def test_a_chain_timeout_that_is_no_duration_or_out_of_bounds_exits_2(drill_env, text, error):
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--chain-timeout", text)
    assert result.exit_code == 2, result.output
    assert (result.stdout, result.stderr) == ("", error)
    assert drill_env.runs() == []


@pytest.mark.parametrize("text", ["30s", "1h"])
def test_the_chain_timeout_bounds_are_inclusive(drill_env, text):
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--chain-timeout", text, "--dry-run",
                           "--routing", ROUTING, "-o", "json")
    assert result.exit_code == 0, result.output


def test_a_given_routing_file_must_exist(drill_env):
    missing = drill_env.root / "nope.yml"
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--routing", str(missing))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {missing}: no Alertmanager routing to rehearse\n")
    assert drill_env.runs() == []


def test_without_routing_the_routing_generated_from_the_config_is_rehearsed(drill_env):
    # No deploy/alertmanager.yml next to this config: the routing is generated from its policies.
    assert not (drill_env.root / "deploy" / "alertmanager.yml").exists()
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    [check] = [c for c in plan["preflight"] if c["name"] == "routing file"]
    assert check["ok"] is True and "generated from the config's automation.policies" in check["message"]
    assert drill_env.runs() == []


def test_a_dry_run_whose_routing_is_missing_shows_the_plan_and_exits_4(drill_env):
    missing = drill_env.root / "nope.yml"
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--dry-run", "--routing", str(missing), "-o", "json")
    assert result.exit_code == 4, result.output
    plan = json.loads(result.stdout)
    assert sorted(plan) == PLAN_KEYS
    assert plan["mode"] == "chain" and plan["dry_run"] is True and plan["would_refuse"] is True
    assert result.stderr == f"error: preflight would refuse this drill: {missing}: not found\n"


def test_a_dry_run_shows_its_plan_as_text_and_starts_nothing(drill_env):
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--dry-run", "--routing", ROUTING)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"dry run of {SCENARIO} (chain): Vendor outage - Databricks answers 5xx to 10% of requests"
    assert lines[1] == "preflight:"
    assert f"  ok  routing file: {ROUTING}" in lines
    assert lines[-2:] == ["verdict: every required hop within the predicted page time + a 3m margin of the fault,"
                          " else the drill fails naming the first broken hop and its last evidence",
                          "nothing was started or changed"]
    assert result.stderr == ""
    assert drill_env.runs() == []


def test_a_given_chain_timeout_is_the_dry_runs_verdict(drill_env):
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--dry-run", "--routing", ROUTING,
                           "--chain-timeout", "5m", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verdict"] == ("every required hop within 5m00s of the fault, else the drill"
                                                     " fails naming the first broken hop and its last evidence")


def test_a_live_chain_dry_run_is_planned_as_live_chain(drill_env):
    result = drill_env.run("drill", "run", SCENARIO, "--chain", "--live", "--dry-run", "-o", "json")
    assert result.exit_code == 4, result.output
    plan = json.loads(result.stdout)
    assert plan["mode"] == "live-chain" and plan["would_refuse"] is True
    assert result.stderr.startswith("error: preflight would refuse this drill: ")
