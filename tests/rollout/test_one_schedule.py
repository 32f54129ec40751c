"""One schedule (issue 39 item 2): `rollout plan`, `rollout run` (the rehearsal) and serve's rollout
controller agree on every step's start and end, for a plan whose A/B horizon exceeds its
`min_duration` and whose freezes leave a gap the A/B would fit at `min_duration` but not at its
horizon (the controller used to run only `min_duration`, and `rollout run` jumped whole steps).

Serve's runner is ticked on a SimClock; its thread ticks every 5 s, so between events the clock is
moved to the next instant the controller has something to do (simrun.next_event), as `rollout run`
moves its own: the 5 s of a real tick are not counted, every event instant is."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import yaml

from opsctl.clock import SimClock, format_rfc3339
from tests.conftest import run_opsctl
from tests.rollout.test_controller import TRAFFIC, World

H, D = 3600, 86400
T0 = 1_795_000_000  # the rollout's start: the healthy data's newest point (the guards read the day before)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


# F1 leaves [T0+1d, T0+1.5d): 12h, enough for min_duration, not for the A/B's horizon.
F1 = (T0 + 36 * H, T0 + 2 * D)
F2 = (T0 + 6 * D + 12 * H, T0 + 7 * D)  # step 3 (1d) after the A/B would run into it
FREEZES = f"""freezes:
  - {{name: f1, timezone: UTC, start: "{_utc(F1[0])}", end: "{_utc(F1[1])}", reason: test}}
  - {{name: f2, timezone: UTC, start: "{_utc(F2[0])}", end: "{_utc(F2[1])}", reason: test}}
"""

PLAN = {"name": "one-schedule", "backend": "databricks", "baseline": "internal", "start": format_rfc3339(T0),
        "stages": [
            {"ramp": {"steps": [{"weight": 10, "soak": "1d"}]}},
            {"ab": {"share": 20, "min_duration": "12h", "daily_trials": 1500,
                    "metrics": [{"name": "acceptance", "successes": "s", "trials": "t", "margin": 0.05,
                                 "baseline": 0.32}]}},
            {"ramp": {"steps": [{"weight": 50, "soak": "1d"}, {"weight": 80, "soak": "6h"}]}}]}


def _bounds(history) -> list[tuple[float, float]]:
    """(start, end) per step from the rollout's events: applied, then next / completed."""
    starts = {e["step"]: e["at"] for e in history if e["what"] == "applied"}
    ends = {e["step"]: e["at"] for e in history if e["what"] in ("next", "completed")}
    return [(starts[i], ends[i]) for i in sorted(starts)]


