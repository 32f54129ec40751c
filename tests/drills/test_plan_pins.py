"""What `drill run --dry-run`, `drill list` and `drill validate` print, pinned before the drill CLI's
logic moved down into drills/ (#26 item 4): for every shipped scenario the dry run's plan as JSON
and as text, and the scenario list and validation as JSON and as a table, byte for byte as the code
before wrote them (commit 696bbb1), with the temp dir and the repository's path replaced.
To write them again (only for a deliberate change): OPSCTL_PIN_WRITE=1 pytest this file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.drills.conftest import SHIPPED, DrillEnv

PINS = Path(__file__).with_name("plan_pins")
WRITE = os.environ.get("OPSCTL_PIN_WRITE") == "1"


def check_pinned(name: str, text: str, env: DrillEnv) -> None:
    text = text.replace(str(env.root), "/_ROOT_").replace(str(REPO), "/_REPO_")
    path = PINS / name
    if WRITE:
        PINS.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs from what the code wrote before"


@pytest.mark.parametrize("output", ["json", "table"])
@pytest.mark.parametrize("scenario", SHIPPED)
def test_a_dry_runs_plan_is_what_the_code_before_printed(tmp_path, scenario, output):
    env = DrillEnv(tmp_path)
    result = env.run("drill", "run", scenario, "--dry-run", "-o", output)
    assert result.exit_code == 0, result.stderr
    check_pinned(f"{scenario}.{output}", result.stdout, env)
    assert not env.runs()  # a dry run starts nothing


@pytest.mark.parametrize("output", ["json", "table"])
def test_a_dry_run_that_preflight_would_refuse_prints_its_plan_and_exits_4(tmp_path, output):
    env = DrillEnv(tmp_path)
    assert env.run("page", "trigger", "-s", "vendor errors (real)", "--source", "oncall").exit_code == 0
    result = env.run("drill", "run", "vendor-outage", "--dry-run", "-o", output)
    assert result.exit_code == 4, result.stderr
    check_pinned(f"refused.{output}", result.stdout, env)
    assert result.stderr.startswith("error: preflight would refuse this drill: 1 real incident(s) open")


@pytest.mark.parametrize("output", ["json", "table"])
def test_drill_list_and_validate_print_what_the_code_before_printed(tmp_path, output):
    """On copies of the shipped scenarios under the working directory (so a table's widths do not
    depend on where the repository is)."""
    env = DrillEnv(tmp_path)
    (tmp_path / "chaos").mkdir()
    for name in SHIPPED:
        (tmp_path / "chaos" / f"{name}.yaml").write_text((REPO / "chaos" / f"{name}.yaml").read_text())
    for name, args, code in (("list", ("drill", "list", "chaos"), 0), ("validate", ("drill", "validate", "chaos"), 0),
                             ("validate-live", ("drill", "validate", "chaos", "--live"), 2)):
        result = env.run(*args, "-o", output)
        assert result.exit_code == code, result.stderr
        check_pinned(f"{name}.{output}", result.stdout, env)


@pytest.mark.parametrize("output", ["json", "table"])
@pytest.mark.parametrize("name, args, code", [
    ("chain", ("--routing", str(REPO / "deploy" / "alertmanager.yml")), 0),
    ("chain-timeout", ("--routing", str(REPO / "deploy" / "alertmanager.yml"), "--chain-timeout", "5m"), 0),
    # no --routing: the routing generated from the config's policies (decisions/0230), not a file beside it
    ("chain-generated-routing", (), 0),
])
def test_a_chain_dry_runs_plan_is_what_the_code_before_printed(tmp_path, name, args, code, output):
    """The chain's plan (drills/chain/plan.py) goes through the same rendering in the CLI."""
    env = DrillEnv(tmp_path)
    result = env.run("drill", "run", "vendor-outage", "--chain", "--dry-run", *args, "-o", output)
    assert result.exit_code == code, result.stderr
    check_pinned(f"{name}.{output}", result.stdout, env)
    assert not env.runs()


def test_the_dry_run_plan_is_a_typed_record_that_says_what_it_would_refuse(tmp_path):
    """drills/plan.py builds a `DryRunPlan` (the CLI renders its to_dict() and text()): its preflight
    is typed checks, and a refused plan names each refusal (the exit 4 message)."""
    from opsctl.config import load_config_file
    from opsctl.drills.plan import DryRunPlan, dry_run_plan
    from opsctl.drills.scenario import load_scenario

    env = DrillEnv(tmp_path)
    assert env.run("page", "trigger", "-s", "vendor errors (real)", "--source", "oncall").exit_code == 0
    previous = os.getcwd()
    os.chdir(tmp_path)
    try:
        plan = dry_run_plan(load_scenario(REPO / "chaos" / "vendor-outage.yaml"), load_config_file(env.config),
                            live=False)
    finally:
        os.chdir(previous)
    assert isinstance(plan, DryRunPlan) and plan.mode == "embedded" and plan.would_refuse
    assert [(c.name, c.ok) for c in plan.preflight] == [("no real incident open", False),
                                                          ("no burn-rate alert firing", True)]
    assert plan.refusals() == ["1 real incident(s) open: LP00001 'vendor errors (real)' (triggered)"]
    assert plan.to_dict()["would_refuse"] is True and plan.text().splitlines()[2].startswith("  REFUSED  ")
