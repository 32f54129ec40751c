"""The confirmation prompt of a traffic change lists all five guards, as `--dry-run` shows them
(issue 35 item 5): bounds, freeze, rate and budget checked, capacity previewed read only (it runs
for real, and may scale, once confirmed). Asked in a real interactive bash under tmux."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.cli.test_completion_shells import BIN, _tmux, _wait_for
from tests.conftest import write_config

CAPACITY = "capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}\n"


@pytest.mark.slow
def test_the_prompt_previews_capacity_beside_the_policy_guards(tmp_path):
    tmux = _tmux()
    cfg = write_config(tmp_path, CAPACITY)
    opsctl = str(BIN / "opsctl")
    subprocess.run([opsctl, "--config", cfg, "sim", "generate", "--days", "1", "--ahead", "1d", "--peak-rps", "500"],
                   check=True, capture_output=True, timeout=120)
    session = f"opsctl-prompt-{os.getpid()}-{time.monotonic_ns()}"
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm", "PS1": "$ "}
    subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "250", "-y", "50", "-c", str(tmp_path),
                    "env", "-i", *[f"{k}={v}" for k, v in env.items()], "bash", "--norc", "--noprofile"],
                   check=True, timeout=20)
    try:
        def type_keys(*keys: str) -> None:
            subprocess.run([tmux, "send-keys", "-t", session, *keys], check=True, timeout=10)

        type_keys(f"opsctl --config {cfg} traffic set internal=90 databricks=10 --reason prompt-test", "Enter")
        screen = _wait_for(tmux, session, "Apply?")
        guards = [line.split()[:2] for line in screen.splitlines() if line.startswith("  ok ")]
        assert [g[1] for g in guards] == ["bounds", "freeze", "rate", "budget", "capacity"], screen
        [capacity] = [line for line in screen.splitlines() if line.startswith("  ok ") and " capacity " in line]
        # 10 static replicas x 150 rps carry 1500 rps: 90% of the simulated traffic fits
        assert "internal carries 90%: 10 ready x 150 rps = 1500 rps" in capacity
        assert capacity.rstrip().endswith("(preview, read only: checked again once confirmed)")
        type_keys("n", "Enter")
        _wait_for(tmux, session, "not confirmed; nothing changed")
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], timeout=10)
    assert not (tmp_path / "state" / "traffic" / "split.json").exists()
