"""The real `pagerduty` client, driven by opsctl, against a loopback HTTPS fake of PagerDuty."""

from __future__ import annotations

import time

import pytest

from opsctl.clock import parse_rfc3339
from opsctl.errors import NoDataError, OpsctlError, UsageError
from opsctl.paging.base import ChangeEvent, Link, PageEvent
from opsctl.paging.registry import open_pager
from opsctl.remote import RemoteAuthError, RemoteUnavailable
from tests.fakes.fixtures import load, write_config
from tests.fakes.pagerduty import iso
from tests.paging.conftest import API_TOKEN, READ_ONLY_TOKEN, ROUTING_KEY, pd_config_text


def event(summary="vendor error ratio 12% over 5m", **kw):
    return PageEvent(summary=summary, source="opsctl", **kw)


# -- Events API v2 ------------------------------------------------------------------------------


def test_trigger_sends_the_event_with_the_routing_key_in_the_body_through_the_real_client(pd, pd_cfg):
    result = open_pager(pd_cfg).trigger(event(component="databricks", links=(Link("https://grafana/x", "dash"),)))

    [req] = pd.requests_to("POST", "/v2/enqueue")
    body = req.json
    assert req.headers["user-agent"].startswith("python-pagerduty/7.")
    assert req.headers["content-type"] == "application/json"
    assert body["routing_key"] == ROUTING_KEY
    assert body["event_action"] == "trigger"
    assert body["dedup_key"] == result.dedup_key
    assert body["payload"]["summary"] == "vendor error ratio 12% over 5m"
    assert body["payload"]["severity"] == "critical"
    assert body["payload"]["component"] == "databricks"
    assert body["payload"]["custom_details"]["sent_by"] == "opsctl"
    assert body["links"] == [{"href": "https://grafana/x", "text": "dash"}]
    assert len(pd.incidents) == 1


