"""Alertmanager v4 and PagerDuty v3 payloads: what is accepted, and every way a payload is refused."""

from __future__ import annotations

import copy

import pytest

from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent, PayloadError, parse_timestamp
from tests.automation.helpers import alert, message, pd_event


def test_a_version_4_message_parses_with_each_alerts_own_status():
    msg = AlertmanagerMessage.parse(message(alert(status="firing", fingerprint="aa"),
                                            alert(status="resolved", fingerprint="bb"), status="firing"))
    assert msg.status == "firing"
    assert [a.status for a in msg.alerts] == ["firing", "resolved"]
    assert msg.alerts[0].labels["slo"] == "databricks-availability"
    assert msg.group_key == '{}:{alertname="SloBurnRatePage"}'


def test_timestamps_keep_nanoseconds_and_normalise_the_zone():
    a = parse_timestamp("2026-11-29T12:00:00.123456789Z")
    b = parse_timestamp("2026-11-29T13:00:00.123456789+01:00")
    assert a.canonical == b.canonical == "2026-11-29T12:00:00.123456789Z"
    assert parse_timestamp("2026-11-29T12:00:00Z").canonical == "2026-11-29T12:00:00.000000000Z"
    assert parse_timestamp("0001-01-01T00:00:00Z").is_zero


def test_unknown_extra_fields_are_tolerated_for_forward_compatibility():
    payload = message()
    payload["someFutureField"] = {"x": 1}
    payload["alerts"][0]["anotherOne"] = True
    assert AlertmanagerMessage.parse(payload).alerts[0].fingerprint == "1a2b3c4d5e6f7a8b"


def _broken(change):
    payload = message()
    change(payload)
    return payload


REFUSED = [
    ("a list instead of an object", [1, 2], "expected a JSON object"),
    ("version 3", _broken(lambda p: p.update(version="3")), 'version: expected "4"'),
    ("no groupKey", _broken(lambda p: p.pop("groupKey")), "groupKey: required field is missing"),
    ("empty groupKey", _broken(lambda p: p.update(groupKey="")), "groupKey: must not be empty"),
    ("group status unknown", _broken(lambda p: p.update(status="pending")), "status: must be one of firing, resolved"),
    ("no alerts", _broken(lambda p: p.update(alerts=[])), "alerts: must hold at least one alert"),
    ("alerts not an array", _broken(lambda p: p.update(alerts={})), "alerts: expected an array"),
    ("alert status missing", _broken(lambda p: p["alerts"][0].pop("status")), "alerts[0].status: required"),
    ("labels with a number", _broken(lambda p: p["alerts"][0]["labels"].update(x=1)), "alerts[0].labels: values must be strings"),
    ("empty labels", _broken(lambda p: p["alerts"][0].update(labels={})), "alerts[0].labels: must not be empty"),
    ("bad startsAt", _broken(lambda p: p["alerts"][0].update(startsAt="yesterday")), "alerts[0].startsAt: not an RFC 3339"),
    ("zero startsAt", _broken(lambda p: p["alerts"][0].update(startsAt="0001-01-01T00:00:00Z")), "not the zero time"),
    ("fingerprint not hex", _broken(lambda p: p["alerts"][0].update(fingerprint="ZZ")), "fingerprint: expected lower-case hex"),
    ("truncatedAlerts negative", _broken(lambda p: p.update(truncatedAlerts=-1)), "truncatedAlerts"),
    ("a Slack-style payload", {"text": "hello", "channel": "#ops"}, "required field is missing"),
]


@pytest.mark.parametrize("case, payload, expected", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_payload_that_is_not_alertmanager_v4_is_refused_naming_the_field(case, payload, expected):
    with pytest.raises(PayloadError) as err:
        AlertmanagerMessage.parse(payload)
    assert expected in str(err.value)


def test_every_problem_is_listed_at_once():
    payload = message()
    payload.pop("receiver")
    payload["alerts"][0]["fingerprint"] = 7
    with pytest.raises(PayloadError) as err:
        AlertmanagerMessage.parse(payload)
    assert "receiver: required field is missing" in err.value.problems
    assert "alerts[0].fingerprint: expected a string, got a number" in err.value.problems


def test_a_pagerduty_v3_event_parses():
    event = PagerDutyEvent.parse(pd_event(incident_key="opsctl-automation-x"))
    assert event.event_type == "incident.acknowledged"
    assert event.incident_key == "opsctl-automation-x"
    assert event.agent == "Alice On-call"
    assert event.data_id == "PINC123"


@pytest.mark.parametrize("change, expected", [
    (lambda p: p.pop("event"), "event: required field is missing"),
    (lambda p: p["event"].update(event_type="triggered"), "expected RESOURCE.ACTION"),
    (lambda p: p["event"].update(occurred_at="now"), "event.occurred_at: not an RFC 3339"),
    (lambda p: p["event"].update(data=[]), "event.data: expected a JSON object"),
    (lambda p: p["event"].update(agent="alice"), "event.agent: expected an object or null"),
], ids=["no event", "event type without resource", "bad occurred_at", "data not an object", "agent a string"])
def test_a_payload_that_is_not_pagerduty_v3_is_refused(change, expected):
    payload = copy.deepcopy(pd_event())
    change(payload)
    with pytest.raises(PayloadError) as err:
        PagerDutyEvent.parse(payload)
    assert expected in str(err.value)
