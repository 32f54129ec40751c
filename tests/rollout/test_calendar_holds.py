"""A calendar that says what it holds (issue 39 item 6), on the issue's own example as a fixture
(rollouts/summarize-migration.yaml: the second service "summarize" from Monday 2027-11-01 09:00 New
York, across a Thanksgiving freeze 2027-11-24T00:00Z-11-29 and a winter break 2027-12-17T00:00Z to
2028-01-04, steps starting Mon-Fri 09:00-17:00 New York). Every instant worked by hand below."""

from __future__ import annotations

import json
import textwrap
from datetime import datetime, timezone

import pytest
import yaml

from tests.conftest import REPO, run_opsctl

FIXTURE = REPO / "rollouts" / "summarize-migration.yaml"
D, H = 86400, 3600

CONFIG = """\
service: summarize
backends:
  internal: {kind: internal, description: vLLM pods}
  databricks: {kind: vendor, vendor: databricks}
state_dir: "STATE"
freezes:
  - {name: thanksgiving, timezone: UTC, start: "2027-11-24T00:00", end: "2027-11-29T00:00", reason: Thanksgiving}
  - {name: winter-break, timezone: UTC, start: "2027-12-17T00:00", end: "2028-01-04T00:00", reason: winter break}
"""


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.fixture
def cfg_file(tmp_path):
    path = tmp_path / "opsctl.yaml"
    path.write_text(CONFIG.replace("STATE", str(tmp_path / "state")))
    return path


def planned(cfg_file, plan=FIXTURE, *extra):
    result = run_opsctl("--config", cfg_file, "rollout", "plan", plan, *extra, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_issue_example_shows_each_steps_planned_and_held_time_and_load(cfg_file):
    steps = planned(cfg_file)["steps"]
    # By hand. 2027-11-01 09:00 EDT = 13:00Z; shadow 1d, 1d, 2d -> Fri 11-05 13:00Z; the 30% mirror 2d
    # ends Sun 11-07 13:00Z (08:00 EST: DST ended at 02:00 that day); Sunday is no working day, so the
    # 100% mirror starts Mon 11-08 09:00 EST = 14:00Z, ends Thu 11-11 14:00Z. The A/B lasts 14 days
    # (its horizon: 20,706 in the 10% arm at 2,000 a day = 10.4 -> 11 days, under min_duration) and
    # would run into Thanksgiving (11-24T00Z): moved to its end, 11-29T00:00Z = Sun 11-28 19:00 EST,
    # then to working hours: Mon 11-29 09:00 EST = 14:00Z; ends Mon 12-13 14:00Z. The 100% mirror is
    # held from 11-11 14:00Z to 11-29 14:00Z: 18 days held, 21 days in all.
    def at(i):
        return steps[i - 1]

    assert (at(4)["start"], at(4)["end"]) == ("2027-11-05T13:00:00Z", "2027-11-07T13:00:00Z")
    assert (at(5)["start"], at(5)["end"]) == ("2027-11-08T14:00:00Z", "2027-11-11T14:00:00Z")
    assert at(5)["waited_for"] == ["working hours"]
    assert at(4)["held"] == 25 * H and at(4)["held_because"] == ["working hours"]
    assert at(4)["load_held"] == "30% mirror for 3.0 days (1.0 days held)"
    assert (at(6)["start"], at(6)["end"]) == ("2027-11-29T14:00:00Z", "2027-12-13T14:00:00Z")
    assert at(6)["duration"] == 14 * D and at(6)["waited_for"] == ["freeze thanksgiving", "working hours"]
    assert at(5)["load"] == "100% mirror" and at(5)["held"] == 18 * D
    assert at(5)["held_until"] == "2027-11-29T14:00:00Z"
    assert at(5)["held_because"] == ["freeze thanksgiving", "working hours"]
    assert at(5)["load_held"] == "100% mirror for 21.0 days (18.0 days held)"
    # ramp 20% 3d: 12-13 -> 12-16 14:00Z, before the winter break; the cost week (7d) would run into
    # it (12-17T00Z): 2028-01-04T00:00Z = Mon 01-03 19:00 EST -> Tue 01-04 09:00 EST = 14:00Z, to
    # 01-11; the 20% ramp held 19 days (22 in all). 50% 4d: Tue 01-11 -> Sat 01-15 14:00Z; 65% waits
    # for Monday 01-17 09:00 EST (50% held 2 days); 4d -> Fri 01-21; 80% 7d -> 2028-01-28 14:00Z.
    assert (at(7)["end"], at(7)["held"], at(7)["load"]) == ("2027-12-16T14:00:00Z", 19 * D, "20% of requests")
    assert at(7)["held_because"] == ["freeze winter-break", "working hours"]
    assert (at(8)["start"], at(8)["end"]) == ("2028-01-04T14:00:00Z", "2028-01-11T14:00:00Z")
    assert (at(10)["start"], at(9)["held"]) == ("2028-01-17T14:00:00Z", 2 * D)
    assert at(11)["end"] == "2028-01-28T14:00:00Z" and at(11)["held"] == 0 and at(11)["load_held"] == ""
    # no step starts outside Mon-Fri 09:00-17:00 New York (never Sunday 19:00)
    from zoneinfo import ZoneInfo

    for step in steps:
        local = datetime.fromisoformat(step["start"].replace("Z", "+00:00")).astimezone(ZoneInfo("America/New_York"))
        assert local.weekday() < 5 and 9 <= local.hour < 17, step


def test_the_table_says_what_each_step_holds_and_why(cfg_file):
    result = run_opsctl("--config", cfg_file, "rollout", "plan", FIXTURE)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("5 "))
    assert "holds 100% mirror for 21.0 days (18.0 days held): freeze thanksgiving, working hours" in row
    assert "steps start in working hours (Mon-Fri 09:00-17:00 America/New_York)" in result.stdout
    assert "earliest completion: 2028-01-28 14:00 UTC" in result.stdout


