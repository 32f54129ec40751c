"""The README's traffic examples run as written on the built-in default, also ten minutes after
`sim generate`: the metrics the guards read follow the clock (`sim generate --ahead`), not stop
at the instant they were generated. Ten minutes pass by OPSCTL_CLOCK_OFFSET, and the ramp's
soaks (`--interval 5m`) in simulated time (OPSCTL_CLOCK=simulated), never by sleeping."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.cli.inprocess import run_main
from tests.conftest import REPO

TEN_MINUTES = {"OPSCTL_CLOCK_OFFSET": "600", "OPSCTL_CLOCK": "simulated"}


def traffic_lines() -> list[list[list[str]]]:
    """Each line of the README's traffic block: its `&&`-joined commands, each as argv without `opsctl`."""
    text = (REPO / "README.md").read_text()
    block = text.split("### Traffic control", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.strip().splitlines():
        words = shlex.split(line, comments=True)
        commands, current = [], []
        for word in words + ["&&"]:
            if word == "&&":
                assert current[0] == "opsctl", line
                commands.append(current[1:])
                current = []
            else:
                current.append(word)
        lines.append(commands)
    return lines


@pytest.mark.slow
def test_the_readme_traffic_examples_run_as_written_ten_minutes_after_sim_generate(tmp_path):
    lines = traffic_lines()
    assert lines[0][0][:2] == ["sim", "generate"], "the block starts by generating the metrics it needs"
    [generate] = lines[0]
    seeded = run_main(generate, cwd=tmp_path)
    assert seeded.exit_code == 0, seeded.output
    ran = []
    for commands in lines[1:]:
        for argv in commands:
            result = run_main(argv, cwd=tmp_path, env=TEN_MINUTES)
            if argv[:2] == ["traffic", "failover"] and result.exit_code == 4:
                # as the README's exit codes say: the capacity guard let only part move (at this
                # hour the default's 6 replicas carry a little less than the whole service), and
                # what moved is applied, recorded and printed
                assert "PARTIAL" in result.stdout and "what moved is applied and recorded" in result.stderr, \
                    result.output
            else:
                assert result.exit_code == 0, f"`opsctl {shlex.join(argv)}`: {result.output}"
            ran.append(argv[:2])
    assert ["traffic", "ramp"] in ran and ["traffic", "restore"] in ran and ["traffic", "failover"] in ran
    # what the block did is what the record says: the ramp reached its target, the restore its saved split
    history = run_main(["traffic", "history", "--limit", "0", "-o", "json"], cwd=tmp_path, env=TEN_MINUTES)
    entries = json.loads(history.stdout)
    ramp_steps = [e for e in entries if e["action"] == "ramp"]
    # newest first. 25% plus the 10% mirror is what the default's 6 replicas x 40 requests/s carry at
    # its 500 requests/s peak with 25% headroom (240 / 1.25 / 500 = 38%): the block runs at any hour
    assert ramp_steps[0]["after"]["weights"] == {"internal": 25, "databricks": 75}
    failover = next(e for e in entries if e["action"] == "failover")
    restored = next(e for e in entries if e["action"] == "restore")
    assert restored["after"]["weights"] == failover["before"]["weights"]


@pytest.mark.slow
def test_without_data_ahead_the_guards_refuse_ten_minutes_later_which_is_why_the_readme_generates_ahead(tmp_path):
    """The check above has teeth: data that stops at `now` is stale ten minutes on (max_data_age 5m)."""
    seeded = run_main(["sim", "generate", "--days", "1"], cwd=tmp_path)
    assert seeded.exit_code == 0, seeded.output
    refused = run_main(["traffic", "set", "databricks=70", "internal=30", "--reason", "load test", "--yes"],
                       cwd=tmp_path, env=TEN_MINUTES)
    assert refused.exit_code == 4, refused.output
    assert "stale metrics" in refused.output


def test_a_simulated_clock_is_refused_where_traffic_really_moves(tmp_path):
    cfg = tmp_path / "opsctl.yaml"
    cfg.write_text((REPO / "opsctl.yaml").read_text().replace("  actuator: file", "  actuator: configmap", 1))
    result = run_main(["--config", str(cfg), "traffic", "ramp", "internal=50", "--reason", "x", "--yes"],
                      cwd=tmp_path, env={"OPSCTL_CLOCK": "simulated"})
    assert result.exit_code == 2, result.output
    assert "OPSCTL_CLOCK=simulated skips a ramp's soak" in result.stderr
