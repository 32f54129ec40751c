"""Jira Service Management channel against a loopback fake."""

from __future__ import annotations

import base64

import pytest

from opsctl.clock import parse_rfc3339
from opsctl.remote import RemoteAuthError
from opsctl.tickets.base import TicketRequest
from opsctl.tickets.registry import open_ticket_provider
from tests.fakes.fixtures import load, write_config
from tests.fakes.jira import FakeJira
from tests.tickets.conftest import JIRA_EMAIL, JIRA_TOKEN, jira_section, tickets_config


def request(**kw):
    base = dict(vendor="databricks", category="inference", severity="Sev1",
                subject="Serving endpoint llm-prod down", body="All requests fail with 503 since 14:52 UTC.")
    base.update(kw)
    return TicketRequest(**base)


def test_a_customer_request_uses_the_request_type_the_category_maps_to(jira, jira_cfg):
    req = request()
    filed = open_ticket_provider(jira_cfg, "databricks").file(req)

    [post] = jira.requests_to("POST", "/rest/servicedeskapi/request")
    assert post.headers["authorization"] == "Basic " + base64.b64encode(f"{JIRA_EMAIL}:{JIRA_TOKEN}".encode()).decode()
    body = post.json
    assert body["serviceDeskId"] == "10"
    assert body["requestTypeId"] == "25"  # inference -> the Model Serving request type
    fields = body["requestFieldValues"]
    assert fields["summary"] == req.subject
    assert fields["priority"] == {"name": "Highest"}
    assert f"opsctl-key-{req.key}" in fields["labels"]
    assert "opsctl_sev1" in fields["labels"]
    assert filed.id == "SUP-1"
    assert filed.status == "Waiting for support"
    assert filed.url.endswith("/servicedesk/customer/portal/1/SUP-1")


def test_status_reads_first_response_assignee_and_the_request_type_as_routed(jira, jira_cfg):
    desk = open_ticket_provider(jira_cfg, "databricks")
    filed = desk.file(request())
    t0 = parse_rfc3339("2026-11-26T15:00:00Z")
    jira.respond(filed.id, agent="Sam", at=t0 + 240, request_type="26")

    got = desk.status(filed.id)

    assert got.status == "In progress"
    assert got.first_response_at == t0 + 240
    assert got.assignee == "Sam"
    assert got.category_value == "26"
    assert got.category == "platform"


def test_a_request_type_the_account_may_not_use_is_a_403_naming_the_permission(jira, jira_cfg):
    with pytest.raises(RemoteAuthError) as err:
        open_ticket_provider(jira_cfg, "databricks").file(request(category="billing"))
    assert err.value.status == 403
    assert "raise requests of this request type in service desk 10" in str(err.value)
    assert jira.issues == {}


def test_a_502_after_the_request_was_created_finds_it_by_label_instead_of_filing_a_second(jira, jira_cfg):
    jira.fail_next("POST", "/rest/servicedeskapi/request", 502, after=True)
    filed = open_ticket_provider(jira_cfg, "databricks").file(request())
    assert list(jira.issues) == ["SUP-1"]
    assert filed.id == "SUP-1"
    assert filed.outcome == "recovered"
    assert len(jira.requests_to("POST", "/rest/servicedeskapi/request")) == 1


def test_data_center_uses_a_bearer_personal_access_token(ca, tmp_path, ca_file, secret_env):
    with FakeJira(ca, email=None, token=JIRA_TOKEN) as fake:
        section = jira_section(fake, ca_file).replace(f"    email: {JIRA_EMAIL}\n", "    deployment: datacenter\n")
        cfg = load(write_config(tmp_path, tickets_config("jira", section)))
        fake.fail_next("POST", "/rest/servicedeskapi/request", 500, after=True)
        filed = open_ticket_provider(cfg, "databricks").file(request())
        assert fake.requests_to("POST", "/rest/servicedeskapi/request")[0].headers["authorization"] == \
            f"Bearer {JIRA_TOKEN}"
        assert fake.requests_to("GET", "/rest/api/2/search")  # Data Center search endpoint
        assert filed.id == "SUP-1" and len(fake.issues) == 1


def test_a_category_mapped_to_a_non_numeric_request_type_is_a_config_error(tmp_path, jira, ca_file, secret_env):
    from opsctl.errors import ConfigError

    text = tickets_config("jira", jira_section(jira, ca_file)).replace('inference: "25"', "inference: Model Serving")
    with pytest.raises(ConfigError) as err:
        load(write_config(tmp_path, text))
    assert "numeric request type id (inference)" in err.value.problems[0]
