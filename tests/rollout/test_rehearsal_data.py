"""The rehearsal draws its own data (docs/decisions/0512): `opsctl rollout run` of a plan starting in
2027 (rollouts/summarize-migration.yaml, issue 39's example) draws simulated proxy metrics at each
simulated instant into its own store, and every guard reads them there at that instant: the run
completes with the plan's steps, says where its data came from, and a bad metric injected at a step
aborts it as the controller would. Before, the traffic guards read the store at the wall clock's
"now" (2026), found nothing, and refused the first change of any plan starting after this week."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml

from opsctl.clock import parse_rfc3339
from tests.conftest import REPO, run_opsctl, write_config
from tests.rollout.test_controller import TRAFFIC

FIXTURE = REPO / "rollouts" / "summarize-migration.yaml"
H, D = 3600, 86400
FREEZES = """freezes:
  - {name: thanksgiving, timezone: UTC, start: "2027-11-24T00:00", end: "2027-11-29T00:00", reason: Thanksgiving}
  - {name: winter-break, timezone: UTC, start: "2027-12-17T00:00", end: "2028-01-04T00:00", reason: winter break}
"""


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.fixture
def cfg_file(tmp_path):
    """The embedded default (file actuator, local state, the shipped SLOs) with the issue's freezes:
    as tests/rollout run `rollout run`; no metric data anywhere but what the rehearsal draws."""
    return write_config(tmp_path, TRAFFIC.replace("freezes: []\n", FREEZES))


def _bounds(history) -> list[tuple[float, float]]:
    """(start, end) per step from the rehearsal's events: applied, then next / completed."""
    starts = {e["step"]: parse_rfc3339(e["at"]) for e in history if e["what"] == "applied"}
    ends = {e["step"]: parse_rfc3339(e["at"]) for e in history if e["what"] in ("next", "completed")}
    return [(starts[i], ends[i]) for i in sorted(starts)]


def _rehearse(cfg_file, plan, out, *extra):
    ran = run_opsctl("--config", cfg_file, "rollout", "run", plan, "--out-dir", out, *extra, "-o", "json")
    return ran, (json.loads(ran.stdout) if ran.stdout.strip().startswith("{") else None)


@pytest.mark.slow
def test_the_2027_plan_rehearses_to_completion_on_the_plans_own_steps(cfg_file, tmp_path):
    from opsctl.metrics.embedded import EmbeddedStore

    planned = run_opsctl("--config", cfg_file, "rollout", "plan", FIXTURE, "-o", "json")
    assert planned.exit_code == 0, planned.output
    doc = json.loads(planned.stdout)
    plan_bounds = [(parse_rfc3339(s["start"]), parse_rfc3339(s["end"])) for s in doc["steps"]]

    out = tmp_path / "run"
    ran, rehearsal = _rehearse(cfg_file, FIXTURE, out)
    assert ran.exit_code == 0, ran.output
    assert rehearsal["status"] == "completed" and rehearsal["step"] == 11, rehearsal["history"][-3:]
    assert not [e for e in rehearsal["history"] if e["what"] in ("paused", "aborted")]
    assert _bounds(rehearsal["history"]) == plan_bounds
    # By hand (test_calendar_holds works every step): Monday 2027-11-01 09:00 EDT = 13:00Z to the 80%
    # step's end, 2028-01-28 14:00Z, the plan's completion.
    assert plan_bounds[0][0] == utc("2027-11-01T13:00:00") and plan_bounds[-1][1] == utc("2028-01-28T14:00:00")
    assert rehearsal["end"] == plan_bounds[-1][1] == parse_rfc3339(doc["completion"])

    # where its data came from: the run's own store, drawn at the simulated instants (the first at
    # the start, the last at the 80% step's apply, 2028-01-21 14:00Z: no step after it changes traffic)
    data = rehearsal["data"]
    assert data["store"] == str((out / "metrics.sqlite").resolve())
    assert data["first"] == "2027-11-01T13:00:00Z" and data["last"] == "2028-01-21T14:00:00Z"
    assert data["window"] == "1h" and data["windows"] == rehearsal["measurements"] and data["incidents"] == []
    assert "opsctl.metrics.simulator" in data["drawn_by"]
    store = EmbeddedStore.open(out / "metrics.sqlite", create=False)
    try:  # the store holds 2027's data: the newest step at the last window's end, none at the wall's now
        assert store.newest_sample(utc("2028-06-01T00:00:00")) == utc("2028-01-21T14:00:00")
        assert store.newest_sample(utc("2027-11-01T11:59:50")) is None  # nothing before the first window
    finally:
        store.close()
    table = run_opsctl("--config", cfg_file, "rollout", "run", FIXTURE, "--out-dir", tmp_path / "run-table")
    assert table.exit_code == 0, table.output
    assert (f"data: {data['windows']} windows of 1h drawn by opsctl.metrics.simulator" in table.stdout
            and "2027-11-01T13:00:00Z .. 2028-01-21T14:00:00Z" in table.stdout
            and "(the rehearsal's own store)" in table.stdout)


