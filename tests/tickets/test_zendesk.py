"""Zendesk channel against a loopback fake of the tickets API."""

from __future__ import annotations

import base64

import pytest

from opsctl.clock import parse_rfc3339
from opsctl.remote import RemoteAuthError, RemoteRejected
from opsctl.tickets.base import Link, TicketRequest
from opsctl.tickets.registry import open_ticket_provider, ticket_records
from tests.fakes.fixtures import load, write_config
from tests.tickets.conftest import CATEGORY_FIELD, ZD_EMAIL, ZD_TOKEN, tickets_config, zendesk_section


def request(**kw):
    base = dict(vendor="databricks", category="inference", severity="Sev2",
                subject="Model Serving endpoint llm-prod returns 503 for 12% of requests",
                body="Started 14:52 UTC. Internal pods unaffected.", links=(Link("https://grafana.example/d/llm"),))
    base.update(kw)
    return TicketRequest(**base)


def test_a_ticket_carries_the_category_field_priority_tags_group_and_the_idempotency_key(zendesk, zd_cfg):
    req = request()
    filed = open_ticket_provider(zd_cfg, "databricks").file(req)

    [post] = zendesk.requests_to("POST", "/api/v2/tickets.json")
    expected_auth = "Basic " + base64.b64encode(f"{ZD_EMAIL}/token:{ZD_TOKEN}".encode()).decode()
    assert post.headers["authorization"] == expected_auth
    assert post.headers["idempotency-key"] == req.key
    t = post.json["ticket"]
    assert t["subject"] == req.subject
    assert t["custom_fields"] == [{"id": CATEGORY_FIELD, "value": "model_serving"}]
    assert t["priority"] == "high"
    assert t["group_id"] == 77
    assert t["external_id"] == req.key
    assert t["tags"] == ["opsctl", "vendor_databricks", "opsctl_inference", "opsctl_sev2"]
    assert "Started 14:52 UTC." in t["comment"]["body"]
    assert "- https://grafana.example/d/llm" in t["comment"]["body"]
    assert "Category: model_serving (opsctl: inference)" in t["comment"]["body"]
    assert filed.id == str(next(iter(zendesk.tickets)))
    assert filed.outcome == "filed"
    assert filed.url == f"{zendesk.url}/agent/tickets/{filed.id}"


def test_a_drill_ticket_is_marked_in_subject_tags_and_body(zendesk, zd_cfg):
    open_ticket_provider(zd_cfg, "databricks").file(request(drill=True))
    t = zendesk.requests_to("POST", "/api/v2/tickets.json")[0].json["ticket"]
    assert t["subject"].startswith("[DRILL] ")
    assert "drill" in t["tags"]
    assert t["comment"]["body"].startswith("*** DRILL:")


def test_status_reads_first_response_assignee_group_and_the_category_as_the_vendor_routed_it(zendesk, zd_cfg):
    desk = open_ticket_provider(zd_cfg, "databricks")
    filed = desk.file(request())
    t0 = parse_rfc3339("2026-11-26T15:00:00Z")
    zendesk.respond(int(filed.id), agent_id=2002, agent="Dana (Model Serving)", at=t0 + 600, group_id=77,
                    group="Model Serving L2", category="workspace_platform")

    got = desk.status(filed.id)

    assert got.readable
    assert got.status == "open"
    assert got.first_response_at == t0 + 600
    assert got.assignee == "Dana (Model Serving)"
    assert got.group == "Model Serving L2"
    assert got.category_value == "workspace_platform"
    assert got.category == "platform"  # the vendor re-routed it; opsctl names it back
    assert ticket_records(zd_cfg).get(filed.id)["last_status"] == "open"


def test_running_the_same_command_twice_files_one_ticket(zendesk, zd_cfg):
    first = open_ticket_provider(zd_cfg, "databricks").file(request())
    again = open_ticket_provider(zd_cfg, "databricks").file(request())
    assert again.id == first.id
    assert again.outcome == "existing"
    assert len(zendesk.tickets) == 1
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 1


def test_an_explicit_idempotency_key_finds_the_first_ticket_even_with_other_content(zendesk, zd_cfg):
    first = open_ticket_provider(zd_cfg, "databricks").file(request(idempotency_key="inc-2026-11-26-1"))
    again = open_ticket_provider(zd_cfg, "databricks").file(request(idempotency_key="inc-2026-11-26-1",
                                                                     subject="updated wording"))
    assert again.id == first.id
    assert len(zendesk.tickets) == 1


