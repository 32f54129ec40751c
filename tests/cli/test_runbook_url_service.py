"""The alerts' runbook links follow the config's `service:` (issue 35's 3 a.m. snags, decision 0162):
the shipped default and `init` write `runbook_base_url: https://runbooks.example.com/{service}`, so
after the one edit of a rename every generated rule's runbook_url carries the new name."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import REPO, run_opsctl

OLD, NEW = "llm-inference", "chat-assist"


def test_after_a_rename_every_runbook_url_carries_the_new_service(tmp_path):
    assert run_opsctl("init", tmp_path / "ops", cwd=tmp_path).exit_code == 0
    cfg = tmp_path / "ops" / "opsctl.yaml"
    text = cfg.read_text()
    assert "runbook_base_url: https://runbooks.example.com/{service}" in text
    cfg.write_text(text.replace(f"\nservice: {OLD}\n", f"\nservice: {NEW}\n"))  # the one edit
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", cfg, "slo", "rules", "--out", out, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    rules = [r for g in yaml.safe_load(out.read_text())["groups"] for r in g["rules"] if "alert" in r]
    urls = [r["annotations"]["runbook_url"] for r in rules if "runbook_url" in r.get("annotations", {})]
    assert len(urls) == len([r for r in rules if "annotations" in r]) > 0
    assert [u for u in urls if not u.startswith(f"https://runbooks.example.com/{NEW}/")] == []
    assert [u for u in urls if OLD in u] == []
    # the page of the availability SLO of databricks (init writes the SLO names without the service)
    assert f"https://runbooks.example.com/{NEW}/databricks-availability-page.md" in urls


def test_the_shipped_config_resolves_to_the_published_urls_and_explicit_urls_stay():
    from opsctl.config.loading import load_config_file

    cfg = load_config_file(REPO / "opsctl.yaml")
    assert cfg.alerting.runbook_base_url == f"https://runbooks.example.com/{OLD}"
    assert cfg.runbook_base_url == f"https://runbooks.example.com/{OLD}"
    chat = (REPO / "examples" / "catalog" / "services" / "chat.yaml").read_text()
    assert "runbook_base_url: https://runbooks.example.com/chat" in chat  # an explicit URL is kept as written


def test_an_unknown_placeholder_is_refused():
    from opsctl.config.alerting import AlertingConfig

    with pytest.raises(ValueError, match=r"the only placeholder is \{service\}"):
        AlertingConfig(runbook_base_url="https://runbooks.example.com/{team}")
