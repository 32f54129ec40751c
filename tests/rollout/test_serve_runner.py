"""The rollout inside `opsctl serve` (rollout/serve.py): ticked only while the replica leads, under
its term; started and stopped with the automation service."""

from __future__ import annotations

from tests.rollout.test_controller import World, plan_data


def test_the_runner_acts_only_while_leading_and_writes_under_the_term(tmp_path, healthy_store):
    from opsctl.fencing import Term
    from opsctl.rollout.serve import RolloutRunner

    world = World(tmp_path, healthy_store)
    state = world.start(plan_data())
    leading = [False]
    runner = RolloutRunner(world.cfg, acting=lambda: leading[0], term=lambda: Term("pod-a", 3) if leading[0] else None)
    assert runner.tick() == "not leading"
    assert world.traffic().read().split.weight("databricks") == 0 and world.store().read().phase == "apply"
    leading[0] = True
    assert runner.tick() == "applied"
    assert world.traffic().read().split.weight("databricks") == 20
    after = world.store().read()
    assert after.term == "pod-a@3" and after.history[-1].term == "pod-a@3"
    newest = world.traffic().history()[0]
    assert newest.operation == f"{state.id}-s1"


def test_the_automation_service_starts_and_stops_the_runner(tmp_path, healthy_store):
    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.service import AutomationService
    from tests.automation.helpers import FAILOVER_POLICY, write_serve_config
    from opsctl.config.loading import load_config_file

    (tmp_path / "state").mkdir()
    cfg = load_config_file(write_serve_config(tmp_path, policies=FAILOVER_POLICY))
    service = AutomationService(cfg, LiveExecutor(cfg))
    service.start()
    try:
        assert service.rollouts is not None and service.rollouts._thread.is_alive()
        assert service.rollouts.tick() == "idle"  # one replica: it acts (local@0), nothing to roll out
    finally:
        service.stop(timeout=5)
    assert not service.rollouts._thread.is_alive()
