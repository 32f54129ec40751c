"""`FleetService.urgent()`: the server's urgent lane (issue 22) for a catalog behind one webhook. An
alert goes on the urgent lane when a policy *of the service its service label names* matches it;
another service's policy matching the same labels, or an alert routed to no service, does not count.

The catalog here: `search` fails over on page-level burn alerts of either backend; `chat` only
tickets on ticket-level alerts. Expected answers follow from those two policies alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.automation.helpers import alert, message

DEFAULTS = """\
backends:
  internal: {kind: internal, description: vLLM pods}
  databricks: {kind: vendor, vendor: databricks, description: Databricks}
state_dir: "{root}/state"
paging: {provider: local}
tickets: {provider: local}
freezes: []
"""
SEARCH = """\
service: search
automation:
  policies:
    - name: search-failover
      match: {alertname: SloBurnRatePage, severity: page}
      match_re: {backend: "internal|databricks"}
      actions: {page: {}, failover: {}}
"""
CHAT = """\
service: chat
automation:
  policies:
    - name: chat-ticket
      match: {alertname: SloBurnRateTicket, severity: ticket}
      actions: {ticket: {}}
"""


@pytest.fixture
def fleet(tmp_path: Path):
    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.fleet import FleetService
    from opsctl.config.catalog import find_catalog

    services = tmp_path / "services"
    services.mkdir()
    (services / "_defaults.yaml").write_text(DEFAULTS.replace("{root}", str(tmp_path)))
    (services / "search.yaml").write_text(textwrap.dedent(SEARCH))
    (services / "chat.yaml").write_text(textwrap.dedent(CHAT))
    catalog = find_catalog(None, str(services))
    assert catalog is not None
    fleet = FleetService(catalog.load_all(), lambda cfg: DryRunExecutor())
    yield fleet
    fleet.stop(timeout=2.0)


def parsed(*alerts: dict):
    from opsctl.automation.payloads import AlertmanagerMessage

    return AlertmanagerMessage.parse(message(*alerts))


PAGE = {"alertname": "SloBurnRatePage", "severity": "page"}
TICKET = {"alertname": "SloBurnRateTicket", "severity": "ticket"}


def test_an_alert_its_own_services_policy_matches_is_urgent(fleet):
    assert fleet.urgent(parsed(alert(service="search", **PAGE))) is True
    assert fleet.urgent(parsed(alert(service="chat", **TICKET))) is True


def test_another_services_policy_matching_the_same_labels_does_not_make_it_urgent(fleet):
    # search's failover policy matches these labels, but the alert names chat, whose policy does not.
    assert fleet.urgent(parsed(alert(service="chat", **PAGE))) is False
    # chat's ticket policy matches these labels, but the alert names search.
    assert fleet.urgent(parsed(alert(service="search", **TICKET))) is False


def test_an_alert_routed_to_no_service_is_never_urgent(fleet):
    # The labels match search's policy; the service label is unknown, or missing altogether.
    assert fleet.urgent(parsed(alert(service="billing", **PAGE))) is False
    unlabelled = alert(**PAGE)
    del unlabelled["labels"]["service"]
    assert fleet.urgent(parsed(unlabelled)) is False


def test_a_notification_is_urgent_when_any_of_its_alerts_is_for_its_own_service(fleet):
    quiet = [alert(fingerprint="00000000000000a1", service="search", **TICKET),
             alert(fingerprint="00000000000000a2", service="billing", **PAGE)]
    assert fleet.urgent(parsed(*quiet)) is False
    actionable = alert(fingerprint="00000000000000a3", service="chat", **TICKET)
    assert fleet.urgent(parsed(*quiet, actionable)) is True