@pytest.mark.slow
def test_a_vendor_error_burst_at_the_20_percent_step_aborts_the_rehearsal_there(cfg_file, tmp_path):
    """The issue's plan with a burn-rate check on its 20% ramp (every 12 h, abort at 14.4x), and the
    vendor answering 20% of requests with a 5xx from a day into that step: against its 99.99% SLO
    that burns 0.2 / 0.0001 = 2000x, so the measurements after the burst begins fail and abort."""
    plan = yaml.safe_load(FIXTURE.read_text())
    plan["stages"][2]["ramp"]["analysis"] = [
        {"check": "burn-rate", "success": "result.max_burn < 14.4", "failure": "result.max_burn >= 14.4",
         "failure_limit": 1, "interval": "12h"}]
    plan_file = tmp_path / "summarize-checked.yaml"
    plan_file.write_text(yaml.safe_dump(plan))
    journey = tmp_path / "journey.yaml"
    journey.write_text(yaml.safe_dump({
        "version": 1, "title": "summarize, a vendor 5xx burst at 20%", "plan": str(plan_file),
        "runs": [{"name": "clean", "expect": "completed"},
                 {"name": "vendor-5xx", "expect": "aborted", "abort_step": 7, "abort_check": "burn-rate",
                  "incidents": [{"at_step": 7, "kind": "vendor-5xx", "after": "1d", "duration": "30d",
                                 "options": {"rate": 0.2}}]}]}))

    ran, clean = _rehearse(cfg_file, plan_file, tmp_path / "clean", "--journey", journey, "--run", "clean")
    assert ran.exit_code == 0, ran.output
    assert clean["status"] == "completed"  # the same check on healthy simulated data passes every time
    [gate] = [g for g in clean["gates"] if g["step"] == 7]
    # the 20% step (3 days) measured as it is applied and every 12 h after: 0, 12, ... 72 h, 7 times, none failed
    assert (gate["check"], gate["outcome"], gate["measured"], gate["failed"]) == ("burn-rate", "continue", 7, 0)

    ran, bad = _rehearse(cfg_file, plan_file, tmp_path / "bad", "--journey", journey, "--run", "vendor-5xx")
    assert ran.exit_code == 0, ran.output  # it ended as its run expects
    assert bad["status"] == "aborted" and bad["step"] == 7 and bad["as_expected"] is True
    [aborted] = [e for e in bad["history"] if e["what"] == "aborted"]
    # step 7 starts 2027-12-13 14:00Z; the burst from 12-14 14:00Z; the measurements at 0, 12 h and
    # exactly 24 h hold none of it (the burst starts at that window's end); 36 h fails (one failure
    # tolerated: failure_limit 1, as Argo counts it), 48 h fails again and aborts.
    assert parse_rfc3339(aborted["at"]) == utc("2027-12-13T14:00:00") + 48 * H
    assert aborted["detail"].startswith("burn-rate")
    [gate] = [g for g in bad["gates"] if g["step"] == 7]
    assert (gate["outcome"], gate["measured"], gate["failed"]) == ("abort", 5, 2)
    assert 1900 <= gate["last"]["max_burn"] <= 2100  # 2000x by hand, plus the few errors of a healthy vendor
    assert bad["data"]["incidents"] == ["vendor-5xx@2027-12-14T14:00:00Z+30d:rate=0.2"]
    # the abort restores the split the rollout started from, in the rehearsal's own file
    split = json.loads((tmp_path / "bad" / "traffic" / "split.json").read_text())
    assert (split["weights"], split["shadow"]) == ({"internal": 100, "databricks": 0}, {})
