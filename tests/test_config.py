"""Config: discovery order, the built-in default, and every kind of bad input failing with exit 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.conftest import REPO, write_config


def test_builtin_default_is_used_without_a_config_file(opsctl, tmp_path):
    result = opsctl("config", "show", "-o", "json", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert '"internal"' in result.stdout and '"databricks"' in result.stdout
    import os

    assert str(Path(os.environ["XDG_STATE_HOME"]) / "opsctl" / "llm-inference") in result.stdout
    assert str(tmp_path / ".opsctl") not in result.stdout


def test_config_flag_beats_environment_and_local_file(opsctl, tmp_path):
    (tmp_path / "opsctl.yaml").write_text("service: from-local-file\nbackends: {a: {kind: internal}}\n")
    env_cfg = tmp_path / "env.yaml"
    env_cfg.write_text("service: from-env\nbackends: {a: {kind: internal}}\n")
    flag_cfg = tmp_path / "flag.yaml"
    flag_cfg.write_text("service: from-flag\nbackends: {a: {kind: internal}}\n")
    assert "from-local-file" in opsctl("config", "show", cwd=tmp_path).stdout
    assert "from-env" in opsctl("config", "show", cwd=tmp_path, env={"OPSCTL_CONFIG": str(env_cfg)}).stdout
    shown = opsctl("--config", str(flag_cfg), "config", "show", cwd=tmp_path, env={"OPSCTL_CONFIG": str(env_cfg)})
    assert "from-flag" in shown.stdout


def test_yaml_syntax_error_names_file_and_line(opsctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("service: x\nbackends:\n  a: {kind: internal\n  b: [\n")
    result = opsctl("--config", str(bad), "config", "validate")
    assert result.exit_code == 2
    assert str(bad) in result.stderr and "line" in result.stderr


def test_unknown_key_wrong_type_and_bad_value_are_all_reported_with_key_paths(opsctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        service: x
        backends: {a: {kind: gpu}}
        metrics:
          source: embedded
          prometheus: {url: "http://p:9090", timeout: "fast", tiemout: 3}
        slos: {period: 0d}
        """))
    result = opsctl("--config", str(bad), "config", "validate")
    assert result.exit_code == 2
    err = result.stderr
    assert "backends.a.kind: must be one of 'internal', 'vendor'" in err
    assert "metrics.prometheus.timeout: expected a number" in err
    assert "metrics.prometheus.tiemout: unknown key" in err
    assert "slos: period must be between 1d and 400d" in err


def test_missing_config_file_is_a_usage_error(opsctl, tmp_path):
    result = opsctl("--config", str(tmp_path / "nope.yaml"), "config", "validate")
    assert result.exit_code == 2
    assert "not found" in result.stderr


def test_show_redacts_secrets_to_their_location(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    text = cfg.read_text().replace(
        'timeout: 5,', 'timeout: 5, auth: {bearer_token: {env: PROM_TOKEN}},'
    )
    cfg.write_text(text)
    result = opsctl("--config", str(cfg), "config", "show", "-o", "yaml", env={"PROM_TOKEN": "s3cr3t-value"})
    assert result.exit_code == 0, result.output
    assert "PROM_TOKEN" in result.stdout
    assert "s3cr3t-value" not in result.output


def test_repository_default_validates(opsctl):
    result = opsctl("--config", str(REPO / "opsctl.yaml"), "config", "validate")
    assert result.exit_code == 0, result.output


def test_help_does_not_import_heavy_clients():
    import subprocess
    import sys

    code = (
        "import sys; from opsctl.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('kubernetes', 'pagerduty', 'slo_generator', 'numpy', 'starlette') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


def test_duplicate_keys_are_refused_with_their_line(opsctl, tmp_path):
    bad = tmp_path / "dup.yaml"
    bad.write_text("service: a\nbackends: {a: {kind: internal}}\nservice: b\n")
    result = opsctl("--config", str(bad), "config", "validate")
    assert result.exit_code == 2
    assert "duplicate key 'service'" in result.stderr and "line 3" in result.stderr
