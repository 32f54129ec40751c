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


def rollout_gets(api) -> int:
    """GETs of the rollout's ConfigMap the loopback API server answered."""
    return sum(1 for r in api.requests if r.method == "GET" and r.path.endswith("/configmaps/opsctl-llm-inference-rollout"))


def test_with_no_rollout_the_leader_backs_off_its_reads_and_finds_a_new_one(tmp_path, healthy_store):
    """Issue 23: the leader read the `rollout` document every tick (5 s) with no rollout at all.
    Counted, not timed: 120 ticks (10 minutes at 5 s) with no document make the reads the schedule
    says (gaps 1, 2, 4, 8, then 12 ticks), not 120; a rollout started from a laptop is then found
    within 12 ticks, and read every tick while it runs."""
    import json

    from opsctl.fencing import Term
    from opsctl.rollout.document import RolloutStore, start_rollout
    from opsctl.rollout.plan import build_plan
    from opsctl.rollout.serve import RolloutRunner
    from opsctl.state import open_state_store
    from opsctl.traffic.service import TrafficService
    from tests.fakes.kube_api import FakeKubeAPI
    from tests.rollout.test_controller_kube import NS, SPLIT_CM, config

    api = FakeKubeAPI().start()
    try:
        api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SPLIT_CM, "namespace": NS},
                  "data": {"split.json": json.dumps({"weights": {"internal": 100}, "shadow": {}})}})
        cfg = config(tmp_path, api.url, healthy_store)
        runner = RolloutRunner(cfg, acting=lambda: True, term=lambda: Term("pod-a", 1))
        ticks = 120
        for _ in range(ticks):
            assert runner.tick() == "idle"
        reads, at, gap = [], 1, 1  # the documented schedule, tick numbers of the reads
        while at <= ticks:
            reads.append(at)
            at, gap = at + gap, min(2 * gap, 12)
        assert reads[:7] == [1, 2, 4, 8, 16, 28, 40]
        assert rollout_gets(api) == len(reads) == 13  # not one a tick (120)

        data = plan_data()
        person = RolloutStore(open_state_store(cfg))  # a laptop: no term
        start_rollout(person, data, build_plan(data, "t", backends=list(cfg.backends)), by="tester",
                      at=1_795_000_000, current=TrafficService(cfg).read().split, order=list(cfg.backends))
        found = next((n for n in range(1, 13) if runner.tick() == "applied"), None)
        assert found is not None  # within the longest gap
        assert TrafficService(cfg).read().split.weight("databricks") == 20
        mark = rollout_gets(api)
        for _ in range(3):
            runner.tick()  # a running rollout: read every tick
        assert rollout_gets(api) - mark >= 3
    finally:
        api.stop()
