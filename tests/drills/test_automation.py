"""A drill's failovers and tickets come from automation.policies, through the policy engine
`opsctl serve` runs: a drill whose policies would do nothing fails, and says which alert no policy
matched; the ticket category and the failover are the policy's, not the scenario's."""

from __future__ import annotations

import hashlib

import json
import re

import yaml

from tests.conftest import REPO
from tests.drills.conftest import DrillEnv, audit, ledger, tickets

SHIPPED_CONFIG = (REPO / "opsctl.yaml").read_text()
POLICIES = re.compile(r"^  policies:\n(?:(?:    .*|\s*)\n)*", re.M)


def with_policies(text: str) -> str:
    """The shipped config with automation.policies replaced by `text` (YAML at the policies' indent)."""
    assert POLICIES.search(SHIPPED_CONFIG), "the shipped config lists automation.policies"
    return POLICIES.sub(lambda _: f"  policies:{text}\n", SHIPPED_CONFIG, count=1)


def run_json(env: DrillEnv, scenario: str):
    result = env.run("drill", "run", str(env.scenario(scenario)), "-o", "json")
    return result, json.loads(result.stdout)


def verdict(report, expect):
    [v] = [v for v in report["expectations"] if v["expect"] == expect]
    return v


def deployed_group_wait(receiver: str, fast: bool) -> int:
    """deploy/alertmanager.yml: the group_wait of the route a page takes to `receiver` (the fast
    tier's pages and the others' take the one paging route, severity="page", decisions/0230)."""
    doc = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    kinds = {r["name"]: ({"pagerduty"} if r.get("pagerduty_configs") else set())
             | ({"opsctl"} if any(h["url"].endswith("/v1/alertmanager") for h in r.get("webhook_configs") or [])
                else set()) for r in doc["receivers"]}
    routes = [r for r in doc["route"]["routes"] if receiver in kinds[r["receiver"]] and 'severity="page"' in r["matchers"]]
    value = routes[0]["group_wait"]
    return int(value[:-1]) * {"s": 1, "m": 60}[value[-1]]


def test_a_drill_whose_policies_would_do_nothing_fails_and_names_the_alert_no_policy_matched(tmp_path):
    env = DrillEnv(tmp_path, with_policies(" []"))
    result, report = run_json(env, "vendor-outage")
    assert result.exit_code == 1, result.output
    # Nothing moves the traffic, so the budget keeps burning until the scenario's stop condition ends it.
    assert report["outcome"] == "aborted" and "of its period error budget" in report["abort_reason"]
    assert verdict(report, "detected")["passed"] and verdict(report, "paged")["passed"]
    failover, ticket = verdict(report, "failover-applied"), verdict(report, "vendor-ticket")
    assert not failover["passed"] and not ticket["passed"]
    assert "automation: no policy matched Slo" in failover["reason"]
    assert "firing (slo=llm-inference-databricks-availability, backend=databricks" in failover["reason"]
    assert report["automation"]["actions"] == []
    assert any("llm-inference-databricks-availability" in u["alert"] for u in report["automation"]["unmatched"])
    assert not [e for e in audit(env.run_dir()) if e.get("action") == "failover"], "nothing moved the traffic"
    assert tickets(env.run_dir()) == []


def test_a_policy_in_dry_run_decides_but_moves_nothing_so_the_drill_fails(tmp_path):
    text = SHIPPED_CONFIG.replace("  dry_run: false\n", "  dry_run: true\n", 1)
    assert text != SHIPPED_CONFIG
    env = DrillEnv(tmp_path, text)
    result, report = run_json(env, "vendor-outage")
    assert result.exit_code == 1
    assert not verdict(report, "failover-applied")["passed"]
    statuses = {a["action"]: a["status"] for a in report["automation"]["actions"]}
    assert statuses["failover"] == "dry_run" and statuses["ticket"] == "dry_run"


def test_a_policy_naming_the_wrong_ticket_category_fails_the_drill_with_where_the_ticket_went(tmp_path):
    shipped = "ticket: {severity: Sev1}"  # the availability policy's: category by the cause (5xx: inference)
    assert shipped in SHIPPED_CONFIG
    env = DrillEnv(tmp_path, SHIPPED_CONFIG.replace(shipped, "ticket: {category: platform, severity: Sev1}", 1))
    result, report = run_json(env, "vendor-outage")
    assert result.exit_code == 1
    ticket = verdict(report, "vendor-ticket")
    assert not ticket["passed"]
    assert 'reached "Workspace / Platform", not the inference category' in ticket["reason"]
    [filed] = tickets(env.run_dir())
    assert filed["opsctl_category"] == "platform" and "drill" in filed["tags"]


def test_the_failover_page_and_ticket_of_a_vendor_outage_are_the_shipped_policys(drill_env):
    result, report = run_json(drill_env, "vendor-outage")
    assert result.exit_code == 0, result.output
    run = drill_env.run_dir()
    [failover] = [e for e in audit(run) if e.get("action") == "failover"]
    assert "opsctl serve, policy failover-on-availability-page" in failover["reason"]  # 5xx: that class's policy
    # The incident's page (issue 36): Alertmanager's dedup key for the service's group on the paging
    # route, sha256('{}/{severity="page"}:{service="llm-inference"}') (its notify/util.go Key.Hash).
    incident = hashlib.sha256(b'{}/{severity="page"}:{service="llm-inference"}').hexdigest()
    assert failover["incident"] == incident
    # serve acts when Alertmanager's opsctl route delivers the first alert its policy matches: the
    # deployed group wait after that alert fired (the shipped policy's alertname, from opsctl.yaml).
    # (the shipped availability policy matches every page of the category: the first page of the SLO)
    fired = [(e["offset"], e["message"]) for e in report["timeline"] if e["kind"] == "alert" and re.match(
        r"FIRING Slo\w+Page llm-inference-databricks-availability ", e["message"])]
    at, first = fired[0]
    m = report["measurements"]
    assert m["time_to_mitigate"] == at + deployed_group_wait("opsctl", fast="SloFastBurnPage" in first)
    assert m["time_to_vendor_routing"] == m["time_to_mitigate"]
    [filed] = tickets(run)
    assert filed["opsctl_category"] == "inference" and filed["severity"] == "Severity 1 - Critical"  # Sev1, as the vendor names it
    # Alertmanager's page (the drill's stand-in) and the policy's page carry that one dedup key:
    # one PagerDuty incident, triggered by both.
    [page] = ledger(run)["incidents"]
    assert page["dedup_key"] == incident
    assert [e["type"] for e in page["log"]].count("trigger") >= 2, "the alert's own page and the policy's page"
    assert page["status"] == "resolved", "the rollbacks resolve it"
    actions = [(a["action"], a["status"]) for a in report["automation"]["actions"]]
    assert actions[:4] == [("failover", "applied"), ("page", "applied"), ("ticket", "applied"), ("note", "applied")]
