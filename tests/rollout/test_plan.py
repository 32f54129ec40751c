"""The rollout plan file: typed, every problem at once, Argo's three outcomes; the calendar around freezes."""

from __future__ import annotations

import json
import textwrap
from datetime import datetime, timezone

import pytest

from opsctl.errors import ConfigError, UsageError
from opsctl.freeze import FreezeCalendar, FreezeWindow
from opsctl.rollout.calendar import schedule, step_seconds
from opsctl.rollout.plan import Analysis, build_plan, judge, load_plan
from tests.conftest import REPO, run_opsctl, write_config

EXAMPLE = REPO / "rollouts" / "vendor-migration.yaml"
SHIPPED = REPO / "opsctl.yaml"


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def plan_of(stages: list, **top) -> dict:
    return {"name": "p", "backend": "databricks", "baseline": "internal", "stages": stages, **top}


ANALYSIS = {"check": "burn-rate", "success": "result.max_burn < 1", "failure": "result.max_burn >= 6"}


def test_shipped_example_crosses_thanksgiving_and_winter_break_and_finishes_in_january():
    from opsctl.config.loading import load_config

    cfg = load_config(str(SHIPPED))
    plan = load_plan(EXAMPLE, backends=list(cfg.backends))
    durations, _ = step_seconds(plan)
    result = schedule(plan, FreezeCalendar(cfg.freezes), plan.start_at, durations)
    steps = result.steps
    # By hand: 2026-11-02 09:00 EST = 14:00Z; shadow 1+1+2+2+3 days, A/B 14 days -> 2026-11-25 14:00Z.
    assert steps[0].start == utc("2026-11-02T14:00:00")
    assert steps[5].stage == "ab" and steps[5].end == utc("2026-11-25T14:00:00")
    # Thanksgiving 2026 is Thursday Nov 26 (Nov 1 is a Sunday): 00:00 EST = 05:00Z, for 4 days.
    # The 3-day 20% step would run into it, so it starts when it ends, Nov 30 05:00Z.
    assert steps[6].label == "weight 20%" and steps[6].moved_after == ("thanksgiving",)
    assert steps[6].start == utc("2026-11-30T05:00:00")
    # 3d + 7d cost + 4d + 4d -> the 65% step ends Dec 18 05:00Z; the 7-day 80% step would meet the
    # winter break (Dec 20 00:00 PST = 08:00Z, 14 days), so it starts Jan 3 2027 08:00Z.
    assert steps[9].end == utc("2026-12-18T05:00:00")
    assert steps[10].label == "weight 80%" and steps[10].moved_after == ("winter-break",)
    assert steps[10].start == utc("2027-01-03T08:00:00")
    assert result.end == utc("2027-01-10T08:00:00")
    assert [f.name for f in result.freezes] == ["thanksgiving", "winter-break"]


def test_no_step_starts_in_or_runs_into_a_freeze():
    from opsctl.config.loading import load_config

    cfg = load_config(str(SHIPPED))
    calendar = FreezeCalendar(cfg.freezes)
    plan = load_plan(EXAMPLE)
    result = schedule(plan, calendar, utc("2026-11-20T00:00:00"))
    assert any(s.moved_after for s in result.steps)
    for step in result.steps:  # scan each step hour by hour, and its last second
        t = step.start
        while t < step.end:
            assert not calendar.active(t), (step.label, t)
            t += 3600
        assert not calendar.active(step.end - 1)


def test_a_step_starting_inside_a_freeze_waits_for_its_end():
    freeze = FreezeWindow(name="launch", timezone="UTC", start="2026-11-02T00:00", end="2026-11-04T12:00")
    plan = build_plan(plan_of([{"ramp": {"steps": [{"weight": 50, "soak": "1d"}]}}]), "p.yaml")
    result = schedule(plan, FreezeCalendar([freeze]), utc("2026-11-03T00:00:00"))
    assert result.steps[0].start == utc("2026-11-04T12:00:00")
    assert result.steps[0].end == utc("2026-11-05T12:00:00")


def test_a_step_longer_than_every_gap_between_freezes_is_refused():
    daily = FreezeWindow(name="nightly", timezone="UTC", cron="0 1 * * *", duration="23h")
    plan = build_plan(plan_of([{"ramp": {"steps": [{"weight": 50, "soak": "2h"}]}}]), "p.yaml")
    with pytest.raises(UsageError, match="no gap"):
        schedule(plan, FreezeCalendar([daily]), utc("2026-11-03T00:00:00"))


