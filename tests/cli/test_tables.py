"""Tables are for people (issue #27 item 9): no Python reprs, the terminal's width respected,
dry runs shown as the real run is, burn thresholds at 4 significant digits everywhere."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from opsctl.cli.output import cell, render_table
from tests.conftest import REPO, run_opsctl


@pytest.mark.parametrize("value, text", [
    (True, "yes"), (False, "no"), (None, "-"), (["llm-inference", "search"], "llm-inference, search"),
    ([], "-"), ({"databricks": 80, "internal": 20}, "databricks=80, internal=20"), (0.1 + 0.2, "0.3"), ("x", "x"),
])
def test_a_cell_is_never_a_python_repr(value, text):
    assert cell(value) == text


def test_a_table_wider_than_the_terminal_wraps_its_widest_columns_to_fit():
    reason = "restore after incident INC-123 (step 5/5) because the vendor recovered at last"
    table = render_table(["TIME", "ACTION", "REASON"], [["2026-12-01T10:11:37", "restore", reason]], width=50)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 50
    assert " ".join(" ".join(line[30:].split()) for line in lines[2:]) == reason  # every word kept, in order (REASON starts at 19+2+7+2)
    assert lines[2].startswith("2026-12-01T10:11:37  restore  ")  # unbreakable words stay whole


def test_a_table_in_a_pipe_is_never_cut():
    reason = "x " * 100
    assert reason.strip() in render_table(["REASON"], [[reason.strip()]])  # stdout is not a terminal here


def test_generic_tables_show_yes_no_and_dash(tmp_path):
    result = run_opsctl("page", "trigger", "-s", "databricks 5xx", "--component", "databricks", cwd=tmp_path)
    assert result.exit_code == 0, result.output
    assert "drill        no" in result.stdout and "False" not in result.stdout and "None" not in result.stdout


def test_page_trigger_dry_run_renders_the_table_the_real_run_renders(tmp_path):
    real = run_opsctl("page", "trigger", "-s", "databricks 5xx", "--component", "databricks", cwd=tmp_path)
    dry = run_opsctl("page", "trigger", "-s", "vendor 5xx", "--component", "databricks", "--dry-run", cwd=tmp_path)
    assert real.exit_code == 0 and dry.exit_code == 0, dry.output
    keys = lambda text: [line.split()[0] for line in text.splitlines() if line and not line.startswith(" ")]
    real_keys = keys(real.stdout)
    assert keys(dry.stdout)[:len(real_keys)] == real_keys  # the same rows, in the same order
    assert "dry_run      yes" in dry.stdout
    assert "request 1 of 1:" in dry.stdout  # then what would be sent


def test_drill_thresholds_print_four_significant_digits_like_every_other_output():
    from opsctl.drills.text import threshold_text
    from opsctl.slo.conventions import format_factor

    ticket_3d = 28 * 86400 * 0.1 / (3 * 86400)  # 10% of a 28-day budget over 3 days: 0.93333...
    assert threshold_text(ticket_3d) == "0.9333x" == f"{format_factor(ticket_3d)}x"
    assert threshold_text(13.44) == "13.44x" and threshold_text(6) == "6x"


def _on_a_terminal(columns: int, *args: str, env: dict, cwd) -> str:
    """`opsctl ARGS` with its standard output on a pseudo-terminal `columns` wide (a real tty)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "OPSCTL_CONFIG")}
    proc = subprocess.Popen([sys.executable, "-m", "opsctl", *args], stdout=follower, stderr=subprocess.DEVNULL, cwd=cwd,
                            env={**full, "PYTHONPATH": str(REPO), **env})
    os.close(follower)
    out = b""
    for _ in range(10_000):  # bounded: each read returns what the child wrote, EOF/EIO when it is gone
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    proc.wait(timeout=60)
    return out.decode().replace("\r", "")


@pytest.mark.slow
def test_traffic_history_fits_a_100_column_terminal(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    reason = "a long reason that a person typed to explain why this change was made during the incident"
    for weights in (["databricks=70", "internal=30"], ["databricks=80", "internal=20"]):
        done = run_opsctl("traffic", "set", *weights, "--emergency", "--incident", "INC-123", "--reason", reason,
                          "--shadow", "internal=10", "--yes", cwd=tmp_path, env=env)
        assert done.exit_code == 0, done.output
    text = _on_a_terminal(100, "traffic", "history", env=env, cwd=tmp_path)
    lines = text.splitlines()
    assert lines and max(len(line) for line in lines) <= 100, text
    assert lines[0].startswith("TIME (UTC)") and "30/70 -> 20/80" in text and "INC-123" in text
    assert "internal 30 / databricks 70" not in text  # the long form is for status, not the table
