"""`opsctl --catalog DIR serve`: what one server reads must be one value for the whole fleet; refused
(exit 2, one line, before anything starts) when the services disagree."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_opsctl

DEFAULTS = """\
backends:
  internal: {kind: internal, description: vLLM pods}
  databricks: {kind: vendor, vendor: databricks, description: Databricks}
automation:
  token: {env: FLEET_TOKEN}
"""


def catalog(tmp_path: Path, **services: str) -> Path:
    directory = tmp_path / "services"
    directory.mkdir()
    (directory / "_defaults.yaml").write_text(DEFAULTS)
    for name, extra in services.items():
        (directory / f"{name}.yaml").write_text(f"service: {name}\n" + textwrap.dedent(extra))
    return directory


def serve(directory: Path):
    return run_opsctl("--catalog", str(directory), "serve", "--bind", "127.0.0.1:1", env={"FLEET_TOKEN": "x" * 20},
                      unset=("OPSCTL_CONFIG", "OPSCTL_SERVICE", "OPSCTL_CATALOG", "OPSCTL_WEBHOOK_TOKEN"))


@pytest.mark.parametrize("extra, words", [
    ("automation: {token: {env: OTHER_TOKEN}}\n", "automation.token differs between services"),
    ("automation: {body_limit: 2048}\n", "automation.body_limit differs between services"),
    ("metrics: {service_label: team}\n", "one service label"),
    ("automation: {leader_election: {ready_only_when_leader: true}}\n", "ready_only_when_leader"),
], ids=["a-second-token", "a-second-body-limit", "a-second-service-label", "ready-only-when-leader"])
def test_a_service_overriding_what_the_one_server_reads_is_refused(tmp_path, extra, words):
    result = serve(catalog(tmp_path, search="", chat=extra))
    assert result.exit_code == 2, result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")] == \
        [line for line in result.stderr.splitlines() if words in line]