def test_every_problem_of_a_plan_is_reported_at_once_with_its_key_path():
    data = plan_of([
        {"shadow": {"steps": [{"mirror": 5, "hold": "1d"}, {"mirror": 5, "hold": "1d"}]}},
        {"ab": {"share": 10, "min_duration": "2w", "alpha": 0.7, "metrics": [
            {"name": "acc", "successes": "a", "trials": "b", "margin": 2}]}},
        {"ramp": {"steps": [{"weight": 120, "soak": "1d"}, {"weight": 30, "soak": "often"}],
                  "analysis": [{**ANALYSIS, "failure": "max_burn > 6"}, {**ANALYSIS, "check": "cost"}]}},
        {"shadow": {}, "ramp": {"steps": []}},
    ], baseline="databricks", colour="blue")
    with pytest.raises(ConfigError) as err:
        build_plan(data, "bad.yaml")
    problems = err.value.problems
    text = "\n".join(problems)
    assert all(p.startswith("bad.yaml: ") for p in problems)
    for expected in ("colour: unknown key",
                     "stages[1].ab.metrics[0]: margin must be between 0 and 1",
                     "stages[2].ramp.steps[0]: weight must be between 1 and 100",
                     "stages[2].ramp.steps[1].soak: invalid duration 'often'",
                     "stages[2].ramp.analysis[0]: failure: 'max_burn > 6' is not `result.FIELD OP VALUE`",
                     "stages[3].shadow.steps: required key is missing"):
        assert expected in text, (expected, text)
    assert len(problems) == 6  # and the ramp's analysis[1] (a cost check) waits for the shapes to be right
    with pytest.raises(ConfigError) as err:
        build_plan(plan_of([{"ab": {"share": 10, "min_duration": "2w", "alpha": 0.7}},
                            {"shadow": {"steps": [{"mirror": 1, "hold": "1d"}]}, "ramp": {"steps": []}}]), "bad.yaml")
    text = "\n".join(err.value.problems)
    assert "stages[0].ab: alpha must be between 0 and 0.5" in text
    assert "stages[1]: a stage is exactly one of shadow, ab, ramp, cost (got shadow, ramp)" in text
    # the checks across stages come once the shapes are right
    again = plan_of([
        {"shadow": {"steps": [{"mirror": 5, "hold": "1d"}, {"mirror": 5, "hold": "1d"}]}},
        {"ramp": {"steps": [{"weight": 40, "soak": "1d"}], "analysis": [{**ANALYSIS, "check": "cost"}]}},
        {"cost": {"share": 30, "window": "7d"}},
    ], baseline="databricks")
    with pytest.raises(ConfigError) as err:
        build_plan(again, "bad.yaml", backends=["internal", "databricks"])
    text = "\n".join(err.value.problems)
    for expected in ("baseline: must differ from backend",
                     "stages[0].shadow.steps[1].mirror: must be above the step before (5)",
                     "stages[1].ramp.analysis[0].check: 'cost' does not judge a ramp stage",
                     "stages[2].cost.share: 30 is below the weight already reached (40)"):
        assert expected in text, (expected, text)


@pytest.mark.parametrize("results, outcome", [
    ([{"max_burn": 0.2}, {"max_burn": 0.5}], "continue"),           # every measurement Successful
    ([{"max_burn": 0.2}, {"max_burn": 7}], "abort"),                # one Failed beyond failure_limit 0
    ([{"max_burn": 0.2}, {"max_burn": 3}], "pause"),                # neither condition: Inconclusive
    ([], "pause"),                                                  # nothing measured yet
    ([{"other": 1}], "pause"),                                      # the field is absent: not a success
])
def test_an_analysis_has_argos_three_outcomes(results, outcome):
    assert judge(Analysis(**ANALYSIS), results) == outcome


def test_a_failure_limit_tolerates_that_many_failed_measurements():
    analysis = Analysis(**ANALYSIS, failure_limit=1)
    assert judge(analysis, [{"max_burn": 7}, {"max_burn": 0.1}]) == "continue"
    assert judge(analysis, [{"max_burn": 7}, {"max_burn": 8}]) == "abort"


def test_conditions_combine_with_and_or_and_compare_words():
    analysis = Analysis(check="latency-judge", success="result.verdict == 'equivalent' and result.n >= 100",
                        failure="result.verdict == 'worse' or result.n < 0")
    assert judge(analysis, [{"verdict": "equivalent", "n": 100}]) == "continue"
    assert judge(analysis, [{"verdict": "equivalent", "n": 99}]) == "pause"
    assert judge(analysis, [{"verdict": "worse", "n": 1000}]) == "abort"


