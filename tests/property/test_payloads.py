"""Any body sent to `opsctl serve`: the functions its endpoints call answer with a parsed payload,
or a 400-class refusal / PayloadError naming the bad fields; nothing else escapes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from opsctl.automation.payloads import AlertmanagerMessage, PagerDutyEvent, PayloadError
from opsctl.automation.request_body import Rejected, parse_json
from tests.property.helpers import mutate, values

ALERTMANAGER = {
    "version": "4", "groupKey": "{}:{alertname=\"SloBurnRatePage\"}", "truncatedAlerts": 0, "status": "firing",
    "receiver": "opsctl", "groupLabels": {"alertname": "SloBurnRatePage"},
    "commonLabels": {"alertname": "SloBurnRatePage", "severity": "page"}, "commonAnnotations": {},
    "externalURL": "http://alertmanager:9093",
    "alerts": [{"status": "firing", "labels": {"alertname": "SloBurnRatePage", "severity": "page",
                                               "slo": "llm-inference-databricks-availability", "backend": "databricks"},
                "annotations": {"summary": "burning"}, "startsAt": "2026-11-26T15:00:00.123Z",
                "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": "4f3c2b1a0d9e8f7a"}],
}
PAGERDUTY = {"event": {"id": "01DEN4HPBQAAAG05V5QQYBRZMF", "event_type": "incident.acknowledged",
                       "resource_type": "incident", "occurred_at": "2026-11-26T15:02:00.000Z",
                       "agent": {"id": "PUSER01", "summary": "Alice", "type": "user_reference"},
                       "data": {"id": "PT4KHLK", "type": "incident", "status": "acknowledged",
                                "incident_key": "opsctl-llm-inference-3f2a", "title": "databricks 5xx",
                                "html_url": "https://example.pagerduty.com/incidents/PT4KHLK"}}}


def one_line_problems(exc: PayloadError) -> None:
    assert exc.problems
    for problem in exc.problems:
        assert "\n" not in problem and "\r" not in problem, problem


def check(parse, body: bytes):
    try:
        data = parse_json(body)
    except Rejected as exc:
        assert exc.status == 400
        return None
    try:
        return parse(data)
    except PayloadError as exc:
        one_line_problems(exc)
        return None


def test_the_samples_are_valid():
    assert AlertmanagerMessage.parse(ALERTMANAGER).alerts[0].fingerprint == "4f3c2b1a0d9e8f7a"
    assert PagerDutyEvent.parse(PAGERDUTY).incident_key == "opsctl-llm-inference-3f2a"


@given(st.data())
def test_a_mutated_alertmanager_message_parses_or_names_the_field(data):
    doc = mutate(ALERTMANAGER, data.draw)
    message = check(AlertmanagerMessage.parse, json.dumps(doc).encode())
    if message is not None:  # what parses is what the policy may act on: well formed all the way down
        assert message.alerts and all(a.fingerprint and a.labels for a in message.alerts)
        assert message.status in ("firing", "resolved")


@given(st.data())
def test_a_mutated_pagerduty_event_parses_or_names_the_field(data):
    doc = mutate(PAGERDUTY, data.draw)
    event = check(PagerDutyEvent.parse, json.dumps(doc).encode())
    if event is not None:
        assert event.id and "." in event.event_type and event.resource_type


@given(st.one_of(st.binary(max_size=300), values.map(lambda v: json.dumps(v).encode())))
def test_any_body_is_refused_or_parsed_by_both_endpoints(body):
    check(AlertmanagerMessage.parse, body)
    check(PagerDutyEvent.parse, body)
