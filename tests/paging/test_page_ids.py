"""`page ack|resolve` take the incident id that `trigger` printed; an unknown id or key is exit 3,
like an unknown ticket (an id that names nothing is "no data"; 2 is for malformed input)."""

from __future__ import annotations

import json

import pytest

from tests.cli.inprocess import invoke


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the built-in default: local pager and ticket ledger under ./.opsctl
    return tmp_path


def test_ack_and_resolve_take_the_incident_id_trigger_printed(here):
    opened = json.loads(invoke("page", "trigger", "-s", "databricks 5xx 12%", "-o", "json").stdout)
    incident_id = opened["incident_id"]
    acked = invoke("page", "ack", incident_id, "-o", "json")
    assert acked.exit_code == 0, acked.output
    assert json.loads(acked.stdout)["dedup_key"] == opened["dedup_key"]
    status = json.loads(invoke("page", "status", incident_id, "-o", "json").stdout)
    assert status["status"] == "acknowledged"
    resolved = invoke("page", "resolve", incident_id, "-o", "json")
    assert resolved.exit_code == 0, resolved.output
    assert json.loads(invoke("page", "status", opened["dedup_key"], "-o", "json").stdout)["status"] == "resolved"


def test_ack_by_dedup_key_still_works(here):
    opened = json.loads(invoke("page", "trigger", "-s", "internal pods down", "-o", "json").stdout)
    assert invoke("page", "ack", opened["dedup_key"]).exit_code == 0


def test_an_unknown_page_and_an_unknown_ticket_both_exit_3_with_a_hint(here):
    page = invoke("page", "ack", "LP09999")
    ticket = invoke("ticket", "status", "LT09999")
    assert (page.exit_code, ticket.exit_code) == (3, 3), (page.output, ticket.output)
    assert "LP09999" in page.stderr and "`opsctl page status`" in page.stderr
    assert "no ticket 'LT09999'" in ticket.stderr and "--vendor" in ticket.stderr
    assert "Traceback" not in page.stderr + ticket.stderr


def test_pagerduty_ack_takes_the_incident_id_through_the_rest_api(pd, pd_config_path, pd_env):
    from tests.fakes.fixtures import run_cli

    opened = run_cli(["page", "trigger", "-s", "databricks 5xx 12%", "-o", "json"], config=pd_config_path, env=pd_env)
    assert opened.returncode == 0, opened.stderr
    [incident] = pd.incidents
    assert incident["id"] not in opened.stdout  # the Events API gives no id: the user reads it in PagerDuty
    acked = run_cli(["page", "ack", incident["id"], "-o", "json"], config=pd_config_path, env=pd_env)
    assert acked.returncode == 0, acked.stderr
    assert json.loads(acked.stdout)["dedup_key"] == json.loads(opened.stdout)["dedup_key"]
    assert pd.incidents[0]["status"] == "acknowledged"
