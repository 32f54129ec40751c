"""`opsctl incident list|show|takeover` on the incidents the real engine wrote (file store): on-call
lists them, reads one whole, and takes it over; the engine then only notes (issue 36 item 3's
documented marker). A dry run writes nothing; an unknown id is exit 3; JSON for scripts."""

from __future__ import annotations

import json

from tests.automation.test_incident_response import build, event
from tests.conftest import run_opsctl


def _outage(tmp_path, healthy_store):
    engine, incidents, clock = build(tmp_path, healthy_store)
    engine.handle_alert(event("a1", category="availability", cause="server_error", alertname="SloBurnRatePage"))
    (incident,) = incidents.incidents()
    return engine, incidents, incident


def test_list_and_show_say_what_the_incident_holds(tmp_path, healthy_store):
    _, _, incident = _outage(tmp_path, healthy_store)
    config = str(tmp_path / "opsctl.yaml")
    listed = run_opsctl("--config", config, "incident", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert row["id"] == incident.id and row["state"] == incident.state
    assert row["backends"] == ["databricks"] and row["causes"] == ["server_error"]
    assert row["moves"] == 1 and row["taken_over_by"] is None
    table = run_opsctl("--config", config, "incident", "list")
    assert incident.id in table.stdout and "databricks" in table.stdout
    shown = run_opsctl("--config", config, "incident", "show", incident.id)
    assert shown.exit_code == 0, shown.output
    assert "SloBurnRatePage" in shown.stdout and "failover" in shown.stdout and incident.page.dedup_key in shown.stdout
    data = json.loads(run_opsctl("--config", config, "incident", "show", incident.id, "-o", "json").stdout)
    assert data["moves"][0]["kind"] == "failover" and data["page"]["dedup_key"] == incident.page.dedup_key


def test_an_unknown_incident_is_exit_3_with_the_next_step(tmp_path, healthy_store):
    _outage(tmp_path, healthy_store)
    result = run_opsctl("--config", str(tmp_path / "opsctl.yaml"), "incident", "show", "19990101T000000Z-0000")
    assert result.exit_code == 3
    assert "not in" in result.stderr and "opsctl incident list" in result.stderr


def test_takeover_stops_the_automation_and_a_dry_run_writes_nothing(tmp_path, healthy_store):
    engine, incidents, incident = _outage(tmp_path, healthy_store)
    config = str(tmp_path / "opsctl.yaml")
    dry = run_opsctl("--config", config, "incident", "takeover", incident.id, "--by", "alice", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert incidents.get(incident.id).takeover is None
    done = run_opsctl("--config", config, "incident", "takeover", incident.id, "--by", "alice",
                      "--reason", "degrading by hand", "-o", "json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["changed"] is True
    stored = incidents.get(incident.id).takeover
    assert (stored.by, stored.reason) == ("alice", "degrading by hand")
    again = run_opsctl("--config", config, "incident", "takeover", incident.id, "--by", "bob", "-o", "json")
    assert again.exit_code == 0 and json.loads(again.stdout) == {
        "id": incident.id, "changed": False, "taken_over_by": "alice", "at": json.loads(done.stdout)["at"],
        "reason": "degrading by hand"}
    # the next alert of the outage: the engine acts on nothing, it notes
    taken = engine.handle_alert(event("i1", category="availability", cause="server_error",
                                      alertname="SloBurnRatePage", starts="2026-11-29T12:05:00.500000000Z"))
    assert [t.action for t in taken] == ["takeover", "note"]


def test_incident_ids_complete_from_the_file_store(tmp_path, healthy_store):
    from opsctl.cli.complete import _automation_incidents
    from opsctl.config.loading import load_config_file

    _, _, incident = _outage(tmp_path, healthy_store)
    assert _automation_incidents(load_config_file(tmp_path / "opsctl.yaml")) == [incident.id]
