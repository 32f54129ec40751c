"""`opsctl serve` acts on the live quality alerts as on the burn-rate ones: a policy matches their
`category` and `signal` labels and fails over, pages and files the vendor ticket through the same
steps (dry run here: the same path with an executor that changes nothing)."""

from __future__ import annotations

from tests.automation.helpers import Serve, actions, alert, message, wait_for, write_serve_config
from tests.conftest import run_opsctl

QUALITY_POLICY = """\
- name: quality-regression
  match: {category: quality, severity: page}
  match_re: {backend: "internal|databricks"}
  actions: {failover: {}, page: {}, ticket: {}, note: true}
"""


def quality_alert_labels(config) -> dict:
    """The labels of the generated prompt-token alert, as `opsctl slo rules` writes them."""
    from opsctl.config import load_config
    from opsctl.quality.rules import alert_labels, plan_quality

    plan = plan_quality(load_config(str(config)))
    [shift] = [a for a in plan.alerts if a.alertname == "QualityPromptTokensShift"]
    return {"alertname": shift.alertname, **alert_labels(plan, shift)}


def test_a_policy_may_match_the_quality_labels(tmp_path):
    config = write_serve_config(tmp_path, policies=QUALITY_POLICY)
    result = run_opsctl("--config", str(config), "config", "validate")
    assert result.exit_code == 0, result.stderr


def test_a_quality_page_fails_over_pages_and_files_the_vendor_ticket(tmp_path):
    config = write_serve_config(tmp_path, policies=QUALITY_POLICY, automation_extra="dry_run: true\nhold_down: 1h\n")
    labels = quality_alert_labels(config)
    assert labels["category"] == "quality" and labels["backend"] == "databricks" and "slo" not in labels
    server = Serve(config)
    try:
        payload = alert(fingerprint="9a1b2c3d4e5f6071", alertname=labels["alertname"], backend=labels["backend"],
                        severity=labels["severity"], slo="", **{k: v for k, v in labels.items()
                                                                   if k not in ("alertname", "backend", "severity")})
        payload["labels"].pop("slo")
        reply = server.post_alertmanager(message(payload, group_key='{}:{category="quality"}'))
        assert reply.status == 202
        wait_for(lambda: len(actions(tmp_path, "note")) >= 1, what="the note after the quality alert")
        done = actions(tmp_path)
        assert [(a["policy"], a["action"], a["status"]) for a in done] == [
            ("quality-regression", "failover", "dry_run"), ("quality-regression", "page", "dry_run"),
            ("quality-regression", "ticket", "dry_run"), ("quality-regression", "note", "dry_run")]
        assert "databricks" in done[0]["detail"]
    finally:
        server.stop()