def _variant(tmp_path, **top):
    data = yaml.safe_load(FIXTURE.read_text())
    data.update(top)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_complete_by_is_met_or_refused_with_the_gap(cfg_file, tmp_path):
    ok = planned(cfg_file, _variant(tmp_path, complete_by="2028-01-31T00:00:00Z"))
    assert ok["completion"] == "2028-01-28T14:00:00Z"
    # "done before the winter break": the schedule ends 2028-01-28 14:00Z, 42 days 14 hours = 42.6
    # days after 2027-12-17T00:00Z; the first step ending past it is the cost week (8), to 01-11.
    late = _variant(tmp_path, complete_by="2027-12-17T00:00:00Z")
    result = run_opsctl("--config", cfg_file, "rollout", "plan", late)
    assert result.exit_code == 4, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error")]
    assert "complete_by 2027-12-17T00:00:00Z: the schedule ends 2028-01-28T14:00:00Z, 42.6 days late" in line
    assert "(step 8, cost at 30%, ends 2028-01-11T14:00:00Z)" in line
    bad = run_opsctl("--config", cfg_file, "rollout", "plan", _variant(tmp_path, complete_by="2027-12-17 00:00"))
    assert bad.exit_code == 2 and "complete_by:" in bad.output


def test_working_hours_need_the_plans_zone_and_valid_days(cfg_file, tmp_path):
    result = run_opsctl("--config", cfg_file, "rollout", "plan", _variant(tmp_path, timezone=None))
    assert result.exit_code == 2 and "working_hours: needs the plan's `timezone`" in result.output
    result = run_opsctl("--config", cfg_file, "rollout", "plan",
                        _variant(tmp_path, working_hours={"days": "Mon-Fry", "start": "09:00", "end": "17:00"}))
    assert result.exit_code == 2 and "working_hours" in result.output and "Mon-Fry" in result.output


@pytest.mark.parametrize("local,why", [("2027-11-07T01:30", "is ambiguous in America/New_York"),
                                       ("2027-03-14T02:30", "does not exist in America/New_York")])
