"""No secret value (nor its tail, nor its base64 Basic-auth form) appears in any output, log line or
state file: every paging and ticket command, successes, dry runs and auth failures alike."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from opsctl.clock import parse_rfc3339
from opsctl.paging.base import ChangeEvent, PageEvent
from opsctl.paging.registry import open_pager
from opsctl.tickets.base import TicketRequest
from opsctl.tickets.registry import open_ticket_provider
from tests.fakes.fixtures import load, run_cli, write_config
from tests.fakes.pagerduty import FakePagerDuty
from tests.paging.conftest import API_TOKEN, ROUTING_KEY, pd_config_text
from tests.tickets.conftest import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SECRET_ENV,
    SECRETS,
    ZD_EMAIL,
    ZD_TOKEN,
    email_section,
    jira_section,
    webhook_section,
    zendesk_section,
)

WRONG = {"PD_ROUTING_KEY": "wrong-r0uting-5ecret-aa11bb22", "PD_API_TOKEN": "wrong-ap1-5ecret-cc33dd44",
         "ZD_TOKEN": "wrong-zd-5ecret-ee55ff66", "JIRA_TOKEN": "wrong-j1ra-5ecret-0077aa88",
         "SMTP_PASSWORD": "wrong-smtp-5ecret-99bbcc00", "WEBHOOK_TOKEN": "wrong-wh-5ecret-11dd22ee"}


def forbidden_strings() -> list[str]:
    values = [ROUTING_KEY, API_TOKEN, *SECRETS, *WRONG.values()]
    out = []
    for v in values:
        out += [v, v[-8:]]
    for email, token in ((ZD_EMAIL, ZD_TOKEN), (ZD_EMAIL, WRONG["ZD_TOKEN"])):
        out.append(base64.b64encode(f"{email}/token:{token}".encode()).decode())
    for email, token in ((JIRA_EMAIL, JIRA_TOKEN), (JIRA_EMAIL, WRONG["JIRA_TOKEN"])):
        out.append(base64.b64encode(f"{email}:{token}".encode()).decode())
    return out


def assert_clean(text: str, where: str):
    for secret in forbidden_strings():
        assert secret not in text, f"{secret!r} leaked into {where}"


@pytest.fixture
def world(ca, tmp_path, ca_file, zendesk, jira, smtp, webhook, monkeypatch):
    with FakePagerDuty(ca, routing_keys={ROUTING_KEY}, api_tokens={API_TOKEN: "full"}) as pd:
        env = {**SECRET_ENV, "PD_ROUTING_KEY": ROUTING_KEY, "PD_API_TOKEN": API_TOKEN}
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        text = pd_config_text(pd, ca_file) + f"""
tickets:
  provider: local{zendesk_section(zendesk, ca_file)}{jira_section(jira, ca_file)}{email_section(smtp, ca_file)}{webhook_section(webhook, ca_file)}
  vendors:
    databricks:
      provider: zendesk
      categories: {{inference: model_serving}}
      severities: {{Sev1: urgent, Sev2: high, Sev3: normal, Sev4: low}}
    acme-jira:
      provider: jira
      categories: {{inference: "25"}}
      severities: {{Sev1: Highest, Sev2: High, Sev3: Medium, Sev4: Low}}
    acme-mail:
      provider: email
      to: support@acme.example
      categories: {{inference: Model Serving}}
      severities: {{Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}}
    acme-hook:
      provider: webhook
      categories: {{inference: model-serving}}
      severities: {{Sev1: S1, Sev2: S2, Sev3: S3, Sev4: S4}}
