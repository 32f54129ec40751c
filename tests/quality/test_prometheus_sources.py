"""Cost and shadow reports over a real Prometheus (backfilled with promtool): the replicas PromQL
query averages the deployment's replicas over the window, and the shadow report's percentiles equal
PromQL's own histogram_quantile, with integer bucket bounds exposed as le="1" (not "1.0")."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest

from tests.conftest import PrometheusServer, write_config
from tests.quality.test_shadow import PRIMARY_LE, SLOW_LE

pytestmark = pytest.mark.prometheus

END = 1_795_000_000
STEP = 60
# Samples 30 s off the minute so that every window holds whole steps whatever the boundary rule:
# k = 0 lies before the 1-day window, k = 1..1440 inside it.
TIMES = [END - 86400 - 30 + STEP * k for k in range(1441)]
LE = ("0.05", "0.1", "0.2", "0.3", "0.5", "0.75", "1", "2", "5", "10", "+Inf")  # an older client's labels


def openmetrics() -> str:
    lines = ["# TYPE kube_deployment_status_replicas_available gauge"]
    # 2 replicas for the first half of the day, 4 for the second: 720 samples each -> average 3.
    lines += [f'kube_deployment_status_replicas_available{{deployment="vllm"}} {2 if t < END - 43200 else 4} {t}'
              for t in TIMES]
    for family, per_step in (("llm_proxy_prompt_tokens", 180_000), ("llm_proxy_completion_tokens", 30_000)):
        lines.append(f"# TYPE {family} counter")
        lines += [f'{family}_total{{backend="internal"}} {per_step * k} {t}' for k, t in enumerate(TIMES)]
    lines.append("# TYPE llm_proxy_requests counter")
    per_min = {"databricks": {"ok": 6000}, "internal": {"ok": 5982, "server_error": 12, "timeout": 6}}
    for backend, outcomes in per_min.items():
        for outcome, n in outcomes.items():
            lines += [f'llm_proxy_requests_total{{backend="{backend}",outcome="{outcome}"}} {n * k} {t}'
                      for k, t in enumerate(TIMES)]
    lines.append("# TYPE llm_proxy_request_duration_seconds histogram")
    for backend, shares in (("databricks", PRIMARY_LE), ("internal", SLOW_LE)):
        for le, count in zip(LE, shares):
            lines += [f'llm_proxy_request_duration_seconds_bucket{{backend="{backend}",le="{le}"}} {count * 6 * k} {t}'
                      for k, t in enumerate(TIMES)]
        lines += [f'llm_proxy_request_duration_seconds_count{{backend="{backend}"}} {6000 * k} {t}'
                  for k, t in enumerate(TIMES)]
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


def promql(url: str, expr: str, at: int) -> float:
    query = urllib.parse.urlencode({"query": expr, "time": str(at)})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10) as response:
        result = json.load(response)["data"]["result"]
    assert len(result) == 1, result
    return float(result[0]["value"][1])


AT = "2026-11-18T11:06:40Z"  # END


def test_replicas_query_averages_over_the_window(opsctl, tmp_path, prometheus):
    cfg = write_config(tmp_path, """\
        cost:
          backends:
            internal:
              gpu:
                gpu_hourly_price: 3.5
                replicas_query: 'avg_over_time(kube_deployment_status_replicas_available{deployment="vllm"}[$window])'
        """, source="prometheus", prometheus_url=prometheus.url)
    result = opsctl("--config", str(cfg), "cost", "report", "--window", "1d", "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout)["backends"][0]
    # 3 replicas (average of 2 and 4) x 1 GPU x 24 h x 3.50 = 252.00
    assert line["cost"] == pytest.approx(252.0)
    # tokens: 3000 + 500 per second x 86400 s = 259.2M + 43.2M = 302.4M; 252 / 302.4 = 0.833333 per million
    assert line["input_tokens"] == pytest.approx(259_200_000, rel=1e-9)
    assert line["output_tokens"] == pytest.approx(43_200_000, rel=1e-9)
    assert line["per_million"] == pytest.approx(252.0 / 302.4, rel=1e-9)
    assert line["share"] == pytest.approx(1.0)


def test_shadow_percentiles_equal_promql_histogram_quantile(opsctl, tmp_path, prometheus):
    cfg = write_config(tmp_path, source="prometheus", prometheus_url=prometheus.url)
    result = opsctl("--config", str(cfg), "shadow", "report", "--backend", "internal", "--at", AT, "-o", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    for backend, role in (("internal", "shadow"), ("databricks", "primary")):
        for q, label in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            expected = promql(prometheus.url, f"histogram_quantile({q}, sum by (le) (increase("
                              f'llm_proxy_request_duration_seconds_bucket{{backend="{backend}"}}[3600s])))', END)
            assert data["figures"][role]["latency"][label] == pytest.approx(expected, rel=1e-9), (backend, label)
    assert data["figures"]["shadow"]["latency"]["p99"] == pytest.approx(1.0)  # the le="1" bucket was matched
    # 12 server errors + 6 timeouts per 6000 requests = 0.3%
    assert data["figures"]["shadow"]["error_rate"] == pytest.approx(18 / 6000, rel=1e-9)
    assert data["current_rate"] == pytest.approx(100.0, rel=1e-9)
    assert "error rate 0.3000% vs primary 0.0000% (at most 0.0100%)" in data["reasons"]
