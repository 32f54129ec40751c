"""Chain drills run from any directory (issue 37 item 6): `opsctl init` writes the routing its
config generates beside it, and `drill run --chain` without `--routing` rehearses the routing
generated from the config in use, where it used to exit 2 looking for deploy/alertmanager.yml."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, require_binary, run_opsctl


def test_init_writes_the_routing_its_config_generates(tmp_path):
    assert run_opsctl("init", tmp_path / "ops").exit_code == 0
    written = (tmp_path / "ops" / "alertmanager.yml").read_text()
    generated = run_opsctl("--config", tmp_path / "ops" / "opsctl.yaml", "slo", "routes")
    assert generated.exit_code == 0, generated.stderr
    assert written == generated.stdout
    assert written == (REPO / "opsctl" / "defaults" / "alertmanager.yaml").read_text()


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.alertmanager
def test_a_chain_drill_runs_in_an_init_directory_without_routing(tmp_path):
    for name in ("prometheus", "promtool", "prometheus-alertmanager"):
        require_binary(name)
    ops = tmp_path / "ops"
    assert run_opsctl("init", ops).exit_code == 0
    assert not (ops / "deploy").exists()
    result = run_opsctl("drill", "run", "chaos/vendor-outage.yaml", "--chain", "--quiet", "-o", "json", cwd=ops)
    assert result.exit_code != 2, result.stderr
    report = json.loads(result.stdout)
    assert report["mode"] == "chain"
    rehearsed = report["environment"]["routing"] if "environment" in report else None
    text = json.dumps(report)
    assert str(ops / ".opsctl" / "drills" / "alertmanager.yml") in text, rehearsed
    hops = {h["hop"]: h for h in report["hops"]}
    # the generated routing carried the page to PagerDuty and to serve
    assert hops["pagerduty"]["passed"] and hops["serve"]["passed"], [h for h in hops.values() if not h["passed"]]
