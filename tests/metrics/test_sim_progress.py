"""`sim generate --openmetrics-out` says how big the export is, and shows its progress to a person
at a terminal (a self-rewriting stderr line), never to a script (-o json, or stderr not a TTY)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

from tests.cli.inprocess import invoke
from tests.conftest import REPO

ARGS = ["sim", "generate", "--days", "0.1", "--end", "2026-11-18T15:00:00Z", "--dry-run"]


def test_the_export_reports_progress_up_to_every_sample_and_byte(tmp_path):
    from opsctl.metrics import simulator

    series = simulator.simulate(1795100000, 1795100000 + 3600, seed=3)
    calls = []
    out = tmp_path / "x.om"
    samples = simulator.export_openmetrics(series, str(out), progress=lambda *a: calls.append(a))
    assert len(calls) > 2
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)
    assert all(c[1] == samples for c in calls)  # the total is known from the start
    assert calls[-1] == (samples, samples, out.stat().st_size)
    sample_lines = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    assert len(sample_lines) == samples


def test_the_size_is_said_and_a_script_gets_no_progress_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke(*ARGS, "--openmetrics-out", "h.om", "-o", "json")
    assert result.exit_code == 0, result.output
    size = os.path.getsize(tmp_path / "h.om")
    assert json.loads(result.stdout)["openmetrics_bytes"] == size
    assert f"({size / 1e6:.1f} MB) to h.om" in result.stderr
    assert "\r" not in result.stderr and "writing h.om" not in result.stderr
    table = invoke(*ARGS, "--openmetrics-out", "h.om")  # stderr is not a TTY here either
    assert f"openmetrics: h.om ({size / 1e6:.1f} MB)" in table.stdout and "\r" not in table.stderr


def run_with_tty_stderr(args, cwd) -> str:
    """Run the CLI with stderr on a pseudo-terminal; what the terminal received. A child process:
    its stderr must be a real terminal."""
    master, slave = pty.openpty()
    env = {**{k: v for k, v in os.environ.items() if k != "OPSCTL_CONFIG"}, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "opsctl", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=slave)
    os.close(slave)
    received = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                received += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        proc.wait(timeout=30)
    assert proc.returncode == 0, received
    return received.decode()


def test_a_person_at_a_terminal_sees_the_export_progress(tmp_path):
    seen = run_with_tty_stderr([*ARGS, "--openmetrics-out", "t.om"], tmp_path)
    assert "\rwriting t.om: " in seen and "100%" in seen
    quiet = run_with_tty_stderr([*ARGS, "--openmetrics-out", "t.om", "-o", "json"], tmp_path)
    assert "writing t.om" not in quiet and "OpenMetrics samples" in quiet
