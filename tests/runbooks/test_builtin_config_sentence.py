"""The runbooks generated from the built-in default say the commands need no config (there is no
file to run them from the directory of); those of a config file name its directory."""

from __future__ import annotations

from opsctl.config import load_config_file
from opsctl.runbooks.generator import generate, load_plans
from tests.conftest import write_config


def test_the_built_in_defaults_runbooks_say_no_config_is_needed(opsctl, tmp_path):
    out = tmp_path / "rb"
    result = opsctl("runbook", "generate", "--out", str(out), cwd=tmp_path)
    assert result.exit_code == 0, result.output
    text = (out / "scenario-vendor-outage.md").read_text()
    assert "the directory of `the built-in default config`" not in text
    assert "use opsctl's built-in default config: no `--config` or `OPSCTL_CONFIG` is needed" in text


def test_a_config_files_runbooks_name_its_directory(tmp_path):
    cfg = load_config_file(write_config(tmp_path))
    text = generate(cfg, load_plans(cfg))["scenario-vendor-outage.md"]
    assert "from the directory of `opsctl.yaml`, or point `OPSCTL_CONFIG` at it" in text
