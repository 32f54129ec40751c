"""Freezes bind whatever is running (issue 39 item 1): a freeze written into the config file while
serve's rollout runner drives a plan (team mode: the state and the split in ConfigMaps on the
loopback Kubernetes API server) holds the next step until the freeze's end, says so in the
rollout's events, and the traffic freeze guard of the same long-lived process refuses a routine
change inside it: no restart, the config object loaded at start-up unchanged.

The runner is ticked as its thread ticks it, on a SimClock (a soak is at least a minute), so the
freeze's instants are counted, not waited for."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from opsctl.clock import SimClock
from tests.rollout.conftest import END
from tests.rollout.test_controller import plan_data
from tests.rollout.test_controller_kube import NS, SPLIT_CM, config

pytestmark = pytest.mark.slow


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def test_a_freeze_added_mid_step_holds_the_next_step_and_refuses_a_routine_set(tmp_path, kube_api, healthy_store):
    from opsctl.errors import GuardRefused
    from opsctl.fencing import Term
    from opsctl.rollout.document import RolloutStore, start_rollout
    from opsctl.rollout.plan import build_plan
    from opsctl.rollout.serve import RolloutRunner
    from opsctl.state import open_state_store
    from opsctl.traffic.service import TrafficService
    from tests.conftest import split_configmap

    kube_api.seed(split_configmap(SPLIT_CM, NS, {"internal": 100}))
    cfg = config(tmp_path, kube_api.url, healthy_store)  # loaded once, as serve loads it at start-up
    clock = SimClock(END - 6 * 3600)
    data = plan_data(weights=(20, 50), soak="1h", checks=[])
    person = RolloutStore(open_state_store(cfg))
    traffic = TrafficService(cfg, clock=clock)
    start_rollout(person, data, build_plan(data, "t", backends=list(cfg.backends)), by="tester",
                  at=clock.now(), current=traffic.read().split, order=list(cfg.backends))
    runner = RolloutRunner(cfg, acting=lambda: True, term=lambda: Term("pod-a", 1), clock=clock)

    def event(what, step):
        return next((e for e in person.read().history if e.what == what and e.step == step), None)

    assert runner.tick() == "applied"
    applied_1 = event("applied", 1)
    clock.advance(600)
    assert runner.tick() == "idle"  # mid-step 1: the freeze is written into the config file
    begin, end = applied_1.at + 1800, applied_1.at + 1800 + 3 * 3600
    path = tmp_path / "opsctl.yaml"
    text = path.read_text()
    assert "freezes: []" in text
    path.write_text(text.replace("freezes: []", f"""freezes:
  - {{name: late-freeze, timezone: UTC, start: "{_utc(begin)}", end: "{_utc(end)}", reason: added mid-step}}"""))

    seen = []
    for _ in range(200):
        what = runner.tick()
        seen.append((clock.now(), what))
        state = person.read()
        if state.status != "running":
            break
        if what == "waiting" and begin <= clock.now() < end and not any(w == "refused" for _, w in seen):
            # inside the freeze the long-lived process's own guard refuses a routine change
            with pytest.raises(GuardRefused, match="late-freeze"):
                TrafficService(cfg, clock=clock).set({"internal": 70, "databricks": 30}, reason="routine")
            seen.append((clock.now(), "refused"))
        if what in ("idle", "waiting"):
            clock.advance(600)
    final = person.read()
    assert final.status == "completed", final.history[-1]
    assert any(w == "refused" for _, w in seen)
    waiting = event("waiting", 2)
    assert waiting is not None and "late-freeze" in waiting.detail
    assert "added since this process started" in waiting.detail
    assert waiting.at == applied_1.at + 3600  # step 1's soak ended; step 2 would have run into the freeze
    applied_2 = event("applied", 2)
    assert end <= applied_2.at < end + 600  # the next tick after the freeze's end
    assert not any(e.what == "paused" for e in final.history)  # waited, never refused by the guard
    assert traffic.read().split.weight("databricks") == 50


def test_local_mode_the_guard_reads_a_freeze_added_after_loading_and_fails_closed_on_a_broken_file(
        tmp_path, healthy_store):
    from opsctl.errors import GuardRefused
    from opsctl.traffic.freeze_source import current_freezes
    from tests.rollout.test_controller import World

    world = World(tmp_path, healthy_store)  # file actuator, local state; the config loaded here, once
    world.traffic().set({"internal": 100}, reason="before")
    assert current_freezes(world.cfg) == []
    path = tmp_path / "opsctl.yaml"
    text = path.read_text()
    now = world.clock.now()
    path.write_text(text.replace("freezes: []", f"""freezes:
  - {{name: late, timezone: UTC, start: "{_utc(now - 60)}", end: "{_utc(now + 3600)}"}}"""))
    assert [w.name for w in current_freezes(world.cfg)] == ["late"]
    with pytest.raises(GuardRefused, match="change freeze in force: late"):
        world.traffic().set({"internal": 90, "databricks": 10}, reason="routine")
    path.write_text(text.replace("freezes: []", "freezes: [{name: broken, timezone: Mars/Olympus, cron: '0 0 * * *', duration: 1h}]"))
    with pytest.raises(GuardRefused, match="the freezes could not be re-read"):
        world.traffic().set({"internal": 90, "databricks": 10}, reason="routine")
    path.write_text(text)  # the freeze removed again: routine changes pass
    assert world.traffic().set({"internal": 90, "databricks": 10}, reason="routine").outcome == "applied"
