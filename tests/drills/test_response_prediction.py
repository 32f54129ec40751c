"""The mitigate and ticket hops predicted from the config and the policy (drills/prediction.py,
`response_hops`): after detection, serve's delivery (the opsctl route's group_wait), then the
policy's failover and ticket. The expected figures are worked out here from the shipped files
(opsctl.yaml's policies and ticket categories, deploy/alertmanager.yml's routes, the scenarios),
not from the code under test."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.conftest import REPO
from tests.drills.conftest import CHAOS, DrillEnv

UNITS = {"s": 1, "m": 60, "h": 3600}


def _seconds(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1]]


def _routes() -> dict[tuple[str, bool], int]:
    """(receiver, fast tier?) -> group_wait, off deploy/alertmanager.yml: the first route of each."""
    raw = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())
    out: dict[tuple[str, bool], int] = {}
    receivers = {r["name"]: r for r in raw["receivers"]}
    for route in raw["route"]["routes"]:
        # the paging route (severity="page") takes the fast tier's pages too
        receiver = receivers[route["receiver"]]
        kinds = (["pagerduty"] if receiver.get("pagerduty_configs") else []) + (
            ["opsctl"] if any(h["url"].endswith("/v1/alertmanager") for h in receiver.get("webhook_configs") or [])
            else [])
        if route.get("matchers") == ['severity="page"']:
            for kind in kinds:
                for fast in (True, False):
                    out.setdefault((kind, fast), _seconds(route["group_wait"]))
    return out


def _policy(labels: dict[str, str], cause: str) -> dict:
    """The shipped policy serve picks for an alert: labels by match (exact) and match_re (anchored),
    then, where some candidate names causes, the cause among them (written out here, not imported)."""
    policies = yaml.safe_load((REPO / "opsctl.yaml").read_text())["automation"]["policies"]
    candidates = [p for p in policies
                  if all(labels.get(k) == v for k, v in (p.get("match") or {}).items())
                  and all(re.fullmatch(v, labels.get(k, "")) for k, v in (p.get("match_re") or {}).items())]
    if any(p.get("causes") for p in candidates):
        candidates = [p for p in candidates if not p.get("causes") or cause in p["causes"]]
    [policy] = candidates
    return policy


def _text(seconds) -> str:
    from opsctl.drills.text import duration_text

    return duration_text(seconds)


def _scenario_paging(name: str) -> dict:
    return yaml.safe_load((CHAOS / f"{name}.yaml").read_text()).get("paging") or {}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = {}
    for name in ("vendor-outage", "auth-throttling"):
        env = DrillEnv(tmp_path_factory.mktemp(name))
        result = env.run("drill", "run", str(CHAOS / f"{name}.yaml"), "-o", "json")
        assert result.exit_code == 0, result.output
        out[name] = (json.loads(result.stdout), (env.run_dir() / "report.md").read_text())
    return out


# scenario -> (the fault's dominant bad outcome class, as the availability alert's cause reads it,
# the ticket category opsctl.yaml's runbooks.tickets gives that cause). vendor-outage fails 10% of
# databricks' requests with 503 (server_error); auth-throttling answers 20% with 429 and 10% with 401
# (throttled and auth_error: both the cause `auth`).
CASES = {"vendor-outage": ("server_error", "failover-on-availability-page", "inference"),
         "auth-throttling": ("auth", "failover-on-auth-page", "platform")}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_mitigate_and_ticket_hops_are_predicted_from_the_route_waits_and_the_policy(reports, name):
    report, markdown = reports[name]
    pred = report["prediction"]
    cause, policy_name, category = CASES[name]
    assert pred["slo"].endswith("databricks-availability")

    # The first tier to fire (the detection prediction, tested elsewhere) picks the routes.
    firing = [t for t in pred["tiers"] if t["predicted_seconds"] is not None]
    first = min(firing, key=lambda t: t["predicted_seconds"])
    detect = first["predicted_seconds"]
    assert detect == pred["predicted_detection_seconds"]
    fast = first["tier"] == "fast"
    routes, paging = _routes(), _scenario_paging(name)
    # The scenario's paging models deploy/alertmanager.yml's routes; an override (vendor-outage's
    # group-wait: 30s) is the scenario's own.
    page_wait = _seconds(paging["fast-group-wait"]) if fast and "fast-group-wait" in paging else \
        _seconds(paging["group-wait"]) if not fast and "group-wait" in paging else routes[("pagerduty", fast)]
    key = "fast-automation-group-wait" if fast else "automation-group-wait"
    delivery = _seconds(paging[key]) if key in paging else routes[("opsctl", fast)]
    assert (routes[("opsctl", True)], routes[("opsctl", False)]) == (1, 1)

    labels = {"severity": "page", "category": "availability", "backend": "databricks"}
    policy = _policy(labels, cause)
    assert policy["name"] == policy_name
    assert "failover" in policy["actions"] and "ticket" in policy["actions"]
    assert "category" not in (policy["actions"]["ticket"] or {})  # from the cause
    tickets = yaml.safe_load((REPO / "opsctl.yaml").read_text())["runbooks"]["tickets"]
    assert (tickets["auth_category"] if cause == "auth" else tickets["category"]) == category

    predicted = {h["hop"]: h["predicted_seconds"] for h in pred["hops"]}
    assert predicted == {"detect": detect, "page": detect + page_wait, "mitigate": detect + delivery,
                         "ticket": detect + delivery}
    response = pred["response"]
    assert response["cause"] == cause and response["policies"] == [policy_name]
    assert response["ticket_category"] == category
    assert response["delivery_wait_seconds"] == delivery and response["page_wait_seconds"] == page_wait

    # Embedded time is exact: where detection came as predicted, every hop after it did too.
    m = report["measurements"]
    assert m["time_to_detect"] == detect
    assert (m["time_to_page"], m["time_to_mitigate"], m["time_to_vendor_routing"]) == \
        (predicted["page"], predicted["mitigate"], predicted["ticket"])

    # The report's prediction table shows them.
    header = "| hop | predicted | from the fault | budget spent by then | how |"
    assert header in markdown
    table = markdown.split(header, 1)[1].split("\n\n", 1)[0].splitlines()
    row = next(line for line in table if line.startswith("| mitigate |"))
    assert row.startswith(f"| mitigate | {_text(predicted['mitigate'])} | {_text(m['time_to_mitigate'])} |")
    assert f"policy {policy_name} acts as it arrives" in row


def _shipped():
    from opsctl.config import load_config_file
    from opsctl.drills.scenario import load_scenario
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    cfg = load_config_file(REPO / "opsctl.yaml")
    plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
    [plan] = [p for p in plans if p.name.endswith("-databricks-availability")]
    return cfg, plan, load_scenario(CHAOS / "vendor-outage.yaml")


def test_a_dry_run_or_a_policy_without_the_action_predicts_no_mitigation_and_says_why():
    import dataclasses

    from opsctl.drills.prediction import predict, response_hops

    cfg, plan, scenario = _shipped()
    tiers = predict(plan, 200.0, 60)
    args = dict(fault_kind="vendor-5xx", params={"rate": 0.1}, backend_kind="vendor")
    live = response_hops(cfg, scenario.paging, plan, tiers, **args).hops
    assert live["mitigate"][0] is not None

    dry = dataclasses.replace(cfg, automation=dataclasses.replace(cfg.automation, dry_run=True))
    hops = response_hops(dry, scenario.paging, plan, tiers, **args).hops
    assert hops["mitigate"] == (None, "policy failover-on-availability-page is a dry run: it decides, changes nothing")
    assert hops["ticket"][0] is None and hops["page"] == live["page"]

    # Only the page-only absent-metrics policy left: nothing matches an availability page.
    absent = [p for p in cfg.automation.policies if p.name == "page-on-absent-metrics"]
    none = dataclasses.replace(cfg, automation=dataclasses.replace(cfg.automation, policies=absent))
    hops = response_hops(none, scenario.paging, plan, tiers, **args).hops
    assert hops["mitigate"][0] is None and hops["mitigate"][1].startswith("no policy matches SloBurnRatePage")
    assert "serve does nothing" in hops["ticket"][1]


def test_an_auth_fault_reads_as_the_auth_cause_and_a_5xx_as_server_error():
    from opsctl.drills.prediction import fault_cause

    _, plan, _ = _shipped()
    assert fault_cause(plan, "auth-throttling", {"rate": 0.1, "auth_rate": 0.2}, "vendor") == "auth"
    # 429s dominating are the vendor's throttling: cause capacity (shape B), not auth
    assert fault_cause(plan, "auth-throttling", {"rate": 0.2, "auth_rate": 0.1}, "vendor") == "capacity"
    assert fault_cause(plan, "oauth-token-failure", {"rate": 1.0}, "vendor") == "auth"
    assert fault_cause(plan, "vendor-5xx", {"rate": 0.1}, "vendor") == "server_error"


def test_the_route_walk_finds_each_receiver_and_its_group_wait_as_alertmanager_routes():
    from opsctl.drills.chain.routes import receivers_for

    route = yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text())["route"]
    page = {"severity": "page", "category": "availability", "slo": "s", "backend": "databricks"}
    # deploy/alertmanager.yml, read by hand: every page, the fast tier's too, on the paging route (1s)
    assert receivers_for(route, {**page, "tier": "fast"}) == [("pagerduty-and-opsctl", 1.0)]
    assert receivers_for(route, page) == [("pagerduty-and-opsctl", 1.0)]
    # a ticket: the ticket queue (5m); an absent-metrics ticket reaches serve (its policy) first (10s)
    assert receivers_for(route, {**page, "severity": "ticket"}) == [("ticket-queue", 300.0)]
    assert receivers_for(route, {**page, "severity": "ticket", "category": "absent"}) == [
        ("opsctl", 10.0), ("ticket-queue", 300.0)]
    # nothing matches: the root's receiver and group_wait
    assert receivers_for(route, {"severity": "info"}) == [("ticket-queue", 30.0)]
    # the older match / match_re maps, != and !~, and a wait a child inherits
    tree = {"receiver": "root", "group_wait": "7s", "routes": [
        {"receiver": "a", "match": {"team": "x"}, "match_re": {"env": "prod|stage"}},
        {"receiver": "b", "matchers": ['team!="x"', 'env!~"dev.*"'], "group_wait": "3s"}]}
    assert receivers_for(tree, {"team": "x", "env": "stage"}) == [("a", 7.0)]
    assert receivers_for(tree, {"team": "y", "env": "prod"}) == [("b", 3.0)]
    assert receivers_for(tree, {"team": "y", "env": "dev1"}) == [("root", 7.0)]
