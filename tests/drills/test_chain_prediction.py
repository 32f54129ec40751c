"""The chain drill's prediction from the fault (drills/prediction.py): the burn each SLO sees, each page
tier's time to fire on the drill's own rules, the page after Alertmanager's group_wait, and the
timeout derived from it when --chain-timeout is not given. Every expected number is worked by hand
from the shipped opsctl.yaml, slos/, deploy/alertmanager.yml and chaos/vendor-outage.yaml."""

from __future__ import annotations

import math

import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.drills.chain.report import chain_prediction_measured
from opsctl.drills.chain.startup import _longest_group_wait
from opsctl.drills.chain.setup import Shortened, drill_config, drill_routing
from opsctl.drills.fault_model import fault_burns
from opsctl.drills.prediction import CHAIN_MARGIN, chain_prediction, derived_timeout
from opsctl.drills.report_model import Measurements
from opsctl.drills.scenario import load_scenario
from opsctl.slo.loading import load_slos
from opsctl.slo.rule_plan import RuleSettings, plan_rules
from tests.cli.inprocess import invoke
from tests.conftest import REPO
from tests.drills.conftest import CHAOS

SPLIT = {"internal": 20.0, "databricks": 80.0}  # opsctl.yaml's traffic.default_split


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """The chain drill's own config and routing, built as the runner builds them."""
    d = tmp_path_factory.mktemp("chain")
    user = load_config_file(REPO / "opsctl.yaml")
    raw = drill_config(user, d, prometheus_url="http://127.0.0.1:9", token_file=d / "token", shortened=Shortened())
    (d / "opsctl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config_file(d / "opsctl.yaml")
    plans = plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
    for name in ("key", "serve", "bridge"):
        (d / name).write_text("x")
    am, _ = drill_routing(yaml.safe_load((REPO / "deploy" / "alertmanager.yml").read_text()),
                          pagerduty_url="http://127.0.0.1:9", routing_key_file=d / "key",
                          serve_url="http://127.0.0.1:9", serve_token_file=d / "serve",
                          bridge_url="http://127.0.0.1:9", bridge_token_file=d / "bridge", shortened=Shortened())
    return plans, am


def _vendor_outage():
    scenario = load_scenario(CHAOS / "vendor-outage.yaml")
    [step] = [s for s in scenario.method if s.action == "inject-fault"]
    return step.fault


def test_the_burn_from_the_fault_is_its_error_share_over_the_budget_times_the_traffic_share(chain):
    plans, _ = chain
    fault = _vendor_outage()
    assert (fault.kind, fault.params["rate"]) == ("vendor-5xx", 0.1)
    burns = {b.slo.rsplit("llm-inference-", 1)[-1]: b.burn
             for b in fault_burns(plans, fault.kind, dict(fault.params), "databricks", SPLIT)}
    # goal 0.9999 (slos/*-availability.yaml): budget 1e-4. Databricks' own SLO: 0.1 / 1e-4 = 1000x;
    # the service's: 0.1 x 80% / 1e-4 = 800x; internal's sees nothing of a databricks fault.
    assert burns == {"databricks-availability": pytest.approx(1000.0), "service-availability": pytest.approx(800.0)}


def test_vendor_outage_predicted_on_the_chain_drills_rules_by_hand(chain):
    plans, am = chain
    fault = _vendor_outage()
    # deploy/alertmanager.yml's group_waits 30s, 1s, 5s, 30s, 5m, 10s, each shortened to at most 2 s.
    group_wait = _longest_group_wait(am["route"])
    assert group_wait == 2
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-availability", group_wait=group_wait)
    assert pred is not None
    assert pred.slo == "llm-inference-databricks-availability" and pred.burn == pytest.approx(1000.0)
    # The chain evaluates every 10 s; page for: 2m at a 1m interval scales to 2m x 10/60 = 20 s.
    # Factors over the 28-day period (672 h): 2% of the budget in 1h -> 0.02 x 672 = 13.44,
    # 5% in 6h -> 0.05 x 672 / 6 = 5.6; the fast tier's 300 (opsctl.yaml alerting.fast, for: 0).
    grid = 10

    def fires(factor, long_seconds, for_seconds):
        return math.ceil(factor * long_seconds / 1000 / grid) * grid + for_seconds

    expected = {("1h", "5m"): fires(0.02 * 672, 3600, 20),   # 48.4 s -> 50 s, + 20 s = 70 s
                ("6h", "30m"): fires(0.05 * 672 / 6, 21600, 20),  # 121 s -> 130 s, + 20 s = 150 s
                ("5m", "1m"): fires(300, 300, 0)}  # 90 s
    assert expected == {("1h", "5m"): 70, ("6h", "30m"): 150, ("5m", "1m"): 90}
    got = {(t.long, t.short): t.predicted_seconds for t in pred.tiers}
    assert got == expected
    assert pred.predicted_detection_seconds == 70 and pred.predicted_page_seconds == 72
    assert {h.hop: h.predicted_seconds for h in pred.hops} == \
        {"detect": 70, "page": 72, "mitigate": None, "ticket": None}
    # --chain-timeout not given: the predicted page + the stated margin.
    assert CHAIN_MARGIN == 180
    assert derived_timeout(pred, 240) == (252, "predicted page 72s + margin 180s")


def test_a_fault_with_no_error_share_nor_slowdown_predicts_nothing_and_keeps_the_default_timeout(chain):
    plans, _ = chain
    # a quality regression fails nothing and slows nothing: no burn-rate maths to set beside it
    pred = chain_prediction(plans, "quality-regression", {"rate": 0.3}, "databricks", SPLIT,
                            slo=None, group_wait=2, kinds={"databricks": "vendor", "internal": "internal"},
                            load=0.5, peak_rps=200)
    assert pred is None
    assert derived_timeout(pred, 240) == (240, "no prediction for this fault: the default 240s")


def test_the_report_sets_each_hops_prediction_beside_its_measured_time(chain):
    plans, _ = chain
    fault = _vendor_outage()
    pred = chain_prediction(plans, fault.kind, dict(fault.params), "databricks", SPLIT,
                            slo="llm-inference-databricks-availability", group_wait=2)
    measured = {"time_to_detect": 63.2, "time_to_page": 66.0, "time_to_mitigate": 64.1, "time_to_vendor_routing": 64.5}
    section = chain_prediction_measured(pred, Measurements(**measured))
    assert section is not None and section.measured_detection_seconds == 63.2
    assert [(h.hop, h.predicted_seconds, h.seconds) for h in section.hops] == \
        [("detect", 70, 63.2), ("page", 72, 66.0), ("mitigate", None, 64.1), ("ticket", None, 64.5)]


def test_drill_run_help_states_how_the_chain_timeout_is_derived():
    result = invoke("drill", "run", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "burn-rate maths predicts from the fault" in text and "plus a 3m margin" in text
