"""The chain drill's prediction section, pinned before drills/prediction.py built the typed
`report_burn.Prediction` (#26 item 1): for every shipped scenario with a fault, what the chain
runner predicts from it on the chain drill's own config and routing (`ChainDrill._predict`: the
burns, the tiers, the page, and the mitigate and ticket hops through the drill's routing tree to
serve), in chain and in live-chain mode, and the section the chain report writes with measured
times beside it (`chain_prediction_measured`), byte for byte as the code before wrote them as JSON
(commit 696bbb1). Also the two cases that add a `note` and a `no_page`.
To write them again (only for a deliberate change): OPSCTL_PIN_WRITE=1 pytest this file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.drills.chain.report import chain_prediction_measured
from opsctl.drills.chain.setup import Shortened, drill_config, drill_routing
from opsctl.drills.prediction import chain_prediction
from opsctl.drills.report_model import Measurements
from opsctl.drills.scenario import default_backend, load_scenario
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.conftest import REPO
from tests.drills.conftest import CHAOS, SHIPPED

PINS = Path(__file__).with_name("chain_prediction_pins")
WRITE = os.environ.get("OPSCTL_PIN_WRITE") == "1"
ONSET = 1795028400.0  # 2026-11-18T19:00:00Z, the weekly profile's peak
MEASURED = {"time_to_detect": 63.2, "time_to_page": 66.0, "time_to_mitigate": 64.1, "time_to_vendor_routing": 64.5}
SPLIT = {"internal": 20.0, "databricks": 80.0}
KINDS = {"databricks": "vendor", "internal": "internal"}
# the single-fault scenarios (a multi-fault one, both-degraded, is predicted over all its faults:
# tests/drills/test_prediction_every_fault.py)
FAULTED = [n for n in SHIPPED if sum(s.action == "inject-fault" for s in load_scenario(CHAOS / f"{n}.yaml").method) == 1]


def check_pinned(name: str, value) -> None:
    text = json.dumps(value, indent=2) + "\n"
    path = PINS / f"{name}.json"
    if WRITE:
        PINS.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs from what the code wrote before"


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """The chain drill's own config and routing, built as the runner builds them."""
    d = tmp_path_factory.mktemp("chain")
    user = load_config_file(REPO / "opsctl.yaml")
    raw = drill_config(user, d, prometheus_url="http://127.0.0.1:9", token_file=d / "token", shortened=Shortened())
    (d / "opsctl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config_file(d / "opsctl.yaml")
    for name in ("key", "serve", "bridge"):
        (d / name).write_text("x")
    am, _ = drill_routing(yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text()),
                          pagerduty_url="http://127.0.0.1:9", routing_key_file=d / "key",
                          serve_url="http://127.0.0.1:9", serve_token_file=d / "serve",
                          bridge_url="http://127.0.0.1:9", bridge_token_file=d / "bridge", shortened=Shortened())
    return user, cfg, am


@pytest.mark.parametrize("mode", ["chain", "live-chain"])
@pytest.mark.parametrize("name", FAULTED)
def test_the_chain_runners_prediction_is_what_the_code_before_wrote(chain, name, mode):
    from opsctl.drills.chain.runner import ChainDrill

    user, cfg, am = chain
    scenario = load_scenario(CHAOS / f"{name}.yaml")
    [step] = [s for s in scenario.method if s.action == "inject-fault"]
    drill = ChainDrill(scenario, user, routing=None, timeout=None)
    drill.cfg, drill.group_wait, drill.mode, drill.routing = cfg, 2.0, mode, am
    drill.serve_receivers = frozenset(r["name"] for r in am["receivers"] if any(
        h.get("url", "").rstrip("/").endswith("/v1/alertmanager") for h in r.get("webhook_configs") or []))
    assert drill.serve_receivers  # the routing reaches serve: the response hops are predicted
    backend = step.fault.backend or default_backend(step.fault.kind, cfg)
    pred = drill._predict({"backend": backend, "on_at": ONSET})
    section = chain_prediction_measured(pred, Measurements(**MEASURED))
    check_pinned(f"{name}.{mode}", section.to_dict() if section is not None else {})


def test_a_note_and_a_no_page_are_written_as_before(chain):
    _, cfg, _ = chain
    plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
    [step] = [s for s in load_scenario(CHAOS / "vendor-latency.yaml").method if s.action == "inject-fault"]
    for name, rps in (("note", 2), ("no-page", 1.5)):
        pred = chain_prediction(plans, step.fault.kind, dict(step.fault.params), "databricks", SPLIT,
                                slo="llm-inference-databricks-latency-1s", group_wait=2, kinds=KINDS, load=0.6,
                                peak_rps=rps)
        section = chain_prediction_measured(pred, Measurements(**MEASURED))
        check_pinned(name, section.to_dict() if section is not None else {})