"""
        path = write_config(tmp_path, text)
        yield {"path": path, "env": env, "tmp": tmp_path, "pd": pd}


VENDORS = ("databricks", "acme-jira", "acme-mail", "acme-hook")


def test_no_secret_in_cli_output_of_any_paging_or_ticket_command(world):
    path, env = world["path"], world["env"]
    outputs = []

    def cli(*args, env_override=None, ok=True):
        result = run_cli(list(args), config=path, env={**env, **(env_override or {})})
        outputs.append((" ".join(args), result.stdout + result.stderr))
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    import json

    key = json.loads(cli("page", "trigger", "-s", "vendor 5xx", "-o", "json").stdout)["dedup_key"]
    cli("page", "trigger", "-s", "vendor 5xx", "--drill", "--dry-run")
    cli("page", "trigger", "-s", "vendor 5xx", "--dry-run", "-o", "json")
    cli("page", "ack", key)
    cli("page", "status", key, "-o", "yaml")
    cli("page", "status")
    cli("page", "change", "-s", "traffic 80/20 -> 0/100", "--dry-run")
    cli("page", "change", "-s", "traffic 80/20 -> 0/100")
    cli("page", "maintenance", "start", "--for", "1h", "--description", "drill", "--dry-run", "-o", "json")
    cli("page", "resolve", key)
    cli("page", "trigger", "-s", "x", env_override=WRONG, ok=False)
    cli("page", "status", key, env_override=WRONG, ok=False)
    for vendor in VENDORS:
        base = ["ticket", "file", "--vendor", vendor, "--category", "inference", "--severity", "Sev2",
                "--subject", f"{vendor} endpoint 503"]
        cli(*base, "--dry-run")
        cli(*base, "--dry-run", "-o", "json")
        filed = json.loads(cli(*base, "-o", "json").stdout)
        cli("ticket", "status", filed["id"], ok=vendor != "acme-mail")
        cli(*base, "--subject", "other", env_override=WRONG, ok=False)
    cli("ticket", "list", "-o", "json")
    cli("config", "show")
    for where, text in outputs:
        assert_clean(text, f"output of `opsctl {where}`")
    assert any("redacted" in text for _, text in outputs)


def test_no_secret_in_any_log_line_even_at_debug(world, caplog):
    from opsctl.paging import pagerduty as pd_module

    caplog.set_level(logging.DEBUG)
    pd_module._LIB_LOG.addHandler(caplog.handler)  # the client's own log, normally muted
    pd_module._LIB_LOG.setLevel(logging.DEBUG)
    try:
        cfg = load(world["path"])
        world["pd"].fail_next("POST", "/v2/enqueue", 429, retry_after="0")
        pager = open_pager(cfg)
        key = pager.trigger(PageEvent(summary="vendor 5xx", source="opsctl")).dedup_key
        pager.change_event(ChangeEvent(summary="traffic", source="opsctl", timestamp=parse_rfc3339("2026-11-26T15:00:00Z")))
        pager.get_incident(key)
        world["pd"].fail_next("GET", "/incidents", 503)
        pager.get_incident(key)
        for vendor in VENDORS:
            req = TicketRequest(vendor=vendor, category="inference", severity="Sev1", subject=f"{vendor} down")
            desk = open_ticket_provider(cfg, vendor)
            desk.status(desk.file(req).id)
        import os

        for k, v in WRONG.items():
            os.environ[k] = v
        for vendor in VENDORS:
            with pytest.raises(Exception):
                open_ticket_provider(cfg, vendor).file(TicketRequest(vendor=vendor, category="inference",
                                                                     severity="Sev1", subject="wrong creds"))
        with pytest.raises(Exception):
            open_pager(cfg).trigger(PageEvent(summary="wrong creds", source="opsctl"))
    finally:
        pd_module._LIB_LOG.removeHandler(caplog.handler)
        pd_module._LIB_LOG.setLevel(logging.NOTSET)
    assert len(caplog.records) > 10  # the logs did run at debug
    lines = "\n".join(f"{r.name} {r.getMessage()}" for r in caplog.records)
    assert_clean(lines, "the log")


def test_no_secret_in_any_state_file(world):
    path, env = world["path"], world["env"]
    run_cli(["page", "trigger", "-s", "vendor 5xx"], config=path, env=env)
    for vendor in VENDORS:
        run_cli(["ticket", "file", "--vendor", vendor, "--category", "inference", "--severity", "Sev2",
                 "--subject", "down"], config=path, env=env)
        run_cli(["ticket", "file", "--vendor", vendor, "--category", "inference", "--severity", "Sev2",
                 "--subject", "wrong"], config=path, env={**env, **WRONG})
    files = [p for p in Path(world["tmp"], "state").rglob("*") if p.is_file()]
    assert any(p.name == "records.json" for p in files)
    for p in files:
        assert_clean(p.read_text(errors="replace"), str(p))
    assert_clean(Path(path).read_text(), "the config file")
