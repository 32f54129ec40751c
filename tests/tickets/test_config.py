"""The `paging:` and `tickets:` config sections: the embedded default, and errors that name the key."""

from __future__ import annotations

import pytest

from opsctl.config import BUILTIN_CONFIG, load_config_file
from opsctl.errors import ConfigError
from tests.fakes.fixtures import ROOT, load, run_cli, write_config


def problems(tmp_path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(write_config(tmp_path, text))
    return [p.split(": ", 1)[1] for p in err.value.problems]


def test_the_embedded_default_routes_databricks_inference_tickets_to_model_serving_on_local_channels():
    for path in (BUILTIN_CONFIG, ROOT / "opsctl.yaml"):
        cfg = load_config_file(path)
        assert cfg.paging.provider == "local"
        assert cfg.tickets.provider_for("databricks") == "local"
        assert cfg.tickets.vendor("databricks").categories["inference"] == "Model Serving"
        assert set(cfg.tickets.vendor("databricks").severities) == {"Sev1", "Sev2", "Sev3", "Sev4"}


def test_every_severity_must_be_mapped(tmp_path):
    got = problems(tmp_path, """
tickets:
  vendors:
    databricks:
      categories: {inference: Model Serving}
      severities: {Sev1: S1, Sev2: S2}
""")
    assert got == ["tickets.vendors.databricks: severities: map every severity; missing Sev3, Sev4"]


def test_a_vendor_on_a_channel_without_its_settings_is_refused(tmp_path):
    got = problems(tmp_path, """
tickets:
  vendors:
    databricks:
      provider: zendesk
      categories: {inference: model_serving}
      severities: {Sev1: urgent, Sev2: high, Sev3: normal, Sev4: low}
""")
    assert got == ["tickets: vendors.databricks: provider zendesk needs a tickets.zendesk section"]


def test_unknown_keys_and_plain_http_are_named_with_their_path(tmp_path):
    got = problems(tmp_path, """
tickets:
  zendesk: {url: "http://x.zendesk.com", email: a@b.c, api_token: {env: T}}
  vendors:
    databricks:
      categories: {inference: x}
      severities: {Sev1: a, Sev2: b, Sev3: c, Sev4: d}
      priority: high
""")
    assert "tickets.vendors.databricks.priority: unknown key (known keys: categories, group_id, provider, "\
           "severities, tags, to)" in got
    assert "tickets.zendesk: url must be an https:// URL (got 'http://x.zendesk.com')" in got


def test_pagerduty_without_a_routing_key_is_refused(tmp_path):
    assert problems(tmp_path, "paging: {provider: pagerduty}\n") == [
        "paging: provider pagerduty needs pagerduty.routing_key ({env: ...} or {file: ...})"]


def test_an_unknown_vendor_on_the_cli_exits_2_listing_the_known_ones(tmp_path):
    path = write_config(tmp_path, """
tickets:
  vendors:
    databricks:
      categories: {inference: Model Serving}
      severities: {Sev1: a, Sev2: b, Sev3: c, Sev4: d}
""")
    result = run_cli(["ticket", "file", "--vendor", "openai", "--category", "inference", "--severity", "Sev2",
                      "--subject", "x"], config=path)
    assert result.returncode == 2
    assert "unknown vendor 'openai' (tickets.vendors: databricks)" in result.stderr


def test_the_embedded_default_declares_each_section_once():
    # yaml.safe_load keeps the last of two duplicate keys silently; make sure there are none.
    top = [line.split(":")[0] for line in BUILTIN_CONFIG.read_text().splitlines() if line[:1].isalpha()]
    assert len(top) == len(set(top)), top
