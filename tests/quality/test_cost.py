"""`opsctl cost report`: figures against ones computed by hand from hand-made token counts."""

from __future__ import annotations

import json

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import write_config

END = 1_795_000_000
DAY_STEPS = 8640  # one day of 10 s steps

# Per 10 s step: internal 30 000 prompt + 5 000 completion tokens; databricks 120 000 + 20 000.
# Over one day (8640 steps): internal 259.2M in + 43.2M out = 302.4M; databricks 1036.8M + 172.8M = 1209.6M.
# All tokens: 1512M; shares 302.4 / 1512 = 20% and 80%.
INTERNAL = (30_000, 5_000)
VENDOR = (120_000, 20_000)


def load(tmp_path, extra, *, steps=DAY_STEPS, backends=("internal", "databricks")):
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    ts = [END - (steps - 1 - i) * 10 for i in range(steps)]
    for name, (prompt, completion) in (("internal", INTERNAL), ("databricks", VENDOR)):
        if name in backends:
            store.write_steps(name, ts, {"req_ok": [100] * steps, "prompt_tokens": [prompt] * steps,
                                         "completion_tokens": [completion] * steps}, mode="replace")
    store.close()
    return write_config(tmp_path, extra)


PRICING = """\
    cost:
      currency: USD
      min_traffic_share: {share}
      frontier: {{name: frontier-x, price_per_million: 5.0}}
      backends:
        internal:
          gpu: {{gpu_hourly_price: 3.5, gpus_per_replica: 1, replicas: 4}}
        databricks:
          {vendor}
    """
PER_TOKEN = "per_token: {input_per_million: 0.5, output_per_million: 1.5}"
PROVISIONED = "provisioned: {hourly_price: 24.0}"


def run(opsctl, cfg, *args):
    return opsctl("--config", str(cfg), "cost", "report", "--window", "1d", "-o", "json", *args)


def test_gpu_and_per_token_costs_per_million_tokens(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.05, vendor=PER_TOKEN))
    result = run(opsctl, cfg)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    lines = {b["backend"]: b for b in data["backends"]}
    internal, vendor = lines["internal"], lines["databricks"]
    assert (internal["input_tokens"], internal["output_tokens"]) == (259_200_000, 43_200_000)
    assert (vendor["input_tokens"], vendor["output_tokens"]) == (1_036_800_000, 172_800_000)
    assert data["total_tokens"] == 1_512_000_000
    assert internal["share"] == pytest.approx(0.2) and vendor["share"] == pytest.approx(0.8)
    # internal: 4 replicas x 1 GPU x 24 h x 3.50 = 336.00; per million: 336 / 302.4 = 1.111111
    assert internal["cost"] == pytest.approx(336.0)
    assert internal["per_million"] == pytest.approx(336.0 / 302.4)
    # databricks: 1036.8 x 0.50 + 172.8 x 1.50 = 518.40 + 259.20 = 777.60; per million: 777.6 / 1209.6 = 0.642857
    assert vendor["cost"] == pytest.approx(777.6)
    assert vendor["per_million"] == pytest.approx(777.6 / 1209.6)
    # frontier at 5.00 per million: 1512 x 5 = 7560.00 for the same tokens; internal at 1.1111 / 5 = 0.2222x
    assert data["frontier"] == {"name": "frontier-x", "price_per_million": 5.0, "cost_for_same_tokens": pytest.approx(7560.0)}
    assert internal["vs_frontier"] == pytest.approx(336.0 / 302.4 / 5.0)
    assert data["warnings"] == []


def test_provisioned_throughput_is_hourly(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.05, vendor=PROVISIONED))
    data = json.loads(run(opsctl, cfg).stdout)
    vendor = next(b for b in data["backends"] if b["backend"] == "databricks")
    # 24 h x 24.00 = 576.00; per million: 576 / 1209.6 = 0.476190
    assert vendor["cost"] == pytest.approx(576.0)
    assert vendor["per_million"] == pytest.approx(576.0 / 1209.6)
    assert vendor["basis"] == "provisioned throughput 24 h x 24/hour"


def test_too_small_a_share_of_traffic_is_a_warning(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.25, vendor=PER_TOKEN))
    result = opsctl("--config", str(cfg), "cost", "report", "--window", "1d")
    assert result.exit_code == 0, result.output
    assert ("warning: internal carried 20.0% of the tokens in the window (less than 25%): too small a sample "
            "for a representative cost per million tokens") in result.stdout
    assert "databricks carried" not in result.stdout


def test_table_shows_backends_side_by_side_with_the_frontier_line(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.05, vendor=PER_TOKEN))
    result = opsctl("--config", str(cfg), "cost", "report", "--window", "1d")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    assert "336.00" in rows["internal"] and "1.1111" in rows["internal"] and "0.22x" in rows["internal"]
    assert "777.60" in rows["databricks"] and "0.6429" in rows["databricks"]
    assert "7,560.00" in rows["reference:"] and "5.0000" in rows["reference:"]
    assert "internal: 4 replicas x 1 GPU x 24 h x 3.5/GPU-hour" in result.stdout


def test_data_starting_inside_the_window_is_flagged(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.05, vendor=PER_TOKEN), steps=DAY_STEPS // 2)
    data = json.loads(run(opsctl, cfg).stdout)
    warnings = "\n".join(data["warnings"])
    assert "internal: no data at the start of the window" in warnings
    assert "databricks: no data at the start of the window" in warnings


def test_a_priced_backend_without_data_exits_3(opsctl, tmp_path):
    cfg = load(tmp_path, PRICING.format(share=0.05, vendor=PER_TOKEN), backends=("databricks",))
    result = run(opsctl, cfg)
    assert result.exit_code == 3, result.output
    assert "no token or replica data in the window for: internal" in result.stderr
    internal = next(b for b in json.loads(result.stdout)["backends"] if b["backend"] == "internal")
    assert internal["per_million"] is None and internal["input_tokens"] is None


def test_replicas_query_needs_a_source_that_speaks_promql(opsctl, tmp_path):
    extra = PRICING.format(share=0.05, vendor=PER_TOKEN).replace(
        "replicas: 4", "replicas_query: 'avg_over_time(kube_deployment_status_replicas_available[$window])'")
    cfg = load(tmp_path, extra)
    result = run(opsctl, cfg)
    assert result.exit_code == 2, result.output
    assert "use a Prometheus source" in result.stderr


def test_no_pricing_configured_exits_2(opsctl, tmp_path):
    cfg = load(tmp_path, "")
    result = run(opsctl, cfg)
    assert result.exit_code == 2 and "configure cost.backends" in result.stderr
