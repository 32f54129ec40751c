"""The endpoints, quality and cost config sections: every bad value fails with exit 2 and its key path;
secrets show only where they live; the embedded defaults validate."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, write_config

GOOD_ENDPOINTS = """\
    endpoints:
      internal: {base_url: "http://127.0.0.1:8000/v1", model: m, auth: {bearer: {env: VLLM_KEY}}}
      databricks:
        base_url: https://dbc-1.cloud.databricks.com/serving-endpoints
        model: m
        api: chat
        auth:
          databricks_oauth: {workspace_url: "https://dbc-1.cloud.databricks.com", client_id: abc,
                             client_secret: {file: /run/secrets/dbx}}
    """


@pytest.mark.parametrize("extra, message", [
    ("endpoints:\n  gpu9: {base_url: 'http://x/v1', model: m}\n", "endpoints: gpu9 not a configured backend"),
    ("endpoints:\n  internal: {base_url: 'ftp://x', model: m}\n", "endpoints.internal: base_url must start with http"),
    ("endpoints:\n  internal: {base_url: 'http://x/v1', model: m, api: embeddings}\n",
     "endpoints.internal.api: must be one of 'completions', 'chat'"),
    ("endpoints:\n  internal: {base_url: 'http://x/v1', model: m, auth: {bearer: {env: A}, pat: {env: B}}}\n",
     "endpoints.internal.auth: use one auth method, not bearer and pat"),
    ("endpoints:\n  databricks: {base_url: 'http://x', model: m, auth: {databricks_oauth: "
     "{client_id: c, client_secret: {env: S}, workspace_url: 'http://w', token_url: 'http://t'}}}\n",
     "endpoints.databricks.auth.databricks_oauth: give exactly one of 'workspace_url' or 'token_url'"),
    ("endpoints:\n  databricks: {base_url: 'http://x', model: m, auth: {databricks_oauth: "
     "{client_id: c, client_secret: 's3cret-inline', workspace_url: 'http://w'}}}\n",
     "endpoints.databricks.auth.databricks_oauth.client_secret: expected a mapping"),
    ("quality:\n  probe: {min_exact_match_between: 94}\n",
     "quality.probe: min_exact_match_between must be between 0 and 1"),
    ("quality:\n  probe: {concurency: 4}\n", "quality.probe.concurency: unknown key"),
    ("quality:\n  shadow: {percentiles: [99]}\n", "quality.shadow: percentiles must be a non-empty list"),
    ("quality:\n  push: {target: graphite}\n", "quality.push.target: must be one of 'embedded', 'pushgateway'"),
    ("cost:\n  backends:\n    internal: {gpu: {gpu_hourly_price: 3}}\n",  # no static capacity to take it from
     "cost.backends.internal.gpu: give replicas or replicas_query; without them the count comes from capacity.replicas"),
    ("cost:\n  backends:\n    internal: {gpu: {gpu_hourly_price: 3, replicas: 2, replicas_query: up}}\n",
     "cost.backends.internal.gpu: give one of 'replicas' (a count) or 'replicas_query' (PromQL), not both"),
    ("cost:\n  backends:\n    databricks: {provisioned: {hourly_price: 3}, per_token: "
     "{input_per_million: 1, output_per_million: 2}}\n",
     "cost.backends.databricks: give exactly one of 'gpu', 'provisioned' or 'per_token'"),
    ("cost:\n  backends:\n    vendor2: {provisioned: {hourly_price: 3}}\n", "cost.backends: vendor2 not a configured backend"),
    ("cost:\n  window: 10m\n", "cost: window must be at least 1h"),
])
def test_bad_values_exit_2_with_the_key_path(opsctl, tmp_path, extra, message):
    cfg = write_config(tmp_path, extra)
    result = opsctl("--config", str(cfg), "config", "validate")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "s3cret-inline" not in result.stderr


def test_endpoints_show_where_secrets_live(opsctl, tmp_path):
    cfg = write_config(tmp_path, GOOD_ENDPOINTS)
    result = opsctl("--config", str(cfg), "config", "show", "-o", "yaml", env={"VLLM_KEY": "vk-should-not-show"})
    assert result.exit_code == 0, result.output
    assert "env: VLLM_KEY" in result.stdout and "file: /run/secrets/dbx" in result.stdout
    assert "vk-should-not-show" not in result.output


@pytest.mark.parametrize("path", ["opsctl.yaml", "opsctl/defaults/opsctl.yaml"])
def test_embedded_defaults_validate_with_quality_and_cost_sections(opsctl, path):
    result = opsctl("--config", str(REPO / path), "config", "show", "-o", "json")
    assert result.exit_code == 0, result.output
    for key in ('"endpoints"', '"quality"', '"cost"', '"databricks_oauth"', '"frontier"'):
        assert key in result.stdout
