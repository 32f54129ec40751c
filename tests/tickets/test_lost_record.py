"""A ticket keyed by its caller (the automation keys it on the alert) is looked up at the vendor's
desk before it is created: with the local record lost (a pod rescheduled) there is still one ticket."""

from __future__ import annotations

from opsctl.tickets.base import TicketRequest
from opsctl.tickets.registry import open_ticket_provider

KEY = "opsctl-automation-availability-databricks-4d789e09deae2d59d43c"


def request(**kw):
    base = dict(vendor="databricks", category="inference", severity="Sev2", subject="Serving endpoint down",
                body="All requests fail with 503.", idempotency_key=KEY)
    base.update(kw)
    return TicketRequest(**base)


def forget(cfg) -> None:
    records = cfg.state_path / "tickets" / "records.json"
    assert records.exists()
    records.unlink()


def test_zendesk_finds_the_ticket_by_external_id_when_the_record_is_lost(zendesk, zd_cfg):
    first = open_ticket_provider(zd_cfg, "databricks").file(request())
    forget(zd_cfg)
    zendesk.expire_idempotency_keys()  # hours later: Zendesk no longer answers the key by itself

    again = open_ticket_provider(zd_cfg, "databricks").file(request())

    assert len(zendesk.tickets) == 1
    assert again.id == first.id and again.outcome == "recovered"
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 1
    lookups = [r for r in zendesk.requests_to("GET", "/api/v2/tickets.json") if r.q("external_id") == KEY]
    assert len(lookups) == 2  # looked up before each creation


def test_jira_finds_the_request_by_its_key_label_when_the_record_is_lost(jira, jira_cfg):
    first = open_ticket_provider(jira_cfg, "databricks").file(request())
    forget(jira_cfg)

    again = open_ticket_provider(jira_cfg, "databricks").file(request())

    assert len(jira.issues) == 1
    assert again.id == first.id and again.outcome == "recovered"
    assert len(jira.requests_to("POST", "/rest/servicedeskapi/request")) == 1


def test_the_webhook_receiver_drops_the_repeated_idempotency_key_when_the_record_is_lost(webhook, webhook_cfg):
    first = open_ticket_provider(webhook_cfg, "databricks").file(request())
    forget(webhook_cfg)

    again = open_ticket_provider(webhook_cfg, "databricks").file(request())

    assert len(webhook.tickets) == 1 and again.id == first.id
    posts = webhook.requests_to("POST", "/hooks/tickets")
    assert [p.headers["idempotency-key"] for p in posts] == [KEY, KEY]


def test_a_key_derived_from_the_content_is_not_looked_up_first(zendesk, zd_cfg):
    open_ticket_provider(zd_cfg, "databricks").file(request(idempotency_key=None))
    assert zendesk.requests_to("GET", "/api/v2/tickets.json") == []
