"""The rollout controller (issue 23 item 4): a plan advanced step by step, its state in the shared
store, every step a recorded traffic change; steered by intents; held by an incident's failover and
back at its current step after the restore; fenced by the leader's term.

Evidence is the embedded store's healthy day (the analyses read it at END); time is a SimClock, so
a soak passes in a few ticks. Counts, never timings: change-record entries per operation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from opsctl.clock import SimClock
from tests.conftest import write_config
from tests.rollout.conftest import END

RAMP_CHECKS = [
    {"check": "burn-rate", "success": "result.max_burn < 1", "failure": "result.max_burn >= 6"},
    {"check": "latency-judge", "success": "result.verdict == 'equivalent'", "failure": "result.verdict == 'worse'",
     "args": {"threshold": 0.5, "margin": 0.01}},
]


def plan_data(weights=(20, 50, 80), soak="2h", checks=None) -> dict:
    return {"name": "t", "backend": "databricks", "baseline": "internal", "stages": [
        {"ramp": {"steps": [{"weight": w, "soak": soak} for w in weights],
                  "analysis": RAMP_CHECKS if checks is None else checks}}]}


TRAFFIC = """\
traffic:
  actuator: file
  default_split: {databricks: 80, internal: 20}
  rate_limit: {max_changes: 50, window: 1h}
