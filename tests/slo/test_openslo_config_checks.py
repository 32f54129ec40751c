"""An OpenSLO file's time window is its own period (issue #24 item 5): a 30-day SLO beside the
config's 28-day ones is read by every command that reads the SLO files, and a window no period can
be (outside 1d-400d) is refused by all of them, not only by the `slo` commands."""

from __future__ import annotations

import shutil

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config

THIRTY_DAYS = """\
apiVersion: openslo/v1
kind: SLO
metadata: {name: vendor-ok-30d, labels: {backend: databricks}}
spec:
  budgetingMethod: Occurrences
  timeWindow: [{duration: 30d, isRolling: true}]
  indicator:
    metadata: {name: vendor-ok}
    spec:
      ratioMetric:
        counter: true
        good: {metricSource: {type: Prometheus, spec: {query: 'llm_proxy_requests_total{backend="databricks",outcome="ok"}'}}}
        total: {metricSource: {type: Prometheus, spec: {query: 'llm_proxy_requests_total{backend="databricks"}'}}}
  objectives: [{target: 0.999}]
"""

VENDOR_OUTAGE = str(REPO / "chaos" / "vendor-outage.yaml")
COMMANDS = {
    "slo validate": ["slo", "validate"],
    "traffic set (budget guard)": ["traffic", "set", "databricks=80", "internal=20", "--dry-run", "--reason", "t"],
    "runbook list": ["runbook", "list"],
    "drill validate": ["drill", "validate", VENDOR_OUTAGE],
    "drill run --dry-run": ["drill", "run", VENDOR_OUTAGE, "--dry-run"],
}


@pytest.fixture
def config_with_a_30_day_slo(tmp_path):
    slos = tmp_path / "slos"
    shutil.copytree(REPO / "slos", slos, ignore=shutil.ignore_patterns("examples"))
    (slos / "vendor-ok-30d.yaml").write_text(THIRTY_DAYS)
    return write_config(tmp_path, slo_dir=slos), slos / "vendor-ok-30d.yaml"


@pytest.mark.parametrize("args", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_window_no_period_can_be_is_refused_by_every_command(config_with_a_30_day_slo, args):
    config, slo_file = config_with_a_30_day_slo
    slo_file.write_text(THIRTY_DAYS.replace("duration: 30d", "duration: 500d"))
    result = invoke("--config", config, *args)
    assert result.exit_code == 2, result.output
    assert f"{slo_file}: spec.timeWindow[0].duration: 500d: a period must be between 1d and 400d" in result.stderr


def test_a_30_day_slo_beside_the_28_day_period_passes_them(config_with_a_30_day_slo):
    config, slo_file = config_with_a_30_day_slo
    for args in (COMMANDS["slo validate"], COMMANDS["runbook list"]):
        result = invoke("--config", config, *args)
        assert result.exit_code == 0, (args, result.output)