def test_a_429_then_success_files_exactly_one_ticket(zendesk, zd_cfg):
    zendesk.fail_next("POST", "/api/v2/tickets.json", 429, retry_after="0",
                      body={"error": "APIRateLimitExceeded", "description": "Rate limit exceeded"})
    filed = open_ticket_provider(zd_cfg, "databricks").file(request())
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 2
    assert list(zendesk.tickets) == [int(filed.id)]


def test_a_503_after_the_ticket_was_created_finds_it_instead_of_filing_a_second(zendesk, zd_cfg):
    zendesk.fail_next("POST", "/api/v2/tickets.json", 503, after=True)
    filed = open_ticket_provider(zd_cfg, "databricks").file(request())
    assert len(zendesk.tickets) == 1
    assert filed.outcome == "recovered"
    assert filed.id == str(next(iter(zendesk.tickets)))
    # The retry looked the ticket up by external_id instead of posting again.
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 1
    assert zendesk.requests_to("GET", "/api/v2/tickets.json")[0].q("external_id") == request().key


def test_a_rejected_token_names_the_setting_not_the_value(zendesk, zd_cfg, monkeypatch):
    monkeypatch.setenv("ZD_TOKEN", "wrong-token-zzzzzz")
    with pytest.raises(RemoteAuthError) as err:
        open_ticket_provider(zd_cfg, "databricks").file(request())
    assert err.value.exit_code == 2
    assert "tickets.zendesk.api_token (env:ZD_TOKEN)" in str(err.value)
    assert "wrong-token-zzzzzz" not in str(err.value)
    assert ticket_records(zd_cfg).list() == []  # nothing filed: the claim is forgotten


def test_an_end_user_token_is_refused_custom_fields_with_the_permission_named(ca, tmp_path, ca_file, secret_env):
    from tests.fakes.zendesk import FakeZendesk

    with FakeZendesk(ca, email=ZD_EMAIL, token=ZD_TOKEN, agent=False, field_ids={CATEGORY_FIELD}) as fake:
        cfg = load(write_config(tmp_path, tickets_config("zendesk", zendesk_section(fake, ca_file))))
        with pytest.raises(RemoteAuthError) as err:
            open_ticket_provider(cfg, "databricks").file(request())
    assert err.value.status == 403
    assert "custom fields and group need an agent" in str(err.value)


def test_an_invalid_mapped_value_is_rejected_with_the_vendors_reason(ca, tmp_path, ca_file, secret_env, zendesk):
    text = tickets_config("zendesk", zendesk_section(zendesk, ca_file)).replace("Sev2: high", "Sev2: P2")
    cfg = load(write_config(tmp_path, text))
    with pytest.raises(RemoteRejected) as err:
        open_ticket_provider(cfg, "databricks").file(request())
    assert "Priority: P2 is not valid" in str(err.value)
    assert err.value.exit_code == 2
    assert zendesk.tickets == {}


def test_a_dry_run_files_nothing_and_shows_the_exact_request_with_the_token_redacted(zendesk, zd_cfg):
    filed = open_ticket_provider(zd_cfg, "databricks", dry_run=True).file(request(drill=True))
    assert zendesk.requests == []
    [req] = filed.requests
    assert req["method"] == "POST"
    assert req["url"] == f"{zendesk.url}/api/v2/tickets.json"
    assert req["headers"]["authorization"] == f"Basic <redacted: {ZD_EMAIL}/token:<env:ZD_TOKEN>>"
    assert req["headers"]["idempotency-key"] == filed.key
    assert req["json"]["ticket"]["custom_fields"] == [{"id": CATEGORY_FIELD, "value": "model_serving"}]
    assert req["json"]["ticket"]["subject"].startswith("[DRILL] ")
    assert ZD_TOKEN not in repr(filed.to_dict())
    assert ticket_records(zd_cfg).list() == []


def test_a_dry_run_of_a_ticket_already_filed_says_nothing_would_be_sent(zendesk, zd_cfg):
    filed = open_ticket_provider(zd_cfg, "databricks").file(request())
    dry = open_ticket_provider(zd_cfg, "databricks", dry_run=True).file(request())
    assert (dry.id, dry.requests, dry.status) == (filed.id, (), "already filed: nothing would be sent")
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 1
