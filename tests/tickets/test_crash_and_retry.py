"""A retried command after a crash never files a second ticket (real CLI processes, killed mid-filing)."""

from __future__ import annotations

import json
import os
import signal

from tests.conftest import wait_until
from tests.fakes.fixtures import run_cli

FILE = ["ticket", "file", "--vendor", "databricks", "--category", "inference", "--severity", "Sev1",
        "--subject", "Serving endpoint llm-prod down", "--body", "All requests fail with 503.", "-o", "json"]


def kill_when_called(holder: dict):
    """A hook that kills the CLI process after the server did its work and before it answers."""
    def hook(*_):
        proc = wait_until(lambda: holder.get("proc"), timeout=5, what="the CLI process to be started")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    return hook


def test_a_command_killed_after_zendesk_created_the_ticket_is_rerun_without_a_second_ticket(
        zendesk, zd_config_path, secret_env):
    holder: dict = {}
    once = kill_when_called(holder)
    zendesk.after_hooks.append(lambda req: req.method == "POST" and (zendesk.after_hooks.clear() or once()))
    holder["proc"] = run_cli(FILE, config=zd_config_path, env=secret_env, popen=True)
    holder["proc"].communicate(timeout=30)
    assert holder["proc"].returncode == -signal.SIGKILL
    assert len(zendesk.tickets) == 1

    rerun = run_cli(FILE, config=zd_config_path, env=secret_env)

    assert rerun.returncode == 0, rerun.stderr
    out = json.loads(rerun.stdout)
    assert out["outcome"] == "recovered"
    assert out["id"] == str(next(iter(zendesk.tickets)))
    assert len(zendesk.tickets) == 1
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 1
    listed = json.loads(run_cli(["ticket", "list", "-o", "json"], config=zd_config_path, env=secret_env).stdout)
    assert [(t["id"], t["state"]) for t in listed] == [(out["id"], "filed")]


def test_a_command_killed_after_the_mail_went_out_refuses_to_resend_unless_told(smtp, email_config_path, secret_env):
    holder: dict = {}
    smtp.after_data_hooks.append(lambda: smtp.after_data_hooks.clear() or kill_when_called(holder)())
    holder["proc"] = run_cli(FILE, config=email_config_path, env=secret_env, popen=True)
    holder["proc"].communicate(timeout=30)
    assert len(smtp.messages) == 1

    rerun = run_cli(FILE, config=email_config_path, env=secret_env)
    assert rerun.returncode == 5
    assert "was interrupted" in rerun.stderr and "--resend" in rerun.stderr
    assert len(smtp.messages) == 1

    resent = run_cli([*FILE, "--resend"], config=email_config_path, env=secret_env)
    assert resent.returncode == 0, resent.stderr
    assert len(smtp.messages) == 2
    # The resend carries the same Message-ID, so the vendor's mail system can drop it.
    assert smtp.messages[0]["message"]["Message-ID"] == smtp.messages[1]["message"]["Message-ID"]
    again = run_cli(FILE, config=email_config_path, env=secret_env)
    assert json.loads(again.stdout)["outcome"] == "existing"
    assert len(smtp.messages) == 2


def test_a_429_then_success_through_the_cli_files_exactly_one_ticket(zendesk, zd_config_path, secret_env):
    zendesk.fail_next("POST", "/api/v2/tickets.json", 429, retry_after="0")
    result = run_cli(FILE, config=zd_config_path, env=secret_env)
    assert result.returncode == 0, result.stderr
    assert "rate limited" in result.stderr  # the retry is reported, on stderr
    assert len(zendesk.tickets) == 1
    assert len(zendesk.requests_to("POST", "/api/v2/tickets.json")) == 2


def test_rate_limiting_that_outlasts_the_retries_exits_1_and_leaves_nothing_pending(zendesk, zd_config_path,
                                                                                   secret_env):
    zendesk.fail_next("POST", "/api/v2/tickets.json", 429, retry_after="0", times=50)
    result = run_cli(FILE, config=zd_config_path, env=secret_env)
    assert result.returncode == 1
    assert "gave up after 4 attempt(s)" in result.stderr
    assert zendesk.tickets == {}
    listed = json.loads(run_cli(["ticket", "list", "-o", "json"], config=zd_config_path, env=secret_env).stdout)
    assert listed == []
