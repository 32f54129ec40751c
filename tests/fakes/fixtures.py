"""Shared test helpers: a trustme CA, configs written to a temp dir, and running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BASE_CONFIG = """\
service: llm-inference
backends:
  internal: {kind: internal}
  databricks: {kind: vendor, vendor: databricks}
state_dir: state
"""

FAST_RETRY = "{max_attempts: 4, base_delay: 0.01, max_delay: 0.05, deadline: 5, timeout: 3}"


@pytest.fixture(scope="session")
def ca():
    import trustme

    return trustme.CA()


@pytest.fixture
def ca_file(ca, tmp_path):
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def write_config(directory: Path, extra: str) -> Path:
    """BASE_CONFIG and `extra`, written by the suite's one config writer (tests/conftest.py)."""
    from tests.conftest import write_config as write

    return write(directory, extra, base=BASE_CONFIG)


def load(path: Path):
    from opsctl.config import load_config_file

    return load_config_file(path)


def run_cli(args: list[str], *, config: Path, env: dict[str, str] | None = None, timeout: float = 60,
            popen: bool = False):
    """Run `opsctl --config CONFIG ARGS...` as a user would, from the config's directory, with no
    OPSCTL_/PAGERDUTY_/ZENDESK_ variables but `env`'s. In this process (tests/cli/inprocess.py),
    returning a CompletedProcess; with popen=True a child `python -m opsctl` (Popen), for the tests
    that kill it mid-run (a crash needs a process of its own)."""
    cmd = ["--config", str(config), *map(str, args)]
    if popen:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(_UNSET)}
        full_env["PYTHONPATH"] = str(ROOT)
        full_env.update(env or {})
        return subprocess.Popen([sys.executable, "-m", "opsctl", *cmd], env=full_env, cwd=str(Path(config).parent),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    from tests.cli.inprocess import run_main

    result = run_main(cmd, env=env, cwd=Path(config).parent, unset=_UNSET)
    return subprocess.CompletedProcess(["opsctl", *cmd], result.exit_code, result.stdout, result.stderr)


_UNSET = ("OPSCTL_", "PAGERDUTY_", "ZENDESK_")
