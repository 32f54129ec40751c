"""The runbooks generated from the seed-sized cluster config (deploy/serve/configmap.yaml) say what
a vendor failover does at 200,000 requests/s. Figures by hand, from that config:
    all traffic: ceil(200000 x 1.00 x 1.25 / 200) = 1250 replicas; databricks' 80% alone: 1000;
    the GPU quota (max_replicas) is 400: short by 850, carrying floor(400 x 200 / 250000 x 100) = 32%,
    so internal goes to 32% and the degradation backend takes the other 68%.
"""

from __future__ import annotations

import yaml

from tests.conftest import REPO, run_opsctl


def test_the_seed_runbook_says_the_failover_is_partial_exits_4_and_degrades_the_rest(tmp_path):
    [configmap] = [d for d in yaml.safe_load_all((REPO / "deploy" / "serve" / "configmap.yaml").read_text()) if d]
    text = (configmap["data"]["opsctl.yaml"].replace("/opt/opsctl/slos", str(REPO / "slos"))
            .replace("state_dir: /var/lib/opsctl", f"state_dir: {tmp_path / 'state'}"))
    config = tmp_path / "opsctl.yaml"
    config.write_text(text)
    result = run_opsctl("--config", str(config), "runbook", "generate", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    outage = " ".join((tmp_path / "runbooks" / "scenario-vendor-outage.md").read_text().split())
    assert "At the service's peak of 200000 requests/s" in outage
    assert "/ 200 requests/s per replica)` = **1250** (databricks's 80% alone needs 1000)" in outage
    assert "**Short by 850 replicas at peak**: 400 replicas carry 32% of peak traffic" in outage
    assert "(internal to 32%, `no-suggestions` takes 68%)" in outage
    assert "raises the minReplicas of the HPA on Deployment llm/vllm" in outage
    assert "**exits 4** (refused in part by the capacity guard)" in outage
    assert "The rest goes to `no-suggestions` (`traffic.degradation`" in outage
    internal = " ".join((tmp_path / "runbooks" / "scenario-internal-capacity-loss.md").read_text().split())
    assert ("checked against its provisioned throughput (`capacity.vendors.databricks`: 200000 requests/s with"
            " 20% headroom)") in internal
