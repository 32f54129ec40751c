"""The cluster config shipped in deploy/serve bills the internal fleet from its real consumption:
its `cost.backends.internal.gpu.replicas_query`, run on a real Prometheus holding kube-state-metrics'
series of two namespaces (the matcher must pick `llm`) from an HA pair (duplicates must not add up)."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import REPO, PrometheusServer, write_config

pytestmark = pytest.mark.prometheus

END = 1_795_000_000
STEP = 60
TIMES = [END - 86400 - 30 + STEP * k for k in range(1441)]  # k = 1..1440 inside the 1-day window
AT = "2026-11-18T11:06:40Z"  # END


def _shipped_cost_section() -> dict:
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "serve" / "configmap.yaml").read_text()) if d]
    config = yaml.safe_load(docs[0]["data"]["opsctl.yaml"])
    return config["cost"]


def openmetrics() -> str:
    lines = ["# TYPE kube_deployment_status_replicas_available gauge"]
    for instance in ("ksm-0", "ksm-1"):  # kube-state-metrics in an HA pair: the same figure twice
        # 200 replicas for the first half of the day, 300 for the second: average 250
        lines += [f'kube_deployment_status_replicas_available{{namespace="llm",deployment="vllm",instance="{instance}"}}'
                  f' {200 if t < END - 43200 else 300} {t}' for t in TIMES]
    # a staging copy elsewhere must not be billed
    lines += [f'kube_deployment_status_replicas_available{{namespace="llm-staging",deployment="vllm",instance="ksm-0"}}'
              f' 7 {t}' for t in TIMES]
    for family, per_step in (("llm_proxy_prompt_tokens", 6_000_000), ("llm_proxy_completion_tokens", 1_200_000)):
        lines.append(f"# TYPE {family} counter")
        for backend, share in (("internal", 1), ("databricks", 4)):  # 20 / 80 of the tokens
            lines += [f'{family}_total{{backend="{backend}"}} {per_step * share * k} {t}' for k, t in enumerate(TIMES)]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("prom")
    data = workdir / "data.om"
    data.write_text(openmetrics())
    server = PrometheusServer(workdir, openmetrics=data)
    yield server
    server.stop()


def test_shipped_cluster_config_sets_a_replicas_query():
    gpu = _shipped_cost_section()["backends"]["internal"]["gpu"]
    assert "replicas_query" in gpu and "replicas" not in gpu
    assert 'namespace="llm"' in gpu["replicas_query"] and 'deployment="vllm"' in gpu["replicas_query"]


def test_shipped_replicas_query_bills_the_fleet_that_ran(opsctl, tmp_path, prometheus):
    section = _shipped_cost_section()
    cfg = write_config(tmp_path, yaml.safe_dump({"cost": section}), source="prometheus",
                       prometheus_url=prometheus.url)
    result = opsctl("--config", str(cfg), "cost", "report", "--window", "1d", "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    internal = [b for b in json.loads(result.stdout)["backends"] if b["backend"] == "internal"][0]
    price = section["backends"]["internal"]["gpu"]["gpu_hourly_price"]
    # 250 replicas on average (200 then 300; the HA pair counted once, staging's 7 not at all)
    # x 1 GPU x 24 h x the shipped hourly price
    assert internal["cost"] == pytest.approx(250 * 1 * 24 * price)
    # tokens: (6M + 1.2M) per minute x 1440 minutes
    tokens = (6_000_000 + 1_200_000) * 1440
    assert internal["per_million"] == pytest.approx(250 * 24 * price / (tokens / 1e6), rel=1e-9)
