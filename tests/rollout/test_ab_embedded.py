"""`opsctl rollout ab` on the embedded default store, where `rollout run` writes the grammar
service's arm counters (the gauges table): it reads them as the rollout's own ab-equivalence
analysis does, so both give the same verdict and the same figures on the same data."""

from __future__ import annotations

import json

import pytest
import yaml

from opsctl.clock import format_rfc3339
from opsctl.rollout.plan import build_plan
from tests.conftest import run_opsctl, write_config
from tests.rollout.conftest import END
from tests.rollout.test_analyses import ab_plan, cfg  # noqa: F401  (the fixture)

METRIC = {"name": "acceptance", "margin": 0.05,
          "successes": 'sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))',
          "trials": 'sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))'}
# a mirrored hour first (the guards want the vendor's SLO data before it takes users), then a day at
# 50% of users whose A/B gate reads the hour before the step's end
PLAN = {"name": "ab-run", "backend": "databricks", "baseline": "internal", "start": "2026-11-03T15:00:00Z",
        "stages": [{"shadow": {"steps": [{"mirror": 10, "hold": "1h"}]}},
                   {"ab": {"share": 50, "min_duration": "1d", "metrics": [METRIC],
                           "analysis": [{"check": "ab-equivalence", "success": "result.verdict == 'equivalent'",
                                         "failure": "result.verdict == 'different'", "args": {"window": "1h"}}]}}]}


