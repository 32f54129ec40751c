"""`opsctl init [DIR]` writes a config, SLOs and scenarios that run as they are (issue #27 item 11)."""

from __future__ import annotations

import json

import pytest
import yaml

from opsctl.config.loading import BUILTIN_CONFIG, DEFAULTS_DIR
from tests.conftest import run_opsctl


@pytest.mark.slow
def test_init_then_validate_report_and_a_drill_all_pass(tmp_path):
    target = tmp_path / "ops"
    written = run_opsctl("init", target, cwd=tmp_path)
    assert written.exit_code == 0, written.output
    cfg = target / "opsctl.yaml"
    assert cfg.read_text().startswith("# Written by `opsctl init`")
    validated = run_opsctl("--config", cfg, "config", "validate", "-o", "json", cwd=tmp_path)
    assert validated.exit_code == 0, validated.output
    answer = json.loads(validated.stdout)
    assert answer["warnings"] == [] and answer["state_dir"] == str(target / ".opsctl")
    seeded = run_opsctl("--config", cfg, "sim", "generate", "--days", "3", "--ahead", "1d", cwd=tmp_path)
    assert seeded.exit_code == 0, seeded.output
    report = run_opsctl("--config", cfg, "slo", "report", "-o", "json", cwd=tmp_path)
    assert report.exit_code == 0, report.output
    shipped_slos = sorted(p.name for p in (DEFAULTS_DIR / "slos").glob("*.yaml"))
    assert len(json.loads(report.stdout)) == len(shipped_slos) == len(list((target / "slos").glob("*.yaml")))
    drill = run_opsctl("--config", cfg, "drill", "run", "vendor-outage", cwd=tmp_path)
    assert drill.exit_code == 0, drill.output
    assert "PASSED" in drill.stdout.splitlines()[0]
    assert list((target / ".opsctl" / "drills").iterdir()), "the drill's state and report live next to the config"


def test_init_writes_the_shipped_default_with_its_comments(tmp_path):
    assert run_opsctl("init", cwd=tmp_path).exit_code == 0  # DIR defaults to the current directory
    text = (tmp_path / "opsctl.yaml").read_text()
    assert text.endswith(BUILTIN_CONFIG.read_text())  # every comment of the shipped default kept
    assert yaml.safe_load(text) == yaml.safe_load(BUILTIN_CONFIG.read_text())
    assert sorted(p.name for p in (tmp_path / "chaos").glob("*.yaml")) == \
        sorted(p.name for p in (DEFAULTS_DIR / "chaos").glob("*.yaml"))


def test_init_never_overwrites_without_force_and_dry_run_writes_nothing(tmp_path):
    (tmp_path / "opsctl.yaml").write_text("service: mine\nbackends: {a: {kind: internal}}\n")
    refused = run_opsctl("init", tmp_path, cwd=tmp_path)
    assert refused.exit_code == 2 and "would overwrite 1 file(s)" in refused.stderr
    assert (tmp_path / "opsctl.yaml").read_text().startswith("service: mine")
    assert not (tmp_path / "slos").exists(), "nothing is written when anything would be overwritten"
    dry = run_opsctl("init", tmp_path / "new", "--dry-run", "-o", "json", cwd=tmp_path)
    assert dry.exit_code == 0 and not (tmp_path / "new").exists()
    assert str(tmp_path / "new" / "opsctl.yaml") in json.loads(dry.stdout)["files"]
    forced = run_opsctl("init", tmp_path, "--force", cwd=tmp_path)
    assert forced.exit_code == 0 and "# Written by `opsctl init`" in (tmp_path / "opsctl.yaml").read_text()