def test_plan_run_and_serve_agree_on_every_step(tmp_path, healthy_store):
    from opsctl.clock import parse_rfc3339
    from opsctl.fencing import Term
    from opsctl.rollout.calendar import horizon_days
    from opsctl.rollout.serve import RolloutRunner
    from opsctl.rollout.simrun import next_event
    from opsctl.rollout.steps import plan_steps

    world = World(tmp_path / "serve", healthy_store, TRAFFIC.replace("freezes: []\n", FREEZES))
    cfg_file = tmp_path / "serve" / "opsctl.yaml"
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(PLAN))

    # the plan: the A/B's horizon by hand. n per arm at 0.32, +-5 points, alpha .05, power .8 is the
    # sample-size's own (its closed-form check is in test_plan); 20/80 arms (k = 4): the smaller arm
    # needs n (1 + 1/4) / 2; it fills at 20% of 1,500 = 300 trials a day; whole days, above 12h.
    planned = run_opsctl("--config", cfg_file, "rollout", "plan", plan_file, "-o", "json")
    assert planned.exit_code == 0, planned.output
    doc = json.loads(planned.stdout)
    [size] = doc["sample_sizes"]
    assert size["smaller_arm"] == -(-size["per_arm"] * 5 // 8)
    # closed form: (1.645 + 1.282)^2 * 2 * .32 * .68 / .05^2 = 1,491 per arm -> 932 in the 20% arm
    # -> 932 / 300 = 3.1 -> 4 whole days (8x min_duration)
    assert abs(size["per_arm"] - 1491) <= 3
    days = -(-size["smaller_arm"] // 300)
    assert days == 4 and abs(horizon_days(size["per_arm"], 0.2, 1500) - size["smaller_arm"] / 300) < 1e-9
    plan_bounds = [(parse_rfc3339(s["start"]), parse_rfc3339(s["end"])) for s in doc["steps"]]
    # By hand: step 1 T0..T0+1d; the A/B (days > 12h) cannot fit before f1: it starts at f1's end;
    # it ends at T0+6d, and step 3 (1d) would run into f2 (T0+6.5d): it starts at f2's end, T0+7d
    # (a 12h gap skipped); step 4 right after.
    assert plan_bounds[0] == (T0, T0 + D)
    assert plan_bounds[1] == (T0 + 2 * D, T0 + 6 * D)
    assert plan_bounds[2] == (T0 + 7 * D, T0 + 8 * D)
    assert plan_bounds[3] == (T0 + 8 * D, T0 + 8 * D + 6 * H)

    # the rehearsal
    out = tmp_path / "run"
    ran = run_opsctl("--config", cfg_file, "rollout", "run", plan_file, "--out-dir", out, "-o", "json")
    assert ran.exit_code == 0, ran.output
    rehearsal = json.loads(ran.stdout)
    assert rehearsal["status"] == "completed", rehearsal
    run_bounds = _bounds([{**e, "at": parse_rfc3339(e["at"])} for e in rehearsal["history"]])

    # serve's controller, on a SimClock from the plan's start
    world.clock = SimClock(T0)
    world.start(PLAN)
    runner = RolloutRunner(world.cfg, acting=lambda: True, term=lambda: Term("pod-a", 1), clock=world.clock)
    steps = plan_steps(world.store().read() and runner.controller()._plan(world.store().read()))
    for _ in range(500):
        what = runner.tick()
        state = world.store().read()
        if state.status in ("completed", "aborted", "paused"):
            break
        if what in ("idle", "waiting", "held"):
            plan = runner.controller()._plan(state)
            now = world.clock.now()
            world.clock.advance(max(60.0, next_event(runner.controller(), plan, steps[state.step], state, now) - now))
    state = world.store().read()
    assert state.status == "completed", state.history[-1]
    serve_bounds = _bounds([{"step": e.step, "what": e.what, "at": e.at} for e in state.history])

    assert run_bounds == plan_bounds
    assert serve_bounds == plan_bounds
    assert parse_rfc3339(doc["completion"]) == plan_bounds[-1][1]


def test_rollout_status_shows_the_re_planned_end(tmp_path, healthy_store):
    from opsctl.fencing import Term
    from opsctl.rollout.serve import RolloutRunner

    world = World(tmp_path, healthy_store, TRAFFIC.replace("freezes: []\n", FREEZES))
    world.clock = SimClock(T0)
    world.start(PLAN)
    runner = RolloutRunner(world.cfg, acting=lambda: True, term=lambda: Term("pod-a", 1), clock=world.clock)
    assert runner.tick() == "applied"
    state = world.store().read()
    planned = run_opsctl("--config", tmp_path / "opsctl.yaml", "rollout", "plan", "-o", "json",
                         _write(tmp_path))
    completion = json.loads(planned.stdout)["completion"]
    assert format_rfc3339(state.planned_end) == completion
    shown = run_opsctl("--config", tmp_path / "opsctl.yaml", "rollout", "status")
    assert shown.exit_code == 0, shown.output
    assert f"planned end: {completion}" in shown.stdout
    assert json.loads(run_opsctl("--config", tmp_path / "opsctl.yaml", "rollout", "status", "-o", "json").stdout
                      )["planned_end"] == state.planned_end


def _write(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(PLAN))
    return path


def test_an_ab_step_re_plans_at_the_traffic_it_measures(tmp_path, healthy_store):
    """The plan says 20,000 trials a day; the arms' counters show 10,000 (9,000 + 1,000) over the
    A/B gate's one-day window. By hand: 37,270 per arm at 0.32 and 1 point (issue 39's closed form);
    10/90 arms: the 10% arm needs 37,270 * (1 + 1/9) / 2 = 20,706. At 20,000 a day it fills 2,000 a
    day: 10.35 -> 11 days; at 10,000 a day 1,000: 20.7 -> 21 days. A day into the step the controller
    re-plans: the A/B ends at +21d, the rollout (a 1-day ramp step after it) at +22d, and
    `rollout status` says so."""
    from opsctl.fencing import Term
    from opsctl.metrics.gauges import GaugeStore
    from opsctl.rollout.serve import RolloutRunner
    from tests.rollout.conftest import END

    metric = {"name": "acceptance", "margin": 0.01, "baseline": 0.32,
              "successes": 'sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))',
              "trials": 'sum(increase(grammar_suggestions_shown_total{arm="$arm"}[$window]))'}
    plan = {"name": "ab-traffic", "backend": "databricks", "baseline": "internal", "stages": [
        {"ab": {"share": 10, "min_duration": "7d", "daily_trials": 20000, "metrics": [metric],
                "analysis": [{"check": "ab-equivalence", "success": "result.verdict == 'equivalent'",
                              "failure": "result.verdict == 'different'", "args": {"window": "1d"}}]}},
        {"ramp": {"steps": [{"weight": 50, "soak": "1d"}]}}]}
    world = World(tmp_path, healthy_store)
    world.start(plan)
    runner = RolloutRunner(world.cfg, acting=lambda: True, term=lambda: Term("pod-a", 1), clock=world.clock)
    assert runner.tick() == "applied"
    applied = world.store().read()
    assert applied.planned_end == END + 11 * D + D  # the plan's figure: 11 days, then the ramp's day
    store = GaugeStore.open(world.cfg.state_path / "metrics.sqlite")
    try:
        for k in range(25):  # hourly counter samples over the step's first day
            at = END + k * H
            store.write([("grammar_suggestions_shown_total", {"arm": "internal"}, 375.0 * k),
                         ("grammar_suggestions_shown_total", {"arm": "databricks"}, 1000 * k / 24),
                         ("grammar_suggestions_accepted_total", {"arm": "internal"}, 120.0 * k),
                         ("grammar_suggestions_accepted_total", {"arm": "databricks"}, 320 * k / 24)], at)
    finally:
        store.close()
    world.clock.advance(D - 60)
    assert runner.tick() == "idle"  # not yet a day in
    world.clock.advance(60)
    assert runner.tick() == "replanned"
    state = world.store().read()
    assert state.measured_trials == {"0": 10000}
    assert state.planned_end == END + 21 * D + D
    event = state.history[-1]
    assert event.what == "replanned" and "10,000 trials a day measured (window; the plan: 20,000)" in event.detail
    assert f"the step ends {format_rfc3339(END + 21 * D)} (was {format_rfc3339(END + 11 * D)})" in event.detail
    world.clock.advance(10 * D)  # past the plan's 11 days: the step runs on, its sample not yet there
    assert runner.tick() in ("idle", "measured")
    assert world.store().read().step == 0 and world.store().read().phase == "soak"
    shown = run_opsctl("--config", tmp_path / "opsctl.yaml", "rollout", "status")
    assert f"planned end: {format_rfc3339(END + 22 * D)}" in shown.stdout