def test_the_same_page_sent_twice_opens_one_incident(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    first = pager.trigger(event())
    second = pager.trigger(event())

    assert first.dedup_key == second.dedup_key
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 2
    assert len(pd.incidents) == 1
    assert len(pd.incidents[0]["alerts"]) == 2


def test_a_drill_page_is_marked_in_title_and_details_and_never_shares_a_key_with_a_real_page(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    real = pager.trigger(event())
    drill = pager.trigger(event(drill=True))

    assert real.dedup_key != drill.dedup_key
    assert drill.dedup_key.startswith("opsctl-drill-")
    payload = pd.requests_to("POST", "/v2/enqueue")[1].json["payload"]
    assert payload["summary"].startswith("[DRILL] ")
    assert payload["custom_details"]["drill"] is True
    assert payload["custom_details"]["tags"] == ["drill"]
    assert len(pd.incidents) == 2


def test_acknowledge_and_resolve_act_on_the_incident_with_the_same_dedup_key(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    key = pager.trigger(event()).dedup_key
    pager.acknowledge(key)
    assert pd.incidents[0]["status"] == "acknowledged"
    pager.resolve(key)
    assert pd.incidents[0]["status"] == "resolved"
    actions = [(r.json["event_action"], r.json["dedup_key"]) for r in pd.requests_to("POST", "/v2/enqueue")]
    assert actions == [("trigger", key), ("acknowledge", key), ("resolve", key)]
    # After resolve the same key opens a new incident, as PagerDuty does.
    pager.trigger(event())
    assert len(pd.incidents) == 2


def test_a_change_event_always_carries_a_timestamp(pd, pd_cfg):
    at = parse_rfc3339("2026-11-26T15:00:00Z")
    open_pager(pd_cfg).change_event(ChangeEvent(summary="traffic databricks 80% -> 0%", source="opsctl", timestamp=at,
                                                custom_details={"from": 80, "to": 0}))
    [change] = pd.change_events
    assert change["routing_key"] == ROUTING_KEY
    assert change["payload"]["timestamp"] == "2026-11-26T15:00:00Z"
    assert change["payload"]["custom_details"] == {"from": 80, "to": 0, "sent_by": "opsctl"}


# -- retries, bounded -------------------------------------------------------------------------------


def test_a_429_then_success_sends_exactly_two_requests_and_opens_one_incident(pd, pd_cfg):
    pd.fail_next("POST", "/v2/enqueue", 429, retry_after="0", body={"status": "throttle event", "message": "slow down"})
    result = open_pager(pd_cfg).trigger(event())
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 2
    assert len(pd.incidents_with_key(result.dedup_key)) == 1


def test_a_503_after_the_event_was_processed_is_retried_without_a_second_incident(pd, pd_cfg):
    pd.fail_next("POST", "/v2/enqueue", 503, after=True)
    result = open_pager(pd_cfg).trigger(event())
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 2
    assert len(pd.incidents_with_key(result.dedup_key)) == 1


def test_a_429_that_never_ends_stops_at_the_attempt_limit(pd, pd_cfg):
    # FAST_RETRY allows 4 attempts; the client alone would retry a 429 forever.
    pd.fail_next("POST", "/v2/enqueue", 429, times=100, retry_after="0")
    start = time.monotonic()
    with pytest.raises(RemoteUnavailable) as err:
        open_pager(pd_cfg).trigger(event())
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 4
    assert time.monotonic() - start < 5
    assert "gave up after 4 attempt(s)" in err.value.message
    assert err.value.exit_code == 1
    assert pd.incidents == []


def test_5xx_retries_stop_at_the_deadline(pd, tmp_path, ca_file, pd_env):
    cfg = load(write_config(tmp_path, pd_config_text(
        pd, ca_file, retry="{max_attempts: 20, base_delay: 0.2, max_delay: 0.2, deadline: 1, timeout: 1}")))
    pd.fail_next("POST", "/v2/enqueue", 502, times=100)
    start = time.monotonic()
    with pytest.raises(RemoteUnavailable) as err:
        open_pager(cfg).trigger(event())
    elapsed = time.monotonic() - start
    assert elapsed < 1.5
    assert "deadline of 1s reached" in err.value.message
    assert 2 <= len(pd.requests_to("POST", "/v2/enqueue")) < 20


def test_a_retry_after_reaching_past_the_deadline_ends_at_once_saying_when_to_come_back(pd, pd_cfg):
    pd.fail_next("POST", "/v2/enqueue", 429, retry_after="3600")
    start = time.monotonic()
    with pytest.raises(RemoteUnavailable) as err:
        open_pager(pd_cfg).trigger(event())
    assert time.monotonic() - start < 1
    assert "asks to wait 3600s" in err.value.message
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 1


def test_a_short_retry_after_is_waited_for(pd, pd_cfg):
    pd.fail_next("POST", "/v2/enqueue", 429, retry_after="1")
    start = time.monotonic()
    open_pager(pd_cfg).trigger(event())
    assert time.monotonic() - start >= 1
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 2


# -- errors name what is missing ---------------------------------------------------------------------


def test_an_invalid_routing_key_is_an_auth_error_naming_where_the_key_lives(pd, pd_cfg, monkeypatch):
    monkeypatch.setenv("PD_ROUTING_KEY", "not-the-right-key-123456")
    with pytest.raises(RemoteAuthError) as err:
        open_pager(pd_cfg).trigger(event())
    text = str(err.value)
    assert err.value.exit_code == 2
    assert "paging.pagerduty.routing_key (env:PD_ROUTING_KEY)" in text
    assert "Events API v2 integration" in text
    assert "not-the-right-key-123456" not in text
    assert len(pd.requests_to("POST", "/v2/enqueue")) == 1  # not retried


def test_a_rejected_rest_token_names_the_api_token_setting(pd, pd_cfg, monkeypatch):
    monkeypatch.setenv("PD_API_TOKEN", "wrong-token-abcdef")
    with pytest.raises(RemoteAuthError) as err:
        open_pager(pd_cfg).get_incident("opsctl-x")
    assert err.value.status == 401
    assert "paging.pagerduty.api_token (env:PD_API_TOKEN)" in str(err.value)
    assert "wrong-token-abcdef" not in str(err.value)


def test_a_read_only_token_is_refused_maintenance_windows_with_the_missing_permission_named(pd, pd_cfg, monkeypatch):
    monkeypatch.setenv("PD_API_TOKEN", READ_ONLY_TOKEN)
    with pytest.raises(RemoteAuthError) as err:
        open_pager(pd_cfg).create_maintenance_window(time.time(), time.time() + 3600, "drill")
    assert err.value.status == 403
    assert "create and delete maintenance windows" in str(err.value)
    assert "read-only" in str(err.value)
    assert pd.maintenance_windows == {}


def test_a_missing_secret_names_the_environment_variable(pd, pd_cfg, monkeypatch):
    monkeypatch.delenv("PD_ROUTING_KEY")
    with pytest.raises(UsageError, match="PD_ROUTING_KEY is not set"):
        open_pager(pd_cfg).trigger(event())


def test_a_certificate_from_an_untrusted_ca_is_a_config_error_pointing_at_ca_file(pd, tmp_path, pd_env):
    # No ca_file: the loopback CA is not trusted.
    text = pd_config_text(pd, "x").replace("    ca_file: x\n", "")
    cfg = load(write_config(tmp_path, text))
    with pytest.raises(UsageError) as err:
        open_pager(cfg).trigger(event())
    assert "not trusted" in str(err.value) and "ca_file" in str(err.value)
    assert err.value.exit_code == 2


def test_plain_http_urls_are_refused_by_the_config(tmp_path, pd, ca_file, pd_env):
    from opsctl.errors import ConfigError

    text = pd_config_text(pd, ca_file).replace(f"events_url: {pd.url}", "events_url: http://127.0.0.1:1")
    with pytest.raises(ConfigError) as err:
        load(write_config(tmp_path, text))
    assert err.value.problems == [
        f"{tmp_path / 'opsctl.yaml'}: paging.pagerduty: events_url must be an https:// URL (got 'http://127.0.0.1:1')"
    ]


# -- REST API v2: incident timeline, on-call, maintenance ----------------------------------------------


def test_the_incident_timeline_gives_acknowledgement_escalation_and_responder_times(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    key = pager.trigger(event()).dedup_key
    t0 = parse_rfc3339("2026-11-26T15:00:00Z")
    incident = pd.incidents[0]
    incident["created_at"] = iso(t0)
    incident["log_entries"] = []
    user = lambda name: {"type": "user_reference", "summary": name}  # noqa: E731
    pd.add_log_entry(incident["id"], "trigger_log_entry", t0)
    pd.add_log_entry(incident["id"], "assign_log_entry", t0, assignees=[user("Alice")])
    pd.add_log_entry(incident["id"], "notify_log_entry", t0 + 5, user=user("Alice"))
    pd.add_log_entry(incident["id"], "escalate_log_entry", t0 + 300, assignees=[user("Bob")])
    pd.add_log_entry(incident["id"], "assign_log_entry", t0 + 300, assignees=[user("Bob")])
    pd.add_log_entry(incident["id"], "notify_log_entry", t0 + 302, user=user("Bob"))
    pd.add_log_entry(incident["id"], "acknowledge_log_entry", t0 + 420, agent=user("Bob"))
    pd.add_log_entry(incident["id"], "resolve_log_entry", t0 + 1800, agent=user("Bob"))

    got = pager.get_incident(key).to_dict()

    assert got["id"] == incident["id"]
    assert got["seconds_to_acknowledge"] == 420
    assert got["seconds_to_resolve"] == 1800
    assert got["escalations"] == 1
    assert got["seconds_to_first_escalation"] == 300
    responders = {r["name"]: r for r in got["responders"]}
    assert responders["Alice"]["seconds_to_notify"] == 0  # assigned at t0, notified at t0+5
    assert responders["Alice"]["acknowledged_at"] is None
    assert responders["Bob"]["seconds_to_notify"] == 300
    assert responders["Bob"]["seconds_to_acknowledge"] == 420
    rest = pd.requests_to("GET", "/incidents")[0]
    assert rest.headers["authorization"] == f"Token token={API_TOKEN}"
    assert rest.headers["accept"] == "application/vnd.pagerduty+json;version=2"
    assert rest.q("incident_key") == key


def test_log_entries_are_read_across_pages(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    key = pager.trigger(event()).dedup_key
    incident = pd.incidents[0]
    t0 = parse_rfc3339(incident["created_at"])
    for n in range(1, 150):
        pd.add_log_entry(incident["id"], "annotate_log_entry", t0 + n)
    got = pager.get_incident(key)
    assert len(got.log) == 150
    assert len(pd.requests_to("GET", f"/incidents/{incident['id']}/log_entries")) == 2


def test_an_unknown_dedup_key_is_no_data(pd, pd_cfg):
    with pytest.raises(NoDataError) as err:
        open_pager(pd_cfg).get_incident("opsctl-llm-inference-nothing")
    assert err.value.exit_code == 3


def test_oncall_lists_who_is_on_call_by_escalation_level(pd, pd_cfg):
    pd.oncalls = [
        {"user": {"summary": "Bob", "id": "PU2"}, "escalation_level": 2, "schedule": {"summary": "Secondary"},
         "escalation_policy": {"id": "PEP0001"}, "start": "2026-11-26T00:00:00Z", "end": "2026-11-27T00:00:00Z"},
        {"user": {"summary": "Alice", "id": "PU1"}, "escalation_level": 1, "schedule": {"summary": "Primary"},
         "escalation_policy": {"id": "PEP0001"}, "start": "2026-11-26T00:00:00Z", "end": "2026-11-27T00:00:00Z"},
        {"user": {"summary": "Mallory", "id": "PU3"}, "escalation_level": 1, "schedule": None,
         "escalation_policy": {"id": "POTHER"}, "start": None, "end": None},
    ]
    got = [(o.user, o.escalation_level, o.schedule) for o in open_pager(pd_cfg).oncall()]
    assert got == [("Alice", 1, "Primary"), ("Bob", 2, "Secondary")]
    assert pd.requests_to("GET", "/oncalls")[0].query["escalation_policy_ids[]"] == ["PEP0001"]


def test_a_maintenance_window_is_opened_for_the_service_and_closed_again(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    start = parse_rfc3339("2026-11-26T15:00:00Z")
    window = pager.create_maintenance_window(start, start + 3600, "[DRILL] vendor outage game day")
    [req] = pd.requests_to("POST", "/maintenance_windows")
    assert req.headers["from"] == "oncall-bot@example.com"
    assert req.json["maintenance_window"]["services"] == [{"id": "PSVC001", "type": "service_reference"}]
    assert req.json["maintenance_window"]["start_time"] == "2026-11-26T15:00:00Z"
    assert req.json["maintenance_window"]["end_time"] == "2026-11-26T16:00:00Z"
    assert window.id in pd.maintenance_windows
    pager.delete_maintenance_window(window.id)
    assert pd.maintenance_windows == {}


def test_a_maintenance_window_create_is_not_retried_after_an_ambiguous_failure(pd, pd_cfg):
    pd.fail_next("POST", "/maintenance_windows", 502, after=True)
    with pytest.raises(OpsctlError) as err:
        open_pager(pd_cfg).create_maintenance_window(time.time(), time.time() + 60, "drill")
    assert len(pd.requests_to("POST", "/maintenance_windows")) == 1
    assert "may have reached PagerDuty" in str(err.value)


# -- dry run ------------------------------------------------------------------------------------------


def test_a_dry_run_sends_nothing_and_shows_the_exact_request_with_the_key_redacted(pd, pd_cfg):
    result = open_pager(pd_cfg, dry_run=True).trigger(event(drill=True))
    assert pd.requests == []
    [req] = result.requests
    assert req["method"] == "POST"
    assert req["url"] == f"{pd.url}/v2/enqueue"
    assert req["json"]["routing_key"] == "<redacted:env:PD_ROUTING_KEY>"
    assert req["json"]["payload"]["summary"].startswith("[DRILL] ")
    assert req["json"]["dedup_key"] == result.dedup_key
    assert req["headers"]["user-agent"].startswith("python-pagerduty/")
    assert ROUTING_KEY not in repr(result.to_dict())


def test_a_dry_run_maintenance_window_shows_the_rest_request_with_the_token_redacted(pd, pd_cfg):
    window = open_pager(pd_cfg, dry_run=True).create_maintenance_window(time.time(), time.time() + 60, "drill")
    assert pd.requests == []
    [req] = window.requests
    assert req["headers"]["authorization"] == "Token token=<redacted:env:PD_API_TOKEN>"
    assert req["headers"]["from"] == "oncall-bot@example.com"
    assert API_TOKEN not in repr(window.to_dict())
