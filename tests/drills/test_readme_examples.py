"""The README's drill examples run as shown on the shipped config, from a directory outside the repository."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.cli.inprocess import invoke
from tests.conftest import REPO


def drill_lines() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    block = text.split("### Game-day drills", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("#", 1)[0])[1:] for line in block.strip().splitlines()]


@pytest.mark.slow
def test_the_readme_live_dry_run_example_works_on_the_shipped_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [live] = [args for args in drill_lines() if "--live" in args]
    assert "--dry-run" in live
    seeded = invoke("sim", "generate", "--days", "3", "-o", "json")  # the live preflight reads these metrics
    assert seeded.exit_code == 0, seeded.output
    result = invoke(*live)
    assert result.exit_code == 0, result.output
    assert re.search(r"^  ok  no burn-rate alert firing: none firing on embedded store", result.stdout, re.M)
    assert result.stdout.rstrip().endswith("nothing was changed")
    assert not (tmp_path / ".opsctl" / "drills").exists(), "a dry run creates no run directory"
