"""The chain drill's report as chain/report.py builds it from the phases' results, pinned before it
built the typed report directly (#26 item 1): a chain whose every hop happened (with the prediction
made from the fault, the attribution, the budget and a failed rollback) and a chain broken at the
PagerDuty hop (no prediction, no budget, a scenario expectation past its deadline), written as
report.json and report.md byte for byte as the code before wrote them (commit 3d7e01b, whose
chain_report built a dict parsed by DrillReport.parse). The hops, times and evidence are made up
here; nothing is started. OPSCTL_PIN_WRITE=1 writes them again (only for a deliberate change).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from opsctl.drills.chain.hops import ORDER, Hop
from opsctl.drills.phases import Facts, HopSignals, PhaseResult, ProbeResult, Results, Rollback, Steady
from opsctl.drills.report_burn import Budget, BudgetRow, Prediction
from opsctl.drills.safety import Check
from opsctl.drills.scenario import load_scenario
from tests.conftest import REPO
from tests.drills.conftest import CHAOS

PINS = Path(__file__).with_name("chain_report_pins")
WRITE = os.environ.get("OPSCTL_PIN_WRITE") == "1"
T0 = 1795028400.0


def check_pinned(name: str, text: str) -> None:
    text = text.replace(str(REPO), "/_REPO_")
    path = PINS / name
    if WRITE:
        PINS.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{path.name} differs from what the code wrote before"


def _drill(scenario: str):
    state = SimpleNamespace(run_id=f"20261118T185900Z-{scenario}-0000", mode="chain",
                            data={"started_at": T0 - 60, "finished_at": T0 + 400,
                                  "window": {"start": T0, "end": T0 + 300}})
    timeline = [{"at": T0 + 0.5, "phase": "method", "kind": "fault", "message": "vendor-5xx on databricks"},
                {"at": T0 - 30, "phase": "setup", "kind": "setup", "message": "Prometheus ready"},
                {"at": T0 + 70, "phase": "method", "kind": "hop", "message": "rule-firing"}]
    return SimpleNamespace(scenario=load_scenario(CHAOS / f"{scenario}.yaml"), state=state, mode="chain", t0=T0,
                           timeline=timeline)


def _hops(broken: str | None) -> dict:
    hops = {}
    for i, key in enumerate(ORDER):
        hop = Hop(key, required=key != "rule-pending")
        if broken is None or ORDER.index(key) < ORDER.index(broken):
            hop.reach(T0 + 10.0 * i + 0.25, f"{key} seen")
        else:
            hop.last = f"last seen before {key}"
        hops[key] = hop
    if broken is None:
        hops["pagerduty"].title_seen = "[DRILL] SloBurnRatePage databricks: server_error"
    else:
        hops[broken].failed = "the route sends the page nowhere"
    return hops


def _observations(broken: str | None):
    """What the components showed, in the Judge's shape (chain/observed.py), matching `_hops`: the
    fast page at T0+20, PagerDuty's incident at T0+40, the failover at T0+70, the ticket at T0+90
    (a chain broken at PagerDuty: only the alert)."""
    from opsctl.drills.chain.alert_seen import ChainAlert
    from opsctl.drills.expectations import Observations, PageSeen, TicketSeen

    alert = ChainAlert("SloFastBurnPage", "llm-inference-databricks-availability", "databricks", "page", "server_error",
                       "5m/1m")
    obs = Observations(t0=T0, method_done=True, first_firing={(alert.slo, "page", "5m/1m:SloFastBurnPage"): (T0 + 20,
                                                                                                               alert)})
    if broken is None:
        obs.pages = [PageSeen("k1", T0 + 40, "[DRILL] SloBurnRatePage databricks: server_error")]
        obs.paged_at, obs.page_title = T0 + 40, obs.pages[0].title
        obs.acknowledged_at = T0 + 80
        obs.failovers = obs.moves = [{"ts": T0 + 70, "action": "failover", "outcome": "applied", "overrides": [],
                                      "actor": "automation", "before": {"weights": {"databricks": 80, "internal": 20}},
                                      "after": {"weights": {"databricks": 0, "internal": 100}}}]
        obs.tickets = [TicketSeen("databricks", "inference", T0 + 90, "LT00001", T0 + 90, "Model Serving", "inference",
                                  tags=("drill",))]
    return obs


def _judgement(broken: str | None, hops: dict):
    from opsctl.drills.chain.observed import judge
    from opsctl.drills.phases import Judgement

    verdicts = tuple(judge(load_scenario(CHAOS / "vendor-outage.yaml"), _observations(broken),
                           lambda name: f"llm-inference-{name}", T0 + 300))
    failed = [f"hop {h.key}" for h in hops.values() if h.required and not h.passed]
    return Judgement(verdicts=verdicts, failed=tuple(failed + [v.name for v in verdicts if not v.passed and v.evaluated]))


def _results(broken: str | None, prediction: Prediction | None, budget: Budget | None) -> Results:
    phases = (PhaseResult(phase="preflight", status="ok", started=T0 - 60, ended=T0 - 50),
              PhaseResult(phase="method", status="ok", started=T0 - 50, ended=T0 + 300))
    checks = (Check("promtool on PATH", True, "/usr/bin/promtool"), Check("routing file", True, "alertmanager.yml"))
    facts = {"prometheus": "http://127.0.0.1:9999", "shortened": [
        {"where": "alerting.page.for_duration", "was": "2m", "now": "20s", "why": "the chain evaluates every 10s"}]}
    probes = (ProbeResult(name="split", probe="traffic-split", tolerance={"databricks": 5}, observed="80/20", ok=True),)
    signals = HopSignals(t0=T0, hops=_hops(broken), prediction=prediction, budget=budget, attribution=(
        {"fault": "f1", "kind": "vendor-5xx", "backend": "databricks", "hop": "rule-firing",
         "seen": "server_error 10.0% of databricks's requests during the fault (0.0% before)",
         "during": {"server_error": 10}, "before": {}},))
    rollback = Rollback(actions=({"action": "remove-faults", "status": "done", "message": "off"},
                                 {"action": "resolve-pages", "status": "failed", "message": "pager gone"}),
                        leftovers=("the drill's incident LP00001",))
    return Results(phases=phases, prepared=Facts(checks=checks, facts=facts), steady=Steady(probes=probes),
                   signals=signals, judgement=_judgement(broken, signals.hops), rollback=rollback)


def _prediction() -> Prediction:
    """The chain runner's prediction for vendor-outage, as test_chain_prediction_pins pins it."""
    raw = json.loads((Path(__file__).with_name("chain_prediction_pins") / "vendor-outage.chain.json").read_text())
    return Prediction.parse(raw)


@pytest.mark.parametrize("name, broken, predicted, budget, outcome", [
    ("every-hop", None, True, Budget(basis="measured", period_days=28, slos=(
        BudgetRow(slo="llm-inference-databricks-availability", spent=0.0123, peak_burn_1h=950.5),)), "passed"),
    ("broken-at-pagerduty", "pagerduty", False, None, "failed"),
])
def test_the_chain_report_is_what_the_code_before_wrote(tmp_path, name, broken, predicted, budget, outcome):
    from opsctl.drills.chain.report import chain_report
    from opsctl.drills.render import render_markdown
    from opsctl.drills.report_model import DrillReport

    report = chain_report(_drill("vendor-outage"), _results(broken, _prediction() if predicted else None, budget),
                          outcome, 0 if outcome == "passed" else 1, 461.25)
    assert isinstance(report, DrillReport)  # built typed, not a dict parsed afterwards
    check_pinned(f"{name}.json", report.json_text())
    check_pinned(f"{name}.md", render_markdown(report))