def test_an_ambiguous_or_missing_local_time_is_refused_naming_the_field(tmp_path, local, why):
    path = tmp_path / "opsctl.yaml"
    path.write_text(CONFIG.replace("STATE", str(tmp_path / "state"))
                    + f'  - {{name: dst, timezone: America/New_York, start: "{local}", end: "2027-12-01T00:00"}}\n')
    result = run_opsctl("--config", path, "rollout", "plan", FIXTURE)
    assert result.exit_code == 2
    assert f"freezes[2]: start: '{local}' {why}" in result.output


def test_the_controller_waits_for_working_hours_as_the_plan_does(tmp_path, healthy_store):
    """Serve's controller at Sunday 2027-11-07 13:00Z (08:00 EST) with the 100% mirror next: it
    waits until Monday 09:00 EST = 14:00Z, the plan's start of step 5, and says so."""
    from opsctl.clock import SimClock
    from opsctl.fencing import Term
    from opsctl.rollout.serve import RolloutRunner
    from tests.rollout.test_controller import TRAFFIC, World

    data = {"name": "hours", "backend": "databricks", "baseline": "internal", "timezone": "America/New_York",
            "working_hours": {"days": "Mon-Fri", "start": "09:00", "end": "17:00"},
            "stages": [{"ramp": {"steps": [{"weight": 20, "soak": "1h"}]}}]}
    world = World(tmp_path, healthy_store, TRAFFIC)
    world.clock = SimClock(utc("2027-11-07T13:00:00"))
    world.start(data)
    runner = RolloutRunner(world.cfg, acting=lambda: True, term=lambda: Term("pod-a", 1), clock=world.clock)
    assert runner.tick() == "waiting"
    state = world.store().read()
    assert state.waiting_until == utc("2027-11-08T14:00:00")
    assert "waits for working hours (Mon-Fri 09:00-17:00 America/New_York): until 2027-11-08T14:00:00Z" in \
        state.history[-1].detail
    world.clock.advance(state.waiting_until - world.clock.now() - 60)
    assert runner.tick() == "waiting"
    world.clock.advance(60)
    assert runner.tick() == "applied"


def test_an_error_in_the_catalogs_defaults_is_reported_under_that_file(tmp_path):
    """A catalog of two services ("summarize" beside the first): a freeze in `_defaults.yaml` at an
    ambiguous New York time is reported under `_defaults.yaml`, not the service's file; a bad key in
    the service's own file stays under the service's file."""
    services = tmp_path / "services"
    services.mkdir()
    (services / "_defaults.yaml").write_text(textwrap.dedent("""\
        backends:
          internal: {kind: internal}
          databricks: {kind: vendor, vendor: databricks}
        state_dir: ../state
        freezes:
          - {name: fold, timezone: America/New_York, start: "2027-11-07T01:30", end: "2027-11-08T00:00"}
        """))
    (services / "grammar.yaml").write_text("metrics: {max_data_age: 1d}\n")
    (services / "summarize.yaml").write_text("metrics: {max_data_age: soon}\n")
    result = run_opsctl("--catalog", services, "--service", "grammar", "freeze", "status")
    assert result.exit_code == 2
    assert f"{services / '_defaults.yaml'}: freezes[0]: start: '2027-11-07T01:30' is ambiguous" in result.output
    assert f"{services / 'grammar.yaml'}:" not in result.output
    result = run_opsctl("--catalog", services, "--service", "summarize", "freeze", "status")
    assert result.exit_code == 2
    assert f"{services / 'summarize.yaml'}: metrics.max_data_age" in result.output
    assert f"{services / '_defaults.yaml'}: freezes[0]: start" in result.output


def test_rollout_start_refuses_a_plan_that_cannot_meet_its_complete_by(cfg_file, tmp_path):
    """Started now, the fixture's eleven steps take at least 48 days (1+1+2+2+3+14+3+7+4+4+7): a
    complete_by two days from now is refused before anything is read or written, dry run or not."""
    import time

    from opsctl.clock import format_rfc3339

    plan = _variant(tmp_path, complete_by=format_rfc3339(time.time() + 2 * D))
    for extra in (["--dry-run"], []):
        result = run_opsctl("--config", cfg_file, "rollout", "start", plan, *extra)
        assert result.exit_code == 4, result.output
        assert f"complete_by {yaml.safe_load(plan.read_text())['complete_by']}: the schedule ends" in result.output
