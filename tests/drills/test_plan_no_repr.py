"""No Python repr in a dry run's plan (issue 37 item 7): for every shipped scenario, `drill run X
--dry-run` and `drill run X --chain --dry-run` (which starts no component) say a fault's parameters
and a split's weights as text (drills/text.py params_text, weights_text), in every output
(table, wide, json, yaml: json and yaml parsed, each string they hold checked)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from opsctl.drills.scenario import load_scenario
from tests.conftest import REPO
from tests.drills.conftest import CHAOS, SHIPPED, DrillEnv

# a dict's or a list's repr: `{'rate': 0.1}`, `['a', 'b']`, `{"rate": ...}` inside a string
REPR = re.compile(r"""[{\[]\s*['"]""")
ROUTING = str(REPO / "deploy" / "alertmanager.yml")
# Scenarios the chain refuses (opsctl/drills/chain/fit.py: no fault to send, or the quality rules' 1d look-back):
# their chain dry run still prints the whole plan, then exits 4 with the refusal in one line.
CHAIN_REFUSES = {"escalation-only": "needs a fault to send down the chain",
                 "quality-regression": "does not run quality scenarios"}


def _strings(value):
    """Every string a JSON document holds (its keys and values)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


@pytest.mark.parametrize("chain", [False, True], ids=["embedded", "chain"])
@pytest.mark.parametrize("scenario", SHIPPED)
def test_a_dry_runs_plan_prints_no_python_repr(tmp_path, scenario, chain):
    env = DrillEnv(tmp_path)
    args = ("--chain", "--routing", ROUTING) if chain else ()
    for output in ("table", "wide", "json", "yaml"):  # drill run's outputs (a report's md/html: drill report)
        result = env.run("drill", "run", scenario, "--dry-run", *args, "-o", output)
        refusal = CHAIN_REFUSES.get(scenario) if chain else None
        assert result.exit_code == (4 if refusal else 0), (output, result.stderr)
        assert refusal is None or refusal in result.stderr, result.stderr
        parsed = {"json": json.loads, "yaml": yaml.safe_load}.get(output)
        texts = list(_strings(parsed(result.stdout))) if parsed else [result.stdout]
        found = [t for t in texts if REPR.search(t)]
        assert not found, (output, found)
    assert not env.runs()  # a dry run starts nothing


def test_the_plan_says_a_faults_parameters_and_a_splits_weights_as_text(tmp_path):
    env = DrillEnv(tmp_path)
    chain = json.loads(env.run("drill", "run", "vendor-outage", "--dry-run", "--chain", "--routing", ROUTING,
                               "-o", "json").stdout)
    [fault] = load_scenario(CHAOS / "vendor-outage.yaml").faults
    assert dict(fault.params) == {"rate": 0.1}  # the scenario as written
    assert any("switch on vendor-5xx on databricks (rate=0.1) in" in m for m in chain["method"]), chain["method"]
    embedded = json.loads(env.run("drill", "run", "freeze-incident", "--dry-run", "-o", "json").stdout)
    assert any("routine traffic set databricks 70, internal 30 through" in m for m in embedded["method"]), (
        embedded["method"])
