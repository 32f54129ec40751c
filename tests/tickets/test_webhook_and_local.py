"""The generic webhook channel (loopback receiver) and the local ledger."""

from __future__ import annotations

import hashlib
import hmac

from opsctl.clock import SimClock, parse_rfc3339
from opsctl.tickets.base import TicketRequest
from opsctl.tickets.registry import open_ticket_provider
from tests.tickets.conftest import WEBHOOK_SECRET, WEBHOOK_TOKEN


def request(**kw):
    base = dict(vendor="databricks", category="inference", severity="Sev2", subject="endpoint 503s",
                body="12% of requests")
    base.update(kw)
    return TicketRequest(**base)


def test_the_webhook_gets_the_mapped_ticket_signed_with_bearer_and_idempotency_key(webhook, webhook_cfg):
    req = request(drill=True)
    filed = open_ticket_provider(webhook_cfg, "databricks").file(req)

    [post] = webhook.requests_to("POST", "/hooks/tickets")
    assert post.headers["authorization"] == f"Bearer {WEBHOOK_TOKEN}"
    assert post.headers["x-opsctl-signature"] == \
        "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["idempotency-key"] == req.key
    body = post.json
    assert (body["category"], body["severity"]) == ("model-serving", "S2")
    assert (body["opsctl_category"], body["opsctl_severity"]) == ("inference", "Sev2")
    assert body["drill"] is True and body["subject"].startswith("[DRILL] ")
    assert filed.id == "WH-1"


def test_a_webhook_500_after_receiving_resends_with_the_same_key_and_files_one_ticket(webhook, webhook_cfg):
    webhook.fail_next("POST", "/hooks/tickets", 500, after=True)
    filed = open_ticket_provider(webhook_cfg, "databricks").file(request())
    posts = webhook.requests_to("POST", "/hooks/tickets")
    assert len(posts) == 2
    assert posts[0].headers["idempotency-key"] == posts[1].headers["idempotency-key"]
    assert list(webhook.tickets) == ["WH-1"] and filed.id == "WH-1"


def test_webhook_status_is_read_from_the_status_url(webhook, webhook_cfg):
    desk = open_ticket_provider(webhook_cfg, "databricks")
    filed = desk.file(request())
    webhook.tickets[filed.id].update(status="assigned", assignee="inference on-call",
                                     first_response_at="2026-11-26T15:04:00Z")
    got = desk.status(filed.id)
    assert (got.status, got.assignee, got.group) == ("assigned", "inference on-call", "inference-oncall")
    assert got.first_response_at == parse_rfc3339("2026-11-26T15:04:00Z")
    assert got.category == "inference"


def test_the_local_ledger_files_reads_back_and_lets_a_drill_play_the_vendor(local_cfg):
    clock = SimClock(parse_rfc3339("2026-11-26T15:00:00Z"))
    desk = open_ticket_provider(local_cfg, "databricks", clock=clock)
    filed = desk.file(request())
    assert filed.id == "LT00001"
    clock.advance(420)
    desk.channel.respond(filed.id, assignee="vendor engineer", category="platform")
    got = desk.status(filed.id)
    assert got.first_response_at == parse_rfc3339("2026-11-26T15:07:00Z")
    assert (got.status, got.assignee) == ("open", "vendor engineer")
    assert (got.category_value, got.category) == ("Workspace", "platform")


def test_a_derived_key_older_than_the_dedup_window_files_a_new_ticket(local_cfg):
    clock = SimClock(parse_rfc3339("2026-11-26T15:00:00Z"))
    first = open_ticket_provider(local_cfg, "databricks", clock=clock).file(request())
    clock.advance(3600)
    same = open_ticket_provider(local_cfg, "databricks", clock=clock).file(request())
    assert same.id == first.id
    clock.advance(86400)  # past the 24h window: the same words now describe a new incident
    later = open_ticket_provider(local_cfg, "databricks", clock=clock).file(request())
    assert later.id != first.id
    assert later.outcome == "filed"
    assert later.key == f"{first.key}.{int(clock.now())}"
    # ...and a re-run of that command now finds the new ticket.
    assert open_ticket_provider(local_cfg, "databricks", clock=clock).file(request()).id == later.id
