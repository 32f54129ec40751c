"""Email channel against a real aiosmtpd server on 127.0.0.1 (STARTTLS with a trustme CA, AUTH)."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.remote import RemoteAuthError
from opsctl.tickets.base import TicketRequest
from opsctl.tickets.registry import open_ticket_provider, ticket_records
from tests.fakes.fixtures import load, run_cli, write_config
from tests.tickets.conftest import SMTP_PASSWORD, SMTP_USER, email_section, tickets_config


def request(**kw):
    base = dict(vendor="databricks", category="inference", severity="Sev2",
                subject="Model Serving latency p99 above 2s", body="Since 14:52 UTC, 30% of requests over 1s.")
    base.update(kw)
    return TicketRequest(**base)


def test_the_mail_names_the_vendors_category_and_severity_and_goes_over_starttls_with_login(smtp, email_cfg):
    req = request(drill=True)
    filed = open_ticket_provider(email_cfg, "databricks").file(req)

    [sent] = smtp.messages
    msg = sent["message"]
    assert sent["tls"] and sent["authenticated"]
    assert sent["mail_from"] == SMTP_USER
    assert sent["rcpt_tos"] == ["help@databricks.example"]
    assert msg["Subject"] == "[Severity 2 - High] [Model Serving] [DRILL] Model Serving latency p99 above 2s"
    assert msg["Message-ID"] == f"<{req.key}@opsctl.llm-inference>"
    assert msg["X-Opsctl-Drill"] == "yes"
    assert msg["X-Opsctl-Category"] == "Model Serving (inference)"
    body = msg.get_content()
    assert body.startswith("*** DRILL:")
    assert "Since 14:52 UTC" in body
    assert filed.id == msg["Message-ID"]
    assert filed.status == "sent"


def test_status_of_an_email_ticket_says_it_cannot_be_read_back(smtp, email_cfg):
    desk = open_ticket_provider(email_cfg, "databricks")
    filed = desk.file(request())
    got = desk.status(filed.id)
    assert got.readable is False
    assert "cannot be read back" in got.note


def test_the_cli_exits_3_for_the_status_of_an_email_ticket(smtp, email_config_path, secret_env):
    filed = run_cli(["ticket", "file", "--vendor", "databricks", "--category", "inference", "--severity", "Sev3",
                     "--subject", "question about quotas", "-o", "json"], config=email_config_path, env=secret_env)
    assert filed.returncode == 0, filed.stderr
    import json

    ticket_id = json.loads(filed.stdout)["id"]
    status = run_cli(["ticket", "status", ticket_id, "-o", "json"], config=email_config_path, env=secret_env)
    assert status.returncode == 3
    assert json.loads(status.stdout)["readable"] is False
    assert "cannot be read back" in status.stderr


def test_a_temporary_failure_then_success_sends_exactly_one_mail(smtp, email_cfg):
    smtp.fail_next_data()
    open_ticket_provider(email_cfg, "databricks").file(request())
    assert len(smtp.messages) == 1


def test_the_same_command_twice_sends_one_mail(smtp, email_cfg):
    open_ticket_provider(email_cfg, "databricks").file(request())
    again = open_ticket_provider(email_cfg, "databricks").file(request())
    assert again.outcome == "existing"
    assert len(smtp.messages) == 1


def test_a_wrong_password_is_an_auth_error_naming_where_the_password_lives(smtp, email_cfg, monkeypatch):
    monkeypatch.setenv("SMTP_PASSWORD", "not-the-password")
    with pytest.raises(RemoteAuthError) as err:
        open_ticket_provider(email_cfg, "databricks").file(request())
    assert "tickets.email.password (env:SMTP_PASSWORD)" in str(err.value)
    assert "not-the-password" not in str(err.value)
    assert smtp.messages == []
    assert ticket_records(email_cfg).list() == []


def test_a_server_certificate_from_an_unknown_ca_is_a_config_error(smtp, tmp_path, secret_env):
    text = tickets_config("email", email_section(smtp, "x")).replace("    ca_file: x\n", "")
    cfg = load(write_config(tmp_path, text))
    with pytest.raises(UsageError, match="not trusted"):
        open_ticket_provider(cfg, "databricks").file(request())


def test_a_dry_run_shows_the_message_and_never_the_password(smtp, email_cfg):
    filed = open_ticket_provider(email_cfg, "databricks", dry_run=True).file(request())
    [plan] = filed.requests
    assert smtp.messages == []
    assert plan["login"] == f"{SMTP_USER} / <redacted:env:SMTP_PASSWORD>"
    from email import message_from_string, policy

    shown = message_from_string(plan["message"], policy=policy.default)
    # A long header is folded right after "Subject:"; the folding space is not part of the value.
    assert shown["Subject"].strip() == "[Severity 2 - High] [Model Serving] Model Serving latency p99 above 2s"
    assert shown["To"] == "help@databricks.example"
    assert SMTP_PASSWORD not in repr(filed.to_dict())