def test_an_ab_step_lasts_as_long_as_its_fixed_horizon_needs():
    # 2 * 0.3 * 0.7 * (z_.95 + z_.9)^2 / 0.005^2 with z_.95 = 1.644854, z_.9 = 1.281552:
    # 0.42 * 8.56385 / 0.000025 = 143,873 per arm with equal arms. The arms are 10/90 (k = 9): the
    # smaller needs 143,873 * (1 + 1/9) / 2 = 79,929.4 -> 79,930, at 2,000 trials/day: 39.97 -> 40 days
    # (issue 39 item 2: the equal-arm n in the 10% arm took 72 days, 1.8x what the test needs).
    data = plan_of([{"ab": {"share": 10, "min_duration": "14d", "daily_trials": 20000,
                            "metrics": [{"name": "acc", "successes": "s", "trials": "t", "margin": 0.005,
                                         "baseline": 0.3}]}}])
    plan = build_plan(data, "p.yaml")
    durations, sizes = step_seconds(plan)
    size = sizes[0][0][1]
    assert abs(size.per_arm - 143873) <= 3
    assert durations[0] == 40 * 86400


def test_a_10_90_split_sizes_the_smaller_arm_as_an_unequal_arm():
    from opsctl.rollout.calendar import horizon_days, smaller_arm

    # issue 39: 37,270 per arm at 0.32 and 1 point (the closed form). For k = 90/10 = 9 the smaller
    # arm needs n (1 + 1/k) / 2 = 37,270 * 10/9 / 2 = 20,705.56 -> 20,706; equal arms (k = 1): n.
    assert smaller_arm(37270, 0.10) == 20706
    assert smaller_arm(37270, 0.90) == 20706
    assert smaller_arm(37270, 0.50) == 37270
    # at 20,000 trials a day the 10% arm fills 2,000 a day: 20,706 / 2,000 = 10.353 days
    assert abs(horizon_days(37270, 0.10, 20000) - 10.353) < 1e-9


def test_cli_plan_json_gives_rfc3339_steps_and_writes_a_timeline(tmp_path):
    html = tmp_path / "timeline.html"
    result = run_opsctl("--config", SHIPPED, "rollout", "plan", EXAMPLE, "-o", "json", "--html", html)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["completion"] == "2027-01-10T08:00:00Z"
    assert data["steps"][6]["start"] == "2026-11-30T05:00:00Z"
    assert data["steps"][10]["moved_after"] == ["winter-break"]
    for step in data["steps"]:
        assert datetime.fromisoformat(step["start"].replace("Z", "+00:00")).tzinfo is not None
    page = html.read_text()
    assert "<svg" in page and "freeze: thanksgiving" in page and "freeze: winter-break" in page
    assert page.count("<rect") == len(data["steps"]) + len(data["freezes"])


def test_cli_plan_table_marks_freezes_and_the_earliest_completion(tmp_path):
    result = run_opsctl("--config", SHIPPED, "rollout", "plan", EXAMPLE, "--start", "2026-11-02T09:00:00-05:00")
    assert result.exit_code == 0, result.output
    assert "moved after freeze thanksgiving" in result.stdout
    assert "freeze winter-break: 2026-12-20 00:00 PST until 2027-01-03 00:00 PST" in result.stdout
    assert "earliest completion: 2027-01-10 08:00 UTC" in result.stdout


def test_cli_refuses_a_start_without_a_zone_and_a_cost_share_below_the_minimum(tmp_path):
    result = run_opsctl("--config", SHIPPED, "rollout", "plan", EXAMPLE, "--start", "2026-11-02T09:00")
    assert result.exit_code == 2 and "time zone" in result.output
    cfg = write_config(tmp_path, "cost: {min_traffic_share: 0.4}\n")
    result = run_opsctl("--config", cfg, "rollout", "plan", EXAMPLE)
    assert result.exit_code == 2
    assert "stages[3].cost.share: 30% is below cost.min_traffic_share (40%)" in result.output
    assert "Traceback" not in result.output


def test_cli_reports_a_broken_plan_file_in_one_go(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        name: x
        backend: nowhere
        baseline: internal
        stages:
          - ramp: {steps: [{weight: 0, soak: 1d}]}
        """))
    result = run_opsctl("--config", SHIPPED, "rollout", "plan", str(bad), "--start", "2026-11-02T00:00:00Z")
    assert result.exit_code == 2
    assert "stages[0].ramp.steps[0]: weight must be between 1 and 100" in result.output and "backend: 'nowhere'" in result.output
