"""A service's name flows from one place, the config's `service:` (or the catalog entry's): the
rules' `service` label, `init` writing no copy of it, `slo validate` and `config validate` refusing
an SLO file of another service, `sim generate` following the service's own split (issue 35 item 2)."""

from __future__ import annotations

import json
import shutil

import yaml

from tests.conftest import REPO, run_opsctl

OLD, NEW = "llm-inference", "chat-assist"
EXAMPLE = REPO / "examples" / "catalog"


def test_init_then_a_rename_of_service_leaves_no_rule_with_the_old_service(tmp_path):
    assert run_opsctl("init", tmp_path / "ops", cwd=tmp_path).exit_code == 0
    cfg = tmp_path / "ops" / "opsctl.yaml"
    text = cfg.read_text()
    assert text.count(f"\nservice: {OLD}\n") == 1
    cfg.write_text(text.replace(f"\nservice: {OLD}\n", f"\nservice: {NEW}\n"))  # the one edit
    # No SLO file init wrote names the service, so there is nothing else to edit.
    assert [p.name for p in (tmp_path / "ops" / "slos").glob("*.yaml") if OLD in p.read_text()] == []
    out = tmp_path / "rules.yaml"
    result = run_opsctl("--config", cfg, "slo", "rules", "--out", out, cwd=tmp_path)
    assert result.exit_code == 0, result.output
    groups = yaml.safe_load(out.read_text())["groups"]
    slo_rules = [r for g in groups if g["name"].startswith("opsctl-slo-") for r in g["rules"]]
    # Counted by hand: 9 SLO files; every rule of their groups carries the service label.
    assert len({r["labels"]["slo"] for r in slo_rules}) == 9
    old_label = [r for r in slo_rules if r["labels"]["service"] != NEW]
    old_matcher = [r for r in slo_rules if f'service="{OLD}"' in yaml.safe_dump(r)]
    old_slo_name = [r for r in slo_rules if OLD in r["labels"]["slo"]]
    assert (len(old_label), len(old_matcher), len(old_slo_name)) == (0, 0, 0)
    assert sum(1 for r in slo_rules if r["labels"]["service"] == NEW) == len(slo_rules) > 200
    assert run_opsctl("--config", cfg, "config", "validate", cwd=tmp_path).exit_code == 0
    assert run_opsctl("--config", cfg, "slo", "validate", cwd=tmp_path).exit_code == 0


def test_an_slo_file_naming_another_service_is_refused_by_slo_and_config_validate(tmp_path):
    # A config of service `chat-assist` whose SLO file still says llm-inference (copied from the
    # shipped default's older files, which carried metadata.labels.service_name).
    assert run_opsctl("init", tmp_path / "ops", cwd=tmp_path).exit_code == 0
    cfg = tmp_path / "ops" / "opsctl.yaml"
    cfg.write_text(cfg.read_text().replace(f"\nservice: {OLD}\n", f"\nservice: {NEW}\n"))
    copied = tmp_path / "ops" / "slos" / "internal-availability.yaml"
    copied.write_text(copied.read_text().replace("  labels:\n", f"  labels:\n    service_name: {OLD}\n", 1))
    for command in (("slo", "validate"), ("config", "validate")):
        result = run_opsctl("--config", cfg, *command, cwd=tmp_path)
        assert result.exit_code == 2, (command, result.output)
        assert f"{copied}: internal-availability: metadata.labels.service_name: names the service '{OLD}'" \
            in result.stderr, command
        assert f"the service comes from the config's service: ({NEW})" in result.stderr, command


def test_a_catalog_slo_file_copied_from_another_service_is_refused_naming_the_file_and_the_fix(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(EXAMPLE, root)
    services = root / "services"
    # chat's internal availability copied from search's (the name made chat's, the rest as it was).
    copied = root / "slos" / "chat" / "internal-availability.yaml"
    source = (root / "slos" / "search" / "internal-availability.yaml").read_text()
    copied.write_text(source.replace("name: search-internal-availability", "name: chat-internal-availability"))
    for command in (("slo", "validate"), ("config", "validate")):
        result = run_opsctl("--catalog", services, "--service", "chat", *command, cwd=tmp_path)
        assert result.exit_code == 2, (command, result.output)
        for role in ("filter_good", "filter_valid"):
            assert f"slos/chat/{copied.name}: chat-internal-availability: {role}: " in result.stderr
        assert 'selects service="search", not service="chat"' in result.stderr
        assert 'make its selectors say service="chat"' in result.stderr
    # search itself, and chat's untouched catalog, pass.
    assert run_opsctl("--catalog", services, "--service", "search", "slo", "validate", cwd=tmp_path).exit_code == 0
    shutil.copy(EXAMPLE / "slos" / "chat" / "internal-availability.yaml", copied)
    for command in (("slo", "validate"), ("config", "validate")):
        ok = run_opsctl("--catalog", services, "--service", "chat", *command, cwd=tmp_path)
        assert ok.exit_code == 0, (command, ok.output)


def test_sim_generate_follows_the_services_default_split(tmp_path):
    root = tmp_path / "catalog"
    shutil.copytree(EXAMPLE, root)
    services = root / "services"
    assert yaml.safe_load((services / "chat.yaml").read_text())["traffic"]["default_split"] == \
        {"internal": 100, "databricks": 0}
    result = run_opsctl("--catalog", services, "--service", "chat", "sim", "generate", "--days", "0.05",
                        "--end", "2026-11-18T12:00:00Z", "--dry-run", "-o", "json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    backends = {b["backend"]: b for b in json.loads(result.stdout)["backends"]}
    assert (backends["internal"]["split"], backends["databricks"]["split"]) == (100, 0)
    assert backends["databricks"]["requests"] == 0 and backends["internal"]["requests"] > 0
    # search's 70/30 (its _defaults.yaml split), and --split still wins.
    search = run_opsctl("--catalog", services, "--service", "search", "sim", "generate", "--days", "0.05",
                        "--end", "2026-11-18T12:00:00Z", "--dry-run", "-o", "json", cwd=tmp_path)
    assert {b["backend"]: b["split"] for b in json.loads(search.stdout)["backends"]} == \
        {"internal": 70, "databricks": 30}
    given = run_opsctl("--catalog", services, "--service", "chat", "sim", "generate", "--days", "0.05",
                       "--end", "2026-11-18T12:00:00Z", "--dry-run", "--split", "databricks=50,internal=50",
                       "-o", "json", cwd=tmp_path)
    assert {b["backend"]: b["split"] for b in json.loads(given.stdout)["backends"]} == \
        {"internal": 50, "databricks": 50}
