"""Every shipped drill scenario has the runbook it rehearses: generated from the default config
(runbooks/scenario-<name>.md, or the one its `runbook:` names) and committed, so a drill report links
to it (drills/report.py `_runbook`) and an on-call engineer finds it."""

from __future__ import annotations

import pytest
import yaml

from opsctl.runbooks.generator import SCENARIOS
from tests.conftest import REPO

SHIPPED = sorted((REPO / "opsctl" / "defaults" / "chaos").glob("*.yaml"))


def test_the_shipped_scenarios_are_found():
    assert len(SHIPPED) >= 8


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_shipped_scenario_has_its_runbook_generated_and_committed(path):
    runbook = yaml.safe_load(path.read_text()).get("runbook") or path.stem
    assert runbook in {s.name for s in SCENARIOS}, f"{path.name}: no runbook scenario {runbook!r} in the generator"
    assert (REPO / "runbooks" / f"scenario-{runbook}.md").is_file(), f"{path.name}: runbooks/scenario-{runbook}.md"
