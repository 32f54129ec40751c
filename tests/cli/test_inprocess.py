"""The in-process runner the CLI tests use answers as a separate `opsctl` process does, and leaves
this process as it found it. The child processes here are the point: they are the reference."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_opsctl, spawn_opsctl, write_config


@pytest.fixture
def bad_config(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("service: llm\nbackends: {a: {kind: sideways}}\n")
    return path


@pytest.mark.parametrize("argv", [
    ["--version"],
    ["--help"],
    ["nosuch"],
    ["slo"],  # a group without a command: its help, exit 2
    ["traffic", "set", "--bogus"],
    ["config", "validate", "--config", "BAD"],
    ["config", "validate", "--config", "MISSING"],
])
def test_exit_code_stdout_and_stderr_are_those_of_a_separate_process(argv, bad_config, tmp_path):
    argv = [str(bad_config) if a == "BAD" else str(tmp_path / "none.yaml") if a == "MISSING" else a for a in argv]
    inside, child = run_opsctl(*argv, cwd=tmp_path), spawn_opsctl(*argv, cwd=tmp_path)
    assert (inside.exit_code, inside.stdout, inside.stderr) == (child.exit_code, child.stdout, child.stderr)


def test_the_environment_cwd_and_input_reach_the_command_and_are_restored(tmp_path, monkeypatch):
    config = write_config(tmp_path)
    monkeypatch.setenv("OPSCTL_CONFIG", str(tmp_path / "not-this-one.yaml"))  # removed for the run, as documented
    before_env, before_cwd = dict(os.environ), os.getcwd()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_opsctl("config", "show", "-o", "json", env={"OPSCTL_CONFIG": str(config)}, cwd=elsewhere)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["service"] == "llm-inference"
    # ./opsctl.yaml of the working directory given is the one found without --config
    (elsewhere / "opsctl.yaml").write_text(config.read_text().replace("llm-inference", "from-cwd"))
    found = run_opsctl("config", "show", "-o", "json", cwd=elsewhere)
    assert json.loads(found.stdout)["service"] == "from-cwd", found.output
    assert dict(os.environ) == before_env and os.getcwd() == before_cwd


def test_logging_set_up_by_one_run_does_not_leak_into_the_next(tmp_path):
    """With shared (Kubernetes) state, `traffic set` writes a JSON change line to the stderr it starts
    with: each run's line reaches that run's stderr, and no handler outlives the run."""
    from tests.fakes.kube_api import FakeKubeAPI
    from tests.traffic.conftest import healthy_traffic, traffic_yaml, write_metrics

    api = FakeKubeAPI().start()
    try:
        api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "grammar-split", "namespace": "llm"},
                  "data": {"split.json": json.dumps({"weights": {"internal": 20, "databricks": 80}, "shadow": {}})}})
        config = write_config(tmp_path, traffic_yaml(
            actuator="configmap", freezes="freezes: []\nstate: {backend: kubernetes, namespace: llm}",
            extra_traffic=f'kubernetes: {{host: "{api.url}", namespace: llm, timeout: 5}}\n'
                          "configmap: {name: grammar-split, key: split.json}\n"))
        write_metrics(tmp_path / "state" / "metrics.sqlite", healthy_traffic())
        before = _handlers()
        for internal in (30, 40):
            result = run_opsctl("--config", str(config), "traffic", "set", f"internal={internal}",
                                f"databricks={100 - internal}", "--reason", "x", "--yes", cwd=tmp_path)
            assert result.exit_code == 0, result.output
            lines = [json.loads(line) for line in result.stderr.splitlines() if '"opsctl.traffic.change"' in line]
            assert [line["after"]["weights"]["internal"] for line in lines] == [internal], result.stderr
        assert _handlers() == before
    finally:
        api.stop()


def _handlers() -> dict:
    return {name: list(lg.handlers) for name, lg in logging.Logger.manager.loggerDict.items()
            if isinstance(lg, logging.Logger) and lg.handlers}


def test_the_installed_console_script_answers_like_the_module():
    script = shutil.which("opsctl")
    if script is None:
        pytest.skip("the opsctl console script is not installed")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([script, "--version"], capture_output=True, text=True, env=env, timeout=60)
    inside = run_opsctl("--version")
    assert (proc.returncode, proc.stdout) == (inside.exit_code, inside.stdout)
    assert sys.executable  # the module runs under this interpreter (spawn_opsctl), the script under its own
