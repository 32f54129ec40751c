"""The plan's analyses: typed args, and checks that read evidence (the embedded store's gauges and
counters), never numbers typed in; missing evidence is inconclusive, never a pass."""

from __future__ import annotations

import shutil

import pytest

from opsctl.errors import ConfigError
from opsctl.rollout.plan import build_plan, classify
from tests.conftest import write_config
from tests.rollout.conftest import END


def plan_with(analysis: dict, kind: str = "ramp") -> dict:
    body = {"ramp": {"steps": [{"weight": 20, "soak": "1h"}], "analysis": [analysis]}}
    return {"name": "p", "backend": "databricks", "baseline": "internal", "stages": [body]}


def test_an_argument_a_check_does_not_take_is_refused_with_its_key_path():
    analysis = {"check": "burn-rate", "success": "result.max_burn < 1", "failure": "result.max_burn >= 6",
                "args": {"threshold": 0.5}}
    with pytest.raises(ConfigError) as err:
        build_plan(plan_with(analysis), "p.yaml")
    assert any("stages[0].ramp.analysis[0]" in p and "threshold is not an argument of burn-rate" in p
               for p in err.value.problems)
    unknown = dict(analysis, args={"thresold": 0.5})
    with pytest.raises(ConfigError) as err:
        build_plan(plan_with(unknown), "p.yaml")
    assert any("args.thresold: unknown key" in p for p in err.value.problems)


@pytest.fixture
def cfg(tmp_path, healthy_store):
    from opsctl.config.loading import load_config_file

    (tmp_path / "state").mkdir()
    shutil.copy(healthy_store, tmp_path / "state" / "metrics.sqlite")
    return load_config_file(write_config(tmp_path, "freezes: []\n"))


def push_probe(cfg, match: float, threshold: float) -> None:
    from opsctl.quality import names
    from opsctl.quality.push.base import Sample
    from opsctl.quality.push.embedded import EmbeddedSink

    labels = {names.LABEL_SERVICE: cfg.service, names.LABEL_BACKEND: "databricks", names.LABEL_REFERENCE: "internal"}
    EmbeddedSink(cfg.state_path / "metrics.sqlite").push(
        [Sample(names.EXACT_MATCH, match, labels), Sample(names.EXACT_MATCH_THRESHOLD, threshold, labels)], END - 60)


CONSISTENCY = {"check": "consistency", "success": "result.ok == true", "failure": "result.ok == false"}


@pytest.mark.parametrize("match,floor,kind", [(0.93, 0.90, "successful"), (0.85, 0.90, "failed")])
def test_consistency_reads_the_probes_exact_match_against_its_noise_floor(cfg, match, floor, kind):
    from opsctl.rollout.analyses import Evidence, measure

    push_probe(cfg, match, floor)
    plan = build_plan(plan_with(CONSISTENCY), "p.yaml")
    analysis = plan.stages[0].ramp.analysis[0]
    result = measure(analysis, Evidence(cfg, plan, END))
    assert result == {"exact_match": match, "floor": floor, "ok": match >= floor}
    assert classify(analysis, result) == kind


def test_a_check_without_evidence_is_inconclusive_not_a_pass(cfg):
    from opsctl.rollout.analyses import Evidence, measure

    plan = build_plan(plan_with(CONSISTENCY), "p.yaml")  # no probe gauges pushed
    analysis = plan.stages[0].ramp.analysis[0]
    result = measure(analysis, Evidence(cfg, plan, END))
    assert set(result) == {"error"}
    assert classify(analysis, result) == "inconclusive"
    # the burn rate an hour after the newest data: no requests in its windows, so no burn to judge
    burn = build_plan(plan_with({"check": "burn-rate", "success": "result.max_burn < 1",
                                 "failure": "result.max_burn >= 6"}), "p.yaml")
    a = burn.stages[0].ramp.analysis[0]
    assert classify(a, measure(a, Evidence(cfg, burn, END + 7 * 86400))) == "inconclusive"
    assert classify(a, measure(a, Evidence(cfg, burn, END))) == "successful"  # the healthy day itself


