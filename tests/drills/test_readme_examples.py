"""The README's drill examples run as shown on the shipped config, from a directory outside the repository."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO


def builtin_state() -> Path:
    """Where the built-in default keeps its state: $XDG_STATE_HOME/opsctl/<service> (a test's own)."""
    return Path(os.environ["XDG_STATE_HOME"]) / "opsctl" / "llm-inference"


def drill_lines() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    block = text.split("### Game-day drills", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#", 1)[0])[1:] for line in block.strip().splitlines()]


@pytest.mark.slow
def test_the_readme_live_dry_run_example_works_on_the_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [live] = [args for args in drill_lines() if "--live" in args and "--chain" not in args]
    assert "--dry-run" in live
    seeded = invoke("sim", "generate", "--days", "3", "-o", "json")  # the live preflight reads these metrics
    assert seeded.exit_code == 0, seeded.output
    result = invoke(*live)
    assert result.exit_code == 0, result.output
    assert re.search(r"^  ok  no burn-rate alert firing: none firing on embedded store", result.stdout, re.M)
    assert result.stdout.rstrip().endswith("nothing was changed")
    assert not (builtin_state() / "drills").exists(), "a dry run creates no run directory"


@pytest.mark.slow
def test_the_readme_live_chain_dry_run_shows_every_step_and_names_what_the_shipped_config_lacks(tmp_path, monkeypatch):
    """The live chain example runs against the user's own systems: on the shipped config its dry run lists the
    steps, changes nothing and is refused by preflight (exit 4) naming each setting still to give."""
    monkeypatch.chdir(tmp_path)
    [chain] = [args for args in drill_lines() if "--live" in args and "--chain" in args]
    assert "--dry-run" in chain
    result = invoke(*chain)
    assert result.exit_code == 4, result.output
    assert "nothing was started or changed" in result.stdout
    for missing in ("drills.live.fault_namespaces", "drills.live.alertmanager_url", "drills.live.serve_url"):
        assert missing in result.stderr
    assert not (builtin_state() / "drills").exists(), "a dry run creates no run directory"