capacity: {backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}
paging: {provider: local}
freezes: []
"""


class World:
    def __init__(self, root: Path, healthy_store: Path, extra: str = TRAFFIC):
        from opsctl.config.loading import load_config_file

        (root / "state").mkdir(parents=True, exist_ok=True)
        shutil.copy(healthy_store, root / "state" / "metrics.sqlite")
        self.cfg = load_config_file(write_config(root, extra))
        self.clock = SimClock(END)

    def traffic(self):
        from opsctl.traffic.service import TrafficService

        return TrafficService(self.cfg, clock=self.clock)

    def store(self, term=None):
        from opsctl.rollout.document import RolloutStore
        from opsctl.state import open_state_store

        return RolloutStore(open_state_store(self.cfg), term=term)

    def controller(self, term=None):
        from opsctl.rollout.analyses import Evidence
        from opsctl.rollout.controller import RolloutController

        return RolloutController(self.cfg, self.store(term), self.traffic(), clock=self.clock, term=term,
                                 evidence=lambda at, plan: Evidence(self.cfg, plan, END))

    def start(self, data: dict):
        from opsctl.rollout.document import start_rollout
        from opsctl.rollout.plan import build_plan

        svc = self.traffic()
        if svc.read().split is None or svc.read().split.weight("internal") != 100:
            svc.set({"internal": 100}, reason="before the rollout")
        plan = build_plan(data, "t", backends=list(self.cfg.backends))
        return start_rollout(self.store(), data, plan, by="tester", at=self.clock.now(), current=svc.read().split,
                             order=list(self.cfg.backends))

    def run(self, controller, max_ticks=200):
        from opsctl.rollout.controller import run_until

        return run_until(controller, self.clock, max_ticks=max_ticks, step_seconds=3600)

    def ramp_changes(self, state_id: str) -> dict[str, int]:
        """Applied changes per operation of this rollout, from the change record."""
        out: dict[str, int] = {}
        for e in self.traffic().history():
            if e.operation.startswith(state_id) and e.outcome == "applied":
                out[e.operation] = out.get(e.operation, 0) + 1
        return out


@pytest.fixture
def world(tmp_path, healthy_store):
    return World(tmp_path, healthy_store)


def test_a_healthy_plan_completes_each_step_one_recorded_change(world):
    state = world.start(plan_data())
    assert world.run(world.controller()) == "completed"
    assert world.traffic().read().split.weight("databricks") == 80
    assert world.ramp_changes(state.id) == {f"{state.id}-s1": 1, f"{state.id}-s2": 1, f"{state.id}-s3": 1}
    final = world.store().read()
    # each 2h soak with 1h intervals: measured at 0h, 1h, 2h, for both analyses
    assert [c.measured for c in final.analyses] == [3, 3]


def test_a_failed_analysis_beyond_its_limit_aborts_back_to_the_start(world):
    # the healthy day's burn is far below 1: a failure condition that holds on it must abort at once
    checks = [{"check": "burn-rate", "success": "result.max_burn > 100", "failure": "result.max_burn < 1",
               "failure_limit": 1}]
    state = world.start(plan_data(checks=checks))
    assert world.run(world.controller()) == "aborted"
    assert world.traffic().read().split.weight("internal") == 100
    changes = world.ramp_changes(state.id)
    assert changes == {f"{state.id}-s1": 1, f"{state.id}-abort": 1}  # failure_limit 1: the second failure aborts
    final = world.store().read()
    assert final.analyses[0].failed == 2 and final.step == 0


def test_an_inconclusive_step_pauses_and_resume_measures_again(world):
    from opsctl.rollout.document import new_intent

    checks = [{"check": "burn-rate", "success": "result.max_burn > 100", "failure": "result.max_burn > 1000"}]
    state = world.start(plan_data(weights=(20,), checks=checks))
    assert world.run(world.controller()) == "paused"
    assert world.store().read().paused_because.startswith("inconclusive")
    new_intent(world.store(), "promote", by="tester", at=world.clock.now())
    assert world.run(world.controller()) == "completed"  # the last step promoted: done
    assert world.ramp_changes(state.id) == {f"{state.id}-s1": 1}


def test_pause_and_abort_intents_from_a_laptop(world):
    from opsctl.rollout.document import new_intent

    state = world.start(plan_data())
    ctl = world.controller()
    assert ctl.tick() == "applied"
    new_intent(world.store(), "pause", by="laptop", at=world.clock.now(), reason="look first")
    assert ctl.tick() == "intent"
    world.clock.advance(6 * 3600)
    assert ctl.tick() == "idle"  # paused: nothing measured, nothing applied
    assert world.store().read().status == "paused"
    new_intent(world.store(), "abort", by="laptop", at=world.clock.now())
    assert ctl.tick() == "intent"
    assert world.store().read().status == "aborted"
    assert world.traffic().read().split.weight("internal") == 100
    assert world.ramp_changes(state.id) == {f"{state.id}-s1": 1, f"{state.id}-abort": 1}


def test_an_incident_failover_holds_the_rollout_and_the_restore_returns_to_its_current_step(world):
    state = world.start(plan_data())
    ctl = world.controller()
    for _ in range(20):  # to step 2 (weight 50) applied
        ctl.tick()
        if world.store().read().step == 1 and world.store().read().phase == "soak":
            break
        world.clock.advance(3600)
    assert world.traffic().read().split.weight("databricks") == 50
    world.traffic().failover("databricks", "INC-1", reason="vendor down")
    assert world.traffic().read().split.weight("databricks") == 0
    world.clock.advance(3 * 3600)
    assert ctl.tick() == "held"
    assert ctl.tick() == "held"  # nothing measured or applied while the failover is open
    held = world.store().read()
    assert held.incident == "INC-1" and held.step == 1
    world.traffic().restore("INC-1", reason="vendor back")
    assert world.run(ctl) == "completed"
    history = [e.what for e in world.store().read().history]
    assert "held" in history and history.count("resumed") == 1
    split_after = world.traffic().read().split
    assert split_after.weight("databricks") == 80
    changes = world.ramp_changes(state.id)
    # the restore put step 2's split back: re-applying step 2 found it there (no change), then 3
    assert changes == {f"{state.id}-s1": 1, f"{state.id}-s2": 1, f"{state.id}-s3": 1}
    assert world.store().read().step == 2


def test_a_write_under_an_older_term_is_fenced(world):
    from opsctl.fencing import FencedError, Term

    world.start(plan_data())
    world.controller(term=lambda: Term("b", 2)).tick()  # the new leader wrote under b@2
    stale = world.controller(term=lambda: Term("a", 1))
    world.clock.advance(3600)
    with pytest.raises(FencedError):
        stale.tick()
    assert world.store().read().term == "b@2"