def ab_plan(window: str) -> dict:
    metric = {"name": "acceptance", "margin": 0.01, "baseline": 0.32,
              "successes": 'sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))',
              "trials": 'sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))'}
    check = {"check": "ab-equivalence", "success": "result.verdict == 'equivalent'",
             "failure": "result.verdict == 'different'", "args": {"window": window}}
    return {"name": "p", "backend": "databricks", "baseline": "internal",
            "stages": [{"ab": {"share": 50, "min_duration": "1h", "metrics": [metric], "daily_trials": 400000,
                               "analysis": [check]}}]}


@pytest.mark.parametrize("window,vendor_accept,kind", [("5m", 0.32, "inconclusive"), ("1h", 0.32, "successful"),
                                                       ("1h", 0.28, "failed")])
def test_ab_equivalence_reads_both_arms_from_the_simulated_counters(cfg, window, vendor_accept, kind):
    """The arms' counters drawn by the simulator (suggestions shown per arm, accepted ~ Binomial)
    are read back through the plan's PromQL: too few trials for the planned n is Inconclusive
    (the horizon is not reached), equal acceptance Successful, 0.28 against 0.32 Failed. The n
    needed is the closed form of the TOST sample size at delta 0, computed here apart from the code."""
    import math
    from statistics import NormalDist

    from opsctl.metrics import simulator
    from opsctl.metrics.sim_arms import write_arm_counters
    from opsctl.rollout.analyses import Evidence, measure

    series = simulator.simulate(END - 3600, END, backends={"internal": "internal", "databricks": "vendor"},
                                split={"internal": 50, "databricks": 50}, peak_rps=60, seed=3)
    write_arm_counters(cfg.state_path / "metrics.sqlite", series, seed=3,
                       accept={"internal": 0.32, "databricks": vendor_accept})
    plan = build_plan(ab_plan(window), "p.yaml")
    analysis = plan.stages[0].ab.analysis[0]
    result = measure(analysis, Evidence(cfg, plan, END), plan.stages[0].ab)
    z = NormalDist().inv_cdf
    needed = (z(0.95) + z(1 - 0.2 / 2)) ** 2 * 2 * 0.32 * 0.68 / 0.01 ** 2  # alpha 0.05, power 0.8
    assert abs(result["acceptance_needed"] - math.ceil(needed)) <= 1
    assert result["acceptance_days"] == pytest.approx(result["acceptance_needed"] / (400000 * 0.5), abs=0.01)
    steps = 30 if window == "5m" else 360  # the window's 10-second steps
    shown = {b: int(s.columns["suggestions"][-steps:].sum()) for b, s in series.items()}
    assert (result["acceptance_n_baseline"], result["acceptance_n_new"]) == (shown["internal"], shown["databricks"])
    assert classify(analysis, result) == kind
    if kind == "failed":
        assert result["acceptance_difference"] == pytest.approx(-0.04, abs=0.01)
    if kind == "inconclusive":
        assert min(shown.values()) < needed  # an arm short of the planned n: the horizon is not reached


def test_a_counter_in_the_gauges_table_is_read_as_prometheus_increase_reset_aware(cfg):
    """A counter the proxy's schema does not hold is read from the embedded store file's gauges
    table: the increase over the window's samples, a drop read as a restart (the value after it is
    all new), only the label sets the selector matches. By hand: 10 -> 25 (+15), restart to 4 (+4),
    -> 9 (+5): 24 for arm internal; the other arm is not summed."""
    from opsctl.metrics.gauges import GaugeStore
    from opsctl.rollout.ab_check import WithCounters
    from opsctl.rollout.analyses import Evidence

    store = GaugeStore.open(cfg.state_path / "metrics.sqlite")
    try:
        for ts, value in ((END - 7200, 1.0), (END - 3600, 10.0), (END - 2400, 25.0), (END - 1200, 4.0), (END, 9.0)):
            store.write([("grammar_suggestions_shown_total", {"arm": "internal"}, value),
                         ("grammar_suggestions_shown_total", {"arm": "databricks"}, 1000 + value)], ts)
    finally:
        store.close()
    plan = build_plan(plan_with(CONSISTENCY), "p.yaml")
    source = WithCounters(Evidence(cfg, plan, END).source())
    got = source.query_many(['sum(increase(grammar_suggestions_shown_total{arm="internal"}[3600s]))',
                             'sum(increase(grammar_suggestions_nowhere_total{arm="internal"}[3600s]))'], END)
    assert got == [24.0, None]