@pytest.mark.slow
def test_rollout_ab_after_a_simulated_rollout_gives_the_verdict_of_its_analysis(tmp_path):
    """`rollout run` on the embedded default, then `rollout ab` on its state dir at the run's end
    over the analysis' hour: the verdict, the arms' trials, the difference and the n needed are the
    gate's own (today's code exits 2: the embedded store is asked `[1h]` and never for the gauges)."""
    cfg_file = write_config(tmp_path, "capacity: {backend: internal, source: static, replicas: 10,"
                                      " rps_per_replica: 150, headroom: 0.25, max_replicas: 10}\nfreezes: []\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN))
    run = run_opsctl("--config", cfg_file, "rollout", "run", plan, "--out-dir", tmp_path / "state", "-o", "json")
    assert run.exit_code == 0, run.output
    played = json.loads(run.stdout)
    assert played["status"] == "completed"
    [gate] = [g for g in played["gates"] if g["check"] == "ab-equivalence"]
    last = gate["last"]
    assert last["verdict"] == "equivalent" and gate["outcome"] == "continue"  # the case is real
    end = played["history"][-1]["at"]  # the step's end: the gate's measurement and the store's newest data
    assert played["history"][-1]["what"] == "completed"

    for window in ("1h", "3600s"):
        result = run_opsctl("--config", cfg_file, "rollout", "ab", plan, "--window", window,
                            "--at", end, "-o", "json")
        assert result.exit_code == 0, result.output
        [row] = json.loads(result.stdout)
        assert row["window"] == window
        assert row["verdict"] == last["acceptance_verdict"] == "equivalent"
        assert (row["n_a"], row["n_b"]) == (last["acceptance_n_baseline"], last["acceptance_n_new"])
        assert row["difference"] == pytest.approx(last["acceptance_difference"])
        assert row["needed"] == last["acceptance_needed"]
        assert (row["days"], row["daily_trials"], row["daily_basis"]) == (
            last["acceptance_days"], last["acceptance_daily_trials"], last["acceptance_daily_basis"])
    # the stage's own window (1d, its min_duration) is read too: the run simulated only the hour
    # before the gate inside the step, so the day holds the same counters
    result = run_opsctl("--config", cfg_file, "rollout", "ab", plan, "--at", end, "-o", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["window"] == "1d" and row["verdict"] == "equivalent"
    assert (row["n_a"], row["n_b"]) == (last["acceptance_n_baseline"], last["acceptance_n_new"])


@pytest.mark.parametrize("vendor_accept,margin,verdict,code", [(0.32, 0.01, "equivalent", 0),
                                                               (0.28, 0.01, "different", 1),
                                                               (0.32, 0.002, "inconclusive", 3)])
def test_rollout_ab_and_the_analysis_agree_on_the_same_counters(cfg, vendor_accept, margin, verdict, code):  # noqa: F811
    """Arm counters drawn into the embedded store's gauges table: the analysis (`measure`) and the
    CLI give the same verdict, trials, difference and n needed, and the CLI exits with its code."""
    from opsctl.metrics import simulator
    from opsctl.metrics.sim_arms import write_arm_counters
    from opsctl.rollout.analyses import Evidence, measure

    series = simulator.simulate(END - 3600, END, backends={"internal": "internal", "databricks": "vendor"},
                                split={"internal": 50, "databricks": 50}, peak_rps=60, seed=3)
    write_arm_counters(cfg.state_path / "metrics.sqlite", series, seed=3,
                       accept={"internal": 0.32, "databricks": vendor_accept})
    body = ab_plan("1h")
    body["stages"][0]["ab"]["metrics"][0]["margin"] = margin
    plan = build_plan(body, "p.yaml")
    stage = plan.stages[0].ab
    found = measure(stage.analysis[0], Evidence(cfg, plan, END), stage)
    assert found["verdict"] == verdict

    plan_file = cfg.state_path.parent / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(body))
    result = run_opsctl("--config", cfg.state_path.parent / "opsctl.yaml", "rollout", "ab", plan_file,
                        "--at", format_rfc3339(END), "-o", "json")
    assert result.exit_code == code, result.output
    [row] = json.loads(result.stdout)
    assert row["verdict"] == verdict
    assert (row["n_a"], row["n_b"]) == (found["acceptance_n_baseline"], found["acceptance_n_new"])
    assert row["needed"] == found["acceptance_needed"]
    assert row["difference"] == found["acceptance_difference"]


def test_without_a_baseline_ratio_the_cli_refuses_and_the_analysis_is_inconclusive(cfg):  # noqa: F811
    """The one deliberate difference: a metric with no `baseline` whose baseline arm showed nothing
    has no ratio to size the test on. `rollout ab` refuses it (exit 3, the plan must give one); the
    analysis assumes 0.5, and its arm of 0 trials is short of any n: inconclusive (pause)."""
    from opsctl.metrics.gauges import GaugeStore
    from opsctl.rollout.analyses import Evidence, measure

    store = GaugeStore.open(cfg.state_path / "metrics.sqlite")
    try:
        for ts, shown in ((END - 3600, 0.0), (END, 50_000.0)):
            store.write([("grammar_suggestions_shown_total", {"arm": "internal"}, 0.0),
                         ("grammar_suggestions_accepted_total", {"arm": "internal"}, 0.0),
                         ("grammar_suggestions_shown_total", {"arm": "databricks"}, shown),
                         ("grammar_suggestions_accepted_total", {"arm": "databricks"}, shown * 0.32)], ts)
    finally:
        store.close()
    body = ab_plan("1h")
    del body["stages"][0]["ab"]["metrics"][0]["baseline"]
    plan = build_plan(body, "p.yaml")
    stage = plan.stages[0].ab
    found = measure(stage.analysis[0], Evidence(cfg, plan, END), stage)
    assert (found["verdict"], found["acceptance_n_baseline"], found["acceptance_n_new"]) == ("inconclusive", 0, 50_000)

    plan_file = cfg.state_path.parent / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(body))
    config = cfg.state_path.parent / "opsctl.yaml"
    result = run_opsctl("--config", config, "rollout", "ab", plan_file, "--at", format_rfc3339(END), "--window", "1h")
    assert result.exit_code == 3
    assert "A/B acceptance: no baseline ratio (give `baseline` in the plan)" in result.stderr
    result = run_opsctl("--config", config, "rollout", "ab", plan_file, "--at", format_rfc3339(END), "--window", "1x")
    assert result.exit_code == 2 and "--window:" in result.stderr
