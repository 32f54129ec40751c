"""Each drill phase returns a typed result that the lifecycle hands on and the report is built from
(drills/phases.py), instead of the world's parts filling the `DrillRun` blackboard."""

from __future__ import annotations

import json
import os

import pytest

from tests.drills.conftest import CHAOS, DrillEnv, audit


def _engine_run(env: DrillEnv, scenario_path):
    """The embedded world run by the real Engine (the CLI builds the same), from the env's root."""
    from opsctl.config import load_config_file
    from opsctl.drills.engine import Engine
    from opsctl.drills.scenario import load_scenario

    previous = os.getcwd()
    os.chdir(env.root)
    try:
        engine = Engine(load_scenario(scenario_path), load_config_file(env.config))
        result = engine.run()
    finally:
        os.chdir(previous)
    return engine, result


@pytest.fixture(scope="module")
def outage(tmp_path_factory):
    env = DrillEnv(tmp_path_factory.mktemp("outage"))
    engine, result = _engine_run(env, CHAOS / "vendor-outage.yaml")
    return env, engine, result


@pytest.mark.slow
def test_each_phase_of_an_embedded_drill_returns_its_typed_result_and_the_report_reads_them(outage):
    from opsctl.drills.expectations import Verdict
    from opsctl.drills.phases import Facts, Instrumented, Judgement, Observed, ProbeResult, Rollback

    env, engine, result = outage
    assert result.exit_code == 0, result.failures
    results = engine.lifecycle.results
    report = result.report.to_dict()  # the report as written (the typed DrillReport's fields, encoded)
    assert [p.phase for p in results.phases] == ["preflight", "steady-state", "method", "rollbacks"]
    assert all(p.status == "ok" for p in results.phases)

    # preflight -> Facts: the two safety checks of an embedded drill, and the seeded store's facts
    assert isinstance(results.prepared, Facts)
    assert [c.name for c in results.prepared.checks] == [c["name"] for c in report["preflight"]]
    assert len(results.prepared.checks) == 2 and all(c.ok for c in results.prepared.checks)
    assert results.prepared.facts == report["environment"] and results.prepared.facts

    # steady state -> the scenario's three probes, each a ProbeResult, and the instruments
    steady = results.steady
    assert isinstance(steady, Instrumented)
    assert all(isinstance(p, ProbeResult) for p in steady.probes)
    assert [p.name for p in steady.probes] == ["availability SLOs are ok", "no page-level burn-rate alert is firing",
                                               "traffic split as configured"]
    assert [p.to_dict() for p in steady.probes] == report["hypothesis"]["probes"]
    assert steady.meter is not None and any(p.name.endswith("databricks-availability") for p in steady.plans)

    # method -> Observed: the observations the report's measurements come from
    seen = results.signals
    assert isinstance(seen, Observed)
    t0 = env.state_of()["t0"]
    assert seen.t0 == t0 == seen.obs.t0
    failovers = [e for e in audit(env.run_dir()) if e.get("action") == "failover" and e.get("outcome") == "applied"]
    assert [e["ts"] for e in seen.obs.failovers] == [e["ts"] for e in failovers] and failovers
    assert round(failovers[0]["ts"] - t0, 3) == report["measurements"]["time_to_mitigate"]
    assert len(seen.samples) == len(report["chart"]["points"]) > 0

    # judge -> one Verdict per expectation, in the scenario's order, the report's expectations
    assert isinstance(results.judgement, Judgement)
    assert all(isinstance(v, Verdict) for v in results.judgement.verdicts)
    assert [v.name for v in results.judgement.verdicts] == [e["name"] for e in report["expectations"]]
    assert len(results.judgement.verdicts) == 7 and results.judgement.failed == ()

    # rollbacks -> Rollback, in the lifecycle's order
    assert isinstance(results.rollback, Rollback)
    assert [a["action"] for a in results.rollback.actions] == ["remove-faults", "restore-traffic", "resolve-pages"]
    assert list(results.rollback.actions) == report["rollbacks"] and results.rollback.leftovers == ()


def test_the_drill_run_keeps_only_the_shared_inputs_not_what_the_phases_found():
    from opsctl.drills.context import DrillRun

    found = {"obs", "verdicts", "preflight_checks", "probe_results", "samples", "meter", "plans",
             "environment_facts", "rollback_results", "leftovers", "refusal", "abort_reason", "crash", "t_method",
             "deadline"}
    run = DrillRun.__new__(DrillRun)
    DrillRun.__init__(run, scenario=None, user_cfg=None)  # type: ignore[arg-type]
    assert found.isdisjoint(vars(run)), sorted(found & set(vars(run)))


@pytest.mark.slow
def test_a_refused_steady_state_reports_the_probes_it_ran_from_its_partial_result(tmp_path):
    from opsctl.drills.phases import Steady

    env = DrillEnv(tmp_path)

    def wrong_split(data):
        for probe in data["steady-state-hypothesis"]["probes"]:
            if probe["probe"] == "traffic-split":
                probe["tolerance"] = {"databricks": 50, "internal": 50}

    engine, result = _engine_run(env, env.scenario("vendor-outage", wrong_split))
    assert result.outcome == "refused" and result.exit_code == 4
    results = engine.lifecycle.results
    assert [(p.phase, p.status) for p in results.phases] == [("preflight", "ok"), ("steady-state", "refused"),
                                                              ("rollbacks", "ok")]
    assert isinstance(results.steady, Steady) and results.signals is None and results.judgement is None
    assert [(p.name, p.ok) for p in results.steady.probes] == [
        ("availability SLOs are ok", True), ("no page-level burn-rate alert is firing", True),
        ("traffic split as configured", False)]
    report = json.loads((env.run_dir() / "report.json").read_text())
    assert report["hypothesis"]["probes"] == [p.to_dict() for p in results.steady.probes]
    assert report["refusal"] == results.refusal and "traffic split as configured" in report["refusal"]
    assert report["expectations"] == []
