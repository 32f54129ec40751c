"""A drill whose expectation is not met is reported failed, with the reason, and exits 1."""

from __future__ import annotations

import hashlib

import json

from tests.drills.conftest import audit, ledger, split_file, tickets


def run_json(env, path):
    result = env.run("drill", "run", str(path), "-o", "json")
    return result, json.loads(result.stdout)


def verdict(report, expect):
    [v] = [v for v in report["expectations"] if v["expect"] == expect]
    return v


def test_a_responder_slower_than_the_acknowledgement_deadline_fails_that_expectation_with_the_reason(drill_env):
    def slow(data):
        data["responders"]["on-call"].update({"acknowledge-after": "12m", "escalate-after": "never"})
        data["stop-conditions"][0]["above"] = 0.95  # the late failover spends more budget: not the point here

    result, report = run_json(drill_env, drill_env.scenario("vendor-outage", slow))
    assert result.exit_code == 1
    assert report["outcome"] == "failed"
    ack = verdict(report, "acknowledged")
    assert not ack["passed"]
    # Failed when the 10m deadline passed without an acknowledgement; the drill went on and measured it:
    # acknowledged 12m after the page.
    assert ack["reason"] == "the page was not acknowledged within 10m00s"
    m = report["measurements"]
    assert m["time_to_acknowledge"] == m["time_to_page"] + 12 * 60
    assert verdict(report, "detected")["passed"] and verdict(report, "paged")["passed"]
    assert any("Acknowledgement" in item for item in report["action_items"])
    assert "page acknowledged" in result.stderr and "drill failed" in result.stderr
    assert report["clean"], "a failed drill still rolls back everything"


def test_an_unacknowledged_page_escalates_and_the_secondary_acknowledges(drill_env):
    def primary_asleep(data):
        data["responders"]["on-call"].update({"acknowledge-after": "never", "escalate-after": "5m",
                                              "secondary-acknowledge-after": "1m"})
        data["expectations"].append({"name": "escalated", "expect": "escalated", "within": "10m"})

    result, report = run_json(drill_env, drill_env.scenario("vendor-outage", primary_asleep))
    assert result.exit_code == 0, result.output
    m = report["measurements"]
    assert m["escalated_after"] == m["time_to_page"] + 5 * 60
    assert m["time_to_acknowledge"] == m["escalated_after"] + 60
    assert m["acknowledged_by"] == "secondary on-call (drill)"
    # The alert's own page (Alertmanager's PagerDuty route) and the automation's are one incident
    # (Alertmanager's dedup key, issue 36): it escalates.
    [incident] = ledger(drill_env.run_dir())["incidents"]
    assert incident["dedup_key"] == hashlib.sha256(b'{}/{severity="page"}:{service="llm-inference"}').hexdigest()
    # the automation's page opens it (1 s group wait), Alertmanager's (5 s) is deduplicated into it
    assert [e["type"] for e in incident["log"]][:5] == ["trigger", "notify", "trigger", "escalate", "notify"]


def test_a_vendor_that_reroutes_the_ticket_out_of_inference_fails_the_response_expectation(drill_env):
    def rerouted(data):
        data["responders"]["vendor"]["route-to"] = "platform"

    result, report = run_json(drill_env, drill_env.scenario("vendor-outage", rerouted))
    assert result.exit_code == 1
    assert verdict(report, "vendor-ticket")["passed"], "it was filed in the right category"
    responded = verdict(report, "vendor-responded")
    assert not responded["passed"]
    assert "the vendor's triage moved it out of inference" in responded["reason"]
    assert "Workspace / Platform" in responded["reason"]


def test_a_vendor_without_an_inference_category_fails_the_ticket_expectation_naming_the_missing_mapping(drill_env):
    text = drill_env.config.read_text().replace("        inference: Model Serving          # reaches the serving team, not the generic queue\n", "")
    assert "inference: Model Serving" not in text
    drill_env.config.write_text(text)
    result, report = run_json(drill_env, drill_env.scenario("escalation-only"))
    assert result.exit_code == 1
    ticket = verdict(report, "vendor-ticket")
    assert "filing the databricks ticket failed: vendor 'databricks' has no category 'inference'" in ticket["reason"]
    assert any("tickets.vendors.<vendor>.categories" in item for item in report["action_items"])


def test_a_failover_that_capacity_cuts_short_fails_a_full_failover_expectation(drill_env):
    def busy(data):
        data["environment"]["embedded"]["peak-rps"] = 500  # the 6 internal pods carry ~190 rps with headroom

    result, report = run_json(drill_env, drill_env.scenario("vendor-outage", busy))
    assert result.exit_code == 1
    failover = verdict(report, "failover-applied")
    assert not failover["passed"]
    assert "points moved off databricks" in failover["reason"] and "internal could carry only" in failover["reason"]
    [entry] = [e for e in audit(drill_env.run_dir()) if e.get("action") == "failover"]
    moved = 80 - entry["after"]["weights"]["databricks"]
    assert 0 < moved < 80 and entry["shortfall"]["internal"]["not_moved"] == 80 - moved
    assert split_file(drill_env.run_dir())["weights"] == {"internal": 20, "databricks": 80}, "rolled back"
