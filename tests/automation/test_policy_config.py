"""The `automation:` config section: every mistake is exit 2 naming the file and key path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.automation.helpers import FAILOVER_POLICY, write_serve_config
from tests.conftest import REPO, run_opsctl


def _validate(tmp_path, *, policies: str = FAILOVER_POLICY, automation_extra: str = ""):
    config = write_serve_config(tmp_path, policies=policies, automation_extra=automation_extra)
    return run_opsctl("--config", str(config), "config", "validate")


def test_the_embedded_default_ships_the_availability_failover_policy():
    import yaml

    data = yaml.safe_load((REPO / "opsctl.yaml").read_text())
    (policy,) = data["automation"]["policies"]
    assert policy["match"] == {"alertname": "SloBurnRatePage", "severity": "page"}
    assert policy["match_re"]["slo"] == ".+-availability"
    assert policy["actions"]["restore"] is True and "failover" in policy["actions"]


CASES = [
    ("a label no policy can match on",
     FAILOVER_POLICY.replace("match: {alertname", "match: {team: llm, alertname"),
     "", "automation.policies[0]: match: unknown label 'team'"),
    ("a broken regular expression",
     FAILOVER_POLICY.replace('".+-availability"', '"(unclosed"'), "", "match_re.slo: invalid regular expression"),
    ("restore without failover",
     FAILOVER_POLICY.replace("failover: {}, ", ""), "", "restore needs failover in the same policy"),
    ("a policy matching everything",
     "- name: everything\n  actions: {page: {}}\n", "", "a policy that matches every alert is refused"),
    ("no actions",
     "- name: idle\n  match: {severity: page}\n  actions: {}\n", "", "give at least one action"),
    ("failover from an unknown backend",
     FAILOVER_POLICY.replace("failover: {}", "failover: {backend: openai}"), "",
     "automation.policies[0].actions.failover.backend: unknown backend 'openai'"),
    ("duplicate policy names", FAILOVER_POLICY + FAILOVER_POLICY, "", "duplicate policy name(s): availability"),
    ("a ticket severity that does not exist",
     FAILOVER_POLICY.replace("ticket: {}", "ticket: {severity: Sev9}"), "",
     "automation.policies[0].actions.ticket.severity: must be one of"),
    ("an unknown action", FAILOVER_POLICY.replace("note: true", "note: true, reboot: true"), "",
     "automation.policies[0].actions.reboot: unknown key"),
    ("a bind address without a port", FAILOVER_POLICY, "bind: localhost\n", "bind must be HOST:PORT"),
    ("a tiny body limit", FAILOVER_POLICY, "body_limit: 10\n", "body_limit must be between"),
    ("a hold-down that is not a duration", FAILOVER_POLICY, "hold_down: soon\n", "invalid duration 'soon'"),
    ("a token given as a plain string", FAILOVER_POLICY, "token: hunter2hunter2hunter2\n", "automation.token"),
]


@pytest.mark.parametrize("case, policies, extra, expected", CASES, ids=[c[0] for c in CASES])
def test_a_bad_automation_section_is_exit_2_naming_the_key(tmp_path, case, policies, extra, expected):
    result = _validate(tmp_path, policies=policies, automation_extra=extra)
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert str(tmp_path / "opsctl.yaml") in result.stderr


def test_serving_does_not_load_starlette_or_uvicorn_on_the_cli_path():
    code = textwrap.dedent("""\
        import sys
        import opsctl.cli.main, opsctl.cli.serve_cmd, opsctl.automation.policy, opsctl.automation.service
        heavy = [m for m in ("starlette", "uvicorn", "prometheus_client", "kubernetes", "pagerduty") if m in sys.modules]
        print(heavy)
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(REPO)},
                         timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_serve_help_has_an_example():
    result = run_opsctl("serve", "--help")
    assert result.exit_code == 0
    assert "Examples:" in result.stdout and "opsctl serve --bind" in result.stdout
