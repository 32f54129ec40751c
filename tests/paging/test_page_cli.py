"""`opsctl page ...` as a user runs it: the real CLI process against the loopback PagerDuty fake."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fakes.fixtures import ROOT, run_cli
from tests.paging.conftest import ROUTING_KEY


def test_trigger_ack_status_resolve_through_the_cli(pd, pd_config_path, pd_env):
    def cli(*args):
        result = run_cli(list(args), config=pd_config_path, env=pd_env)
        assert result.returncode == 0, result.stderr
        return result

    out = json.loads(cli("page", "trigger", "-s", "databricks 5xx 12%", "--component", "databricks",
                         "--detail", "burn_rate_1h=14.4", "--link", "https://grafana.example/d/llm",
                         "-o", "json").stdout)
    key = out["dedup_key"]
    assert out["provider"] == "pagerduty" and out["action"] == "trigger"
    payload = pd.requests_to("POST", "/v2/enqueue")[0].json["payload"]
    assert payload["custom_details"]["burn_rate_1h"] == "14.4"
    cli("page", "ack", key)
    status = json.loads(cli("page", "status", key, "-o", "json").stdout)
    assert status["status"] == "acknowledged"
    assert status["seconds_to_acknowledge"] is not None
    table = cli("page", "status", key).stdout
    assert "acknowledged" in table and key in table
    cli("page", "resolve", key)
    listed = json.loads(cli("page", "status", "-o", "json").stdout)
    assert [(p["dedup_key"], p["last_action"]) for p in listed] == [(key, "resolve")]
    assert len(pd.incidents) == 1 and pd.incidents[0]["status"] == "resolved"


def test_a_drill_dry_run_prints_the_request_and_sends_nothing(pd, pd_config_path, pd_env):
    result = run_cli(["page", "trigger", "-s", "game day: vendor outage", "--drill", "--dry-run", "-o", "json"],
                     config=pd_config_path, env=pd_env)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dry_run"] is True
    [req] = out["requests"]
    assert req["json"]["payload"]["summary"] == "[DRILL] game day: vendor outage"
    assert req["json"]["payload"]["custom_details"]["drill"] is True
    assert req["json"]["routing_key"] == "<redacted:env:PD_ROUTING_KEY>"
    assert pd.requests == []
    assert ROUTING_KEY not in result.stdout + result.stderr


def test_exit_codes_auth_2_no_data_3_unavailable_1(pd, pd_config_path, pd_env):
    bad = run_cli(["page", "trigger", "-s", "x"], config=pd_config_path, env={**pd_env, "PD_ROUTING_KEY": "nope-1234"})
    assert bad.returncode == 2
    assert "paging.pagerduty.routing_key (env:PD_ROUTING_KEY)" in bad.stderr
    missing = run_cli(["page", "status", "opsctl-llm-inference-unknown"], config=pd_config_path, env=pd_env)
    assert missing.returncode == 3
    pd.fail_next("POST", "/v2/enqueue", 503, times=50)
    down = run_cli(["page", "trigger", "-s", "x"], config=pd_config_path, env=pd_env)
    assert down.returncode == 1
    assert "gave up after 4 attempt(s)" in down.stderr


def test_maintenance_window_and_oncall_through_the_cli(pd, pd_config_path, pd_env):
    pd.oncalls = [{"user": {"summary": "Alice"}, "escalation_level": 1, "schedule": {"summary": "Primary"},
                   "escalation_policy": {"id": "PEP0001"}, "start": None, "end": None}]
    oncall = run_cli(["page", "oncall", "-o", "json"], config=pd_config_path, env=pd_env)
    assert json.loads(oncall.stdout) == [{"user": "Alice", "escalation_level": 1, "schedule": "Primary",
                                          "start": None, "end": None}]
    started = run_cli(["page", "maintenance", "start", "--for", "30m", "--description", "[DRILL] game day",
                       "-o", "json"], config=pd_config_path, env=pd_env)
    window = json.loads(started.stdout)
    assert window["id"] in pd.maintenance_windows
    ended = run_cli(["page", "maintenance", "end", window["id"]], config=pd_config_path, env=pd_env)
    assert ended.returncode == 0 and pd.maintenance_windows == {}


def test_the_page_and_ticket_commands_start_without_importing_heavy_clients():
    # A fresh interpreter: what a command imports is only visible in a process of its own.
    code = ("import sys; from opsctl.cli.main import main\n"
            "try:\n    main(['page', '--help'])\nexcept SystemExit:\n    pass\n"
            "try:\n    main(['ticket', 'file', '--help'])\nexcept SystemExit:\n    pass\n"
            "import opsctl.paging.registry, opsctl.tickets.registry\n"
            "heavy = [m for m in ('pagerduty', 'httpx', 'httpx2', 'kubernetes', 'slo_generator') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr
