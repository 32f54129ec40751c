"""The README's Quickstart: exactly two command lines, the first making the virtual environment a
stock Debian/Ubuntu Python needs before any `pip install`, the second the test command CI runs."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def quickstart() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def test_the_quickstart_is_two_lines_and_makes_a_virtual_environment_before_pip():
    first, second = quickstart()
    steps = [s.strip() for s in first.split("&&")]
    assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"]
    assert any(s.startswith("python3 -m pip install") for s in steps[2:])
    assert steps[-1] == "opsctl drill run chaos/vendor-outage.yaml"
    assert second.startswith("python3 -m pip install -q -e '.[test]' && python3 -m pytest")


def test_ci_runs_exactly_the_quickstarts_lines_read_from_the_readme():
    """.ci/run reads the Quickstart block with its own awk (the README is the one copy) and runs each
    line it reads: the same two lines this file reads."""
    ci = (REPO / ".ci" / "run").read_text()
    [awk] = [line for line in ci.splitlines() if line.startswith("mapfile -t quickstart < <(awk ")]
    program = awk.split("awk '", 1)[1].rsplit("' README.md)", 1)[0]
    read = subprocess.run(["awk", program, "README.md"], cwd=REPO, capture_output=True, text=True, check=True)
    assert read.stdout.splitlines() == quickstart()
    assert 'eval "${quickstart[$i]}"' in ci


def test_the_venv_step_works_with_this_python(tmp_path):
    """The first two steps as written, with this interpreter for `python3` and `--without-pip` (pip
    itself is the network's business): afterwards `python3` is the environment's own."""
    first, _ = quickstart()
    make, activate = [s.strip() for s in first.split("&&")[:2]]
    make = make.replace("python3 -m venv", f"{sys.executable} -m venv --without-pip", 1)
    script = f"cd {tmp_path} && {make} && {activate} && python3 -c 'import sys; print(sys.prefix)'"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / ".venv")
