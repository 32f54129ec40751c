"""The `automation:` config section: every mistake is exit 2 naming the file and key path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.automation.helpers import FAILOVER_POLICY, write_serve_config
from tests.conftest import REPO, run_opsctl


def _validate(tmp_path, *, policies: str = FAILOVER_POLICY, automation_extra: str = ""):
    config = write_serve_config(tmp_path, policies=policies, automation_extra=automation_extra)
    return run_opsctl("--config", str(config), "config", "validate")


def test_the_embedded_default_ships_a_policy_for_every_class_and_names_no_ticket_category():
    import yaml

    data = yaml.safe_load((REPO / "opsctl.yaml").read_text())
    policies = {p["name"]: p for p in data["automation"]["policies"]}
    assert sorted(policies) == ["failover-on-auth-page", "failover-on-availability-page", "failover-on-latency-page",
                                "hold-on-quality-page", "page-on-absent-metrics"]
    # the vendor's throttling (429, 503 with Retry-After: cause capacity) fails over as an outage does
    assert policies["failover-on-availability-page"]["causes"] == ["server_error", "timeout", "capacity"]
    assert policies["failover-on-auth-page"]["causes"] == ["auth"]
    for name in ("failover-on-availability-page", "failover-on-auth-page", "failover-on-latency-page"):
        assert policies[name]["actions"]["restore"] is True and "failover" in policies[name]["actions"]
    assert "failover" not in policies["hold-on-quality-page"]["actions"]
    assert set(policies["page-on-absent-metrics"]["actions"]) == {"page", "note"}
    # the ticket category comes from the cause, never a constant
    assert not [n for n, p in policies.items() if "category" in (p["actions"].get("ticket") or {})]


def test_the_serve_deployment_ships_the_same_policies_as_the_embedded_default():
    import yaml

    shipped = yaml.safe_load((REPO / "opsctl.yaml").read_text())["automation"]["policies"]
    (configmap,) = [d for d in yaml.safe_load_all((REPO / "deploy" / "serve" / "configmap.yaml").read_text())]
    deployed = yaml.safe_load(configmap["data"]["opsctl.yaml"])
    assert deployed["automation"]["policies"] == shipped
    assert deployed["runbooks"]["tickets"] == {"category": "inference", "auth_category": "platform",
                                               "capacity_category": "inference"}


# ---------------------------------------------------------------------------------------------
# The shipped policies, driven by alerts as opsctl's rules write them (labels and annotations), in
# the real policy engine and incident file store, with the executor that changes nothing (dry run): it
# says what it would do, the ticket's category included.


def _engine(tmp_path):
    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.policy_engine import PolicyEngine
    from opsctl.config import BUILTIN_CONFIG, load_config_file
    from opsctl.incident.file import file_incident_store

    cfg = load_config_file(BUILTIN_CONFIG)
    store = file_incident_store(tmp_path, service=cfg.service, clock=lambda: 1000.0)
    return PolicyEngine(cfg.automation, cfg.backends, store, DryRunExecutor(), tickets=cfg.runbooks.tickets,
                        clock=lambda: 1000.0), store


def _event(key, *, category, cause, alertname="SloBurnRatePage", severity="page", backend="databricks",
           slo="llm-inference-databricks-availability", fingerprint="00aa11bb22cc33dd",
           starts_at="2026-11-29T12:00:00.000000000Z", **labels):
    from opsctl.automation.policy import AlertEvent

    labels = {"alertname": alertname, "severity": severity, "backend": backend, "service": "llm-inference",
              "category": category, **({"slo": slo} if slo else {}), **labels}
    return AlertEvent(key=key, status="firing", labels=labels,
                      annotations={"summary": f"{backend}: words for {cause}", "cause": cause},
                      starts_at=starts_at, fingerprint=fingerprint, group_key="{}:{}", received_at=1000.0)


def _done(taken):
    return [(t.policy, t.action, t.outcome.detail) for t in taken]


@pytest.mark.parametrize("category, cause, extra, policy, ticket", [
    ("availability", "server_error", {}, "failover-on-availability-page", "inference"),
    ("availability", "timeout", {"tier": "fast", "alertname": "SloFastBurnPage"}, "failover-on-availability-page",
     "inference"),
    ("availability", "auth", {}, "failover-on-auth-page", "platform"),
    ("latency", "latency", {"slo": "llm-inference-databricks-latency-1s"}, "failover-on-latency-page", "inference"),
], ids=["5xx", "timeouts-fast-tier", "auth", "latency"])
def test_a_shipped_policy_fails_over_and_files_the_ticket_in_the_category_of_the_cause(
        tmp_path, category, cause, extra, policy, ticket):
    engine, _ = _engine(tmp_path)
    taken = engine.handle_alert(_event("e1", category=category, cause=cause, **extra))
    assert [(t.policy, t.action) for t in taken] == [(policy, "failover"), (policy, "page"), (policy, "ticket"),
                                                     (policy, "note")]
    failover, page, filed = (t.outcome.detail for t in taken[:3])
    assert failover.startswith("would fail over all traffic away from databricks")
    assert f"would file a Sev" in filed and f" {ticket} ticket about databricks" in filed
    assert f"words for {cause}" in page  # the page's title is the alert's summary, naming the cause


def test_a_quality_page_holds_and_files_the_inference_ticket(tmp_path):
    engine, _ = _engine(tmp_path)
    taken = engine.handle_alert(_event("q1", category="quality", cause="quality", alertname="QualitySuggestionsDrop",
                                       slo=None, signal="suggestions"))
    assert [(t.policy, t.action) for t in taken] == [
        ("hold-on-quality-page", "page"), ("hold-on-quality-page", "ticket"), ("hold-on-quality-page", "note")]
    assert " inference ticket about databricks" in taken[1].outcome.detail


def test_absent_metrics_page_and_move_no_traffic(tmp_path):
    engine, _ = _engine(tmp_path)
    taken = engine.handle_alert(_event("a1", category="absent", cause="absent", alertname="SloMetricsAbsent"))
    assert [(t.policy, t.action) for t in taken] == [("page-on-absent-metrics", "page")]


def test_a_cause_that_flips_while_the_alert_fires_stays_in_the_response_it_opened(tmp_path):
    engine, store = _engine(tmp_path)
    first = engine.handle_alert(_event("f1", category="availability", cause="server_error"))
    assert {t.policy for t in first} == {"failover-on-availability-page"}
    # the same alert (fingerprint, startsAt), re-notified: its short window is now mostly 429s
    again = engine.handle_alert(_event("f2", category="availability", cause="auth"))
    # the same response: no second failover, page or ticket; the incident's ticket and page hear of
    # the new cause as notes (issue 36 item 1), and the page's title follows the incident (decision
    # 0252: a trigger on the incident's dedup key whose title names the new cause, never a second page)
    assert [(t.policy, t.action) for t in again] == [("failover-on-availability-page", "cause"),
                                                     ("failover-on-availability-page", "ticket_note"),
                                                     ("failover-on-availability-page", "note"),
                                                     ("failover-on-availability-page", "page"),
                                                     ("failover-on-availability-page", "note")]
    assert "cause now auth" in again[0].outcome.detail and "same response" in again[0].outcome.detail
    (incident,) = store.incidents(open_only=True)
    assert [r.policy for r in incident.open_responses()] == ["failover-on-availability-page"]
    # a different alert opening with the auth cause goes to the auth policy
    other = engine.handle_alert(_event("f3", category="availability", cause="auth", fingerprint="99aa11bb22cc33dd",
                                       long_window="6h", short_window="30m"))
    assert {t.policy for t in other} == {"failover-on-auth-page"}


def test_a_policy_naming_a_category_keeps_it_whatever_the_cause(tmp_path):
    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.policy_engine import PolicyEngine
    from opsctl.config import load_config_file
    from opsctl.incident.file import file_incident_store

    config = write_serve_config(tmp_path, policies=FAILOVER_POLICY.replace("ticket: {}", "ticket: {category: account}"))
    cfg = load_config_file(config)
    engine = PolicyEngine(cfg.automation, cfg.backends, file_incident_store(tmp_path / "s", service=cfg.service),
                          DryRunExecutor(), tickets=cfg.runbooks.tickets)
    taken = engine.handle_alert(_event("k1", category="availability", cause="auth"))
    assert " account ticket about databricks" in [t for t in taken if t.action == "ticket"][0].outcome.detail


def test_an_unknown_cause_is_exit_2(tmp_path):
    result = _validate(tmp_path, policies=FAILOVER_POLICY.replace("actions:", "causes: [dns]\n  actions:"))
    assert result.exit_code == 2, result.output
    assert "causes: unknown cause(s) 'dns'" in result.stderr


CASES = [
    ("a label no policy can match on",
     FAILOVER_POLICY.replace("match: {alertname", "match: {team: llm, alertname"),
     "", "automation.policies[0]: match: unknown label 'team'"),
    ("a broken regular expression",
     FAILOVER_POLICY.replace('".+-availability"', '"(unclosed"'), "", "match_re.slo: invalid regular expression"),
    ("restore without failover",
     FAILOVER_POLICY.replace("failover: {}, ", ""), "", "restore needs failover in the same policy"),
    ("a policy matching everything",
     "- name: everything\n  actions: {page: {}}\n", "", "a policy that matches every alert is refused"),
    ("no actions",
     "- name: idle\n  match: {severity: page}\n  actions: {}\n", "", "give at least one action"),
    ("failover from an unknown backend",
     FAILOVER_POLICY.replace("failover: {}", "failover: {backend: openai}"), "",
     "automation.policies[0].actions.failover.backend: unknown backend 'openai'"),
    ("duplicate policy names", FAILOVER_POLICY + FAILOVER_POLICY, "", "duplicate policy name(s): availability"),
    ("a ticket severity that does not exist",
     FAILOVER_POLICY.replace("ticket: {}", "ticket: {severity: Sev9}"), "",
     "automation.policies[0].actions.ticket.severity: must be one of"),
    ("an unknown action", FAILOVER_POLICY.replace("note: true", "note: true, reboot: true"), "",
     "automation.policies[0].actions.reboot: unknown key"),
    ("a bind address without a port", FAILOVER_POLICY, "bind: localhost\n", "bind must be HOST:PORT"),
    ("a tiny body limit", FAILOVER_POLICY, "body_limit: 10\n", "body_limit must be between"),
    ("a hold-down that is not a duration", FAILOVER_POLICY, "hold_down: soon\n", "invalid duration 'soon'"),
    ("a token given as a plain string", FAILOVER_POLICY, "token: hunter2hunter2hunter2\n", "automation.token"),
]


@pytest.mark.parametrize("case, policies, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_a_bad_automation_section_is_exit_2_naming_the_key(tmp_path, case, policies, extra, expected):
    result = _validate(tmp_path, policies=policies, automation_extra=extra)
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert str(tmp_path / "opsctl.yaml") in result.stderr


def test_serving_does_not_load_starlette_or_uvicorn_on_the_cli_path():
    code = textwrap.dedent("""\
        import sys
        import opsctl.cli.main, opsctl.cli.serve_cmd, opsctl.automation.policy, opsctl.automation.service
        heavy = [m for m in ("starlette", "uvicorn", "prometheus_client", "kubernetes", "pagerduty") if m in sys.modules]
        print(heavy)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(REPO)},
                         timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_serve_help_has_an_example():
    result = run_opsctl("serve", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "opsctl serve --bind" in result.stdout
