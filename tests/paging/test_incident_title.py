"""The incident's one page says what the incident is now (issue 36 item 4): its title follows a second
backend or cause, and its severity rises, on the same PagerDuty incident, never a second one. PagerDuty:
the real `pagerduty` client against the loopback fake (Events API v2 trigger, then REST API v2
`GET /incidents?incident_key=` and `PUT /incidents/{id}`); the local ledger with the same semantics."""

from __future__ import annotations

import pytest

from opsctl.clock import SimClock, parse_rfc3339
from opsctl.paging.base import PageEvent
from opsctl.paging.registry import open_pager
from opsctl.paging.title import incident_title, names_all, widened
from tests.fakes.fixtures import load, write_config
from tests.paging.conftest import pd_config_text

T0 = parse_rfc3339("2026-11-18T14:02:00Z")
FIRST = "internal: timeouts at 679x over 5m (llm-inference-internal-availability fast page above 300x)"
LATER = "databricks: slow answers (latency) at 31.9x over 5m (llm-inference-databricks-latency-1s fast page)"
KEY = "opsctl-llm-inference-0123456789abcdef01234567"


def test_one_backend_and_one_cause_keep_the_pages_own_summary():
    assert incident_title(FIRST, ("internal",), ("timeout",)) == FIRST
    assert incident_title(FIRST, ("internal", "all"), ("timeout",)) == FIRST  # the service-wide SLOs' "all"
    assert not widened(("internal", "all"), ("timeout",))


def test_a_second_backend_or_cause_leads_the_title_with_all_of_them_first_seen_first():
    both = incident_title(LATER, ("internal", "databricks"), ("timeout", "latency"))
    assert both == f"internal and databricks degraded (timeouts, slow answers (latency)): {LATER}"
    assert names_all(both, ("internal", "databricks"), ("timeout", "latency"))
    assert not names_all(FIRST, ("internal", "databricks"), ("timeout",))
    cause = incident_title(FIRST, ("databricks",), ("auth", "latency"))
    assert cause.startswith("databricks degraded (auth failures (401/403), slow answers (latency)): ")
    assert len(incident_title("x" * 2000, ("a", "b"), ())) == 1024


# -- the local ledger (embedded drills) ---------------------------------------------------------


@pytest.fixture
def local(tmp_path):
    return open_pager(load(write_config(tmp_path, "paging: {provider: local}\n")), clock=SimClock(T0))


def test_the_local_incident_takes_the_new_title_and_the_higher_severity_and_stays_one(local):
    first = local.trigger(PageEvent(summary=FIRST, source="opsctl", severity="error", dedup_key=KEY))
    title = incident_title(LATER, ("internal", "databricks"), ("timeout", "latency"))
    later = local.trigger(PageEvent(summary=LATER, source="opsctl", severity="critical", dedup_key=KEY, title=title))
    assert later.incident_id == first.incident_id
    assert later.detail == "deduplicated into the open incident; severity raised to critical; title updated"
    [incident] = local.incidents()
    assert incident.title == title
    assert [e.type for e in incident.log if e.type in ("severity", "title")] == ["severity", "title"]
    # The same title again changes nothing more.
    again = local.trigger(PageEvent(summary=LATER, source="opsctl", severity="critical", dedup_key=KEY, title=title))
    assert again.detail == "deduplicated into the open incident"


def test_a_drill_title_is_marked_as_a_drill(local):
    local.trigger(PageEvent(summary=FIRST, source="opsctl", dedup_key=KEY, drill=True))
    local.trigger(PageEvent(summary=LATER, source="opsctl", dedup_key=KEY, drill=True, title="internal and databricks"))
    assert local.incidents()[0].title == "[DRILL] internal and databricks"


# -- PagerDuty ------------------------------------------------------------------------------------


def test_pagerduty_retitles_the_open_incident_and_raises_its_urgency_without_opening_another(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    pager.trigger(PageEvent(summary=FIRST, source="opsctl", severity="warning", dedup_key=KEY))
    assert [i["urgency"] for i in pd.incidents] == ["low"]
    title = incident_title(LATER, ("internal", "databricks"), ("timeout", "latency"))
    result = pager.trigger(PageEvent(summary=LATER, source="opsctl", severity="critical", dedup_key=KEY, title=title))

    assert len(pd.incidents) == 1 and len(pd.incidents[0]["alerts"]) == 2  # one incident, two alerts' events
    [incident] = pd.incidents
    assert incident["title"] == title and incident["urgency"] == "high"
    [lookup] = pd.requests_to("GET", "/incidents")
    assert lookup.query["incident_key"] == [KEY]
    assert lookup.query["statuses[]"] == ["triggered", "acknowledged"]
    [put] = pd.requests_to("PUT", f"/incidents/{incident['id']}")
    assert put.headers["from"] == "oncall-bot@example.com"
    assert put.json == {"incident": {"type": "incident_reference", "title": title, "urgency": "high"}}
    assert result.detail == f"incident {incident['id']}: title set to {title!r}; urgency raised to high"
    assert [e["type"] for e in incident["log_entries"]] == ["trigger_log_entry", "urgency_change_log_entry"]
    # Nothing was resolved or re-triggered to get there.
    assert [r.json["event_action"] for r in pd.requests_to("POST", "/v2/enqueue")] == ["trigger", "trigger"]


def test_pagerduty_sends_no_update_when_the_title_and_urgency_already_are_so(pd, pd_cfg):
    pager = open_pager(pd_cfg)
    title = incident_title(LATER, ("internal", "databricks"), ("timeout", "latency"))
    pager.trigger(PageEvent(summary=FIRST, source="opsctl", dedup_key=KEY))
    pager.trigger(PageEvent(summary=LATER, source="opsctl", dedup_key=KEY, title=title))
    pager.trigger(PageEvent(summary=LATER, source="opsctl", dedup_key=KEY, title=title))
    assert len(pd.requests_to("PUT", f"/incidents/{pd.incidents[0]['id']}")) == 1
    assert len(pd.updates) == 1 and len(pd.incidents) == 1


def test_without_a_rest_token_the_page_goes_out_and_says_the_title_was_not_updated(pd, tmp_path, ca_file, pd_env):
    text = pd_config_text(pd, ca_file).replace("    api_token: {env: PD_API_TOKEN}\n", "")
    pager = open_pager(load(write_config(tmp_path, text)))
    pager.trigger(PageEvent(summary=FIRST, source="opsctl", dedup_key=KEY))
    result = pager.trigger(PageEvent(summary=LATER, source="opsctl", dedup_key=KEY, title="internal and databricks"))
    assert result.detail is not None and result.detail.startswith("title not updated: ")
    assert "paging.pagerduty.api_token" in result.detail
    assert len(pd.incidents) == 1 and pd.incidents[0]["title"] == FIRST and pd.updates == []


def test_a_read_only_token_cannot_retitle_and_the_page_still_went_out(pd, pd_cfg, monkeypatch):
    from tests.paging.conftest import READ_ONLY_TOKEN

    monkeypatch.setenv("PD_API_TOKEN", READ_ONLY_TOKEN)
    pager = open_pager(pd_cfg)
    pager.trigger(PageEvent(summary=FIRST, source="opsctl", dedup_key=KEY))
    result = pager.trigger(PageEvent(summary=LATER, source="opsctl", dedup_key=KEY, title="internal and databricks"))
    assert result.detail is not None and result.detail.startswith("title not updated: ")
    assert len(pd.incidents) == 1 and len(pd.incidents[0]["alerts"]) == 2 and pd.updates == []
