"""Every shipped scenario through the chain (issue 37 item 1): what the chain refuses, with exit 2 and
one line naming the file and the fix; for the rest, the chain's plan without running it (the pauses it
keeps, each expectation judged or listed "not judged here"), and a full run where it is fast enough."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, require_binary
from tests.drills.conftest import CHAOS, SHIPPED, DrillEnv, audit

ROUTING = str(REPO / "deploy" / "alertmanager.yml")

# By hand from each scenario file: the pause before each method step as the chain runs it (capped at
# 10 s up to the first fault, whole after it: decisions/0350; "" for none), and the expectations no
# local chain component can show (chain/observed.CANNOT_JUDGE: no vendor answers, the SLOs' recovery
# is not waited for, the method's traffic changes are not played).
PLANNED = {
    "auth-throttling": ([" after 0m10s"], ["service availability recovered"]),
    "both-degraded": ([" after 0m10s", " after 3m00s"], []),
    "freeze-incident": (["", " after 0m10s"], ["the freeze refused the routine change", "service availability recovered"]),
    "internal-capacity-loss": ([" after 0m10s"], ["service availability recovered"]),
    "oauth-token-failure": ([" after 0m10s"], ["service availability recovered"]),
    "oom-kill-loop": ([" after 0m10s"], ["service availability recovered"]),
    "slow-token-endpoint": ([" after 0m10s"], ["service availability recovered"]),
    "vendor-503-storm": ([" after 0m10s"], []),
    "vendor-latency": ([" after 0m10s"], ["service latency recovered"]),
    "vendor-outage": ([" after 0m10s"], ["vendor responded, ticket still in inference", "service availability recovered"]),
}
REFUSED = {
    "escalation-only": "a chain drill needs a fault to send down the chain (method has none): run it embedded",
    "quality-regression": "a chain drill does not run quality scenarios yet",
}


def test_every_shipped_scenario_is_planned_or_refused_here():
    assert sorted([*PLANNED, *REFUSED]) == SHIPPED


def test_escalation_only_is_refused_by_the_chain_with_exit_2_and_one_line_naming_the_fix(drill_env):
    path = CHAOS / "escalation-only.yaml"
    result = drill_env.run("drill", "run", str(path), "--chain", "--routing", ROUTING)
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"error: {path}: a chain drill needs a fault to send down the chain (method has"
                             f" none): run it embedded (opsctl drill run {path})\n")
    assert not drill_env.runs(), "nothing started"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_scenario_the_chain_refuses_is_refused_by_its_dry_run_too(drill_env, name):
    result = drill_env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "--chain", "--dry-run", "--routing", ROUTING,
                           "-o", "json")
    assert result.exit_code == 4, result.output
    plan = json.loads(result.stdout)
    [check] = [c for c in plan["preflight"] if c["name"] == "the scenario runs as a chain drill"]
    assert check["ok"] is False and REFUSED[name] in check["message"]
    assert result.stderr.startswith("error: preflight would refuse this drill: ") and REFUSED[name] in result.stderr
    assert not drill_env.runs()


@pytest.mark.parametrize("name", sorted(PLANNED))
def test_the_chains_plan_keeps_the_pauses_after_the_first_fault_and_lists_what_it_cannot_judge(drill_env, name):
    import yaml

    result = drill_env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "--chain", "--dry-run", "--routing", ROUTING,
                           "-o", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["would_refuse"] is False
    pauses, not_judged = PLANNED[name]
    assert [line.split(":", 1)[0] for line in plan["method"]] == [f"method[{i}]{p}" for i, p in enumerate(pauses)]
    names = [e["name"] for e in yaml.safe_load((CHAOS / f"{name}.yaml").read_text())["expectations"]]
    listed = plan["expectations"]
    assert len(listed) == len(names)  # every expectation, in the scenario's order, judged or not
    for line, expected in zip(listed, names):
        if expected in not_judged:
            assert line.startswith(f"not judged here: {expected} ("), line
        else:
            assert line.startswith(f"judged: {expected} ("), line


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_freeze_incident_through_the_chain_fails_over_overriding_the_scenarios_freeze(tmp_path):
    """freeze-incident as shipped (about 2 minutes): serve reads the drill's freeze (decisions/0351), so
    the failover is an emergency that overrides it, and the routine change the chain does not play is
    "not judged here", not passed."""
    for binary in ("prometheus", "promtool", "prometheus-alertmanager", "amtool"):
        require_binary(binary)
    env = DrillEnv(tmp_path)
    result = env.run("drill", "run", str(CHAOS / "freeze-incident.yaml"), "--chain", "--routing", ROUTING, "-o", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and report["outcome"] == "passed", result.output
    verdicts = {v["name"]: v for v in report["expectations"]}
    override = verdicts["failover overrode the freeze"]
    assert override["passed"] and "overriding freeze" in override["detail"]
    refused = verdicts["the freeze refused the routine change"]
    assert not refused["passed"] and refused["reason"].startswith("not judged here: ")
    [freeze] = [s for s in report["shortened"] if s["where"] == "freeze drill-freeze"]
    assert freeze["now"] == "over the drill's wall-clock span"
    # serve's own audit entry, read without opsctl: the failover overrode the freeze as an emergency
    [failover] = [e for e in audit(env.run_dir()) if e.get("action") == "failover" and e.get("outcome") == "applied"]
    assert failover["overrides"] == ["freeze"] and failover["emergency"] is True
