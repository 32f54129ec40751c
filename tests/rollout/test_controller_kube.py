"""The rollout run by the cluster (issue 23 item 4) on the loopback Kubernetes API server with the
real kubernetes client: the state in the ConfigMap store the automation shares, the split in the
ConfigMap actuator, leadership on a real Lease (LeaseElector, its monotonic clock driven by the
test so the takeover is counted, not timed).

A leader is killed mid-step: its split write for step 2 lands, its state write never does (its
proxy cuts every write to the rollout's document), and it renews its Lease no more. The new leader
reads the state (step 2, not yet recorded as applied), applies step 2 again under the same operation
id, finds the split already there, and completes the plan: each step is exactly one applied change
in the change record. A write under the dead leader's term is refused (FencedError)."""

from __future__ import annotations

import shutil

import pytest

from opsctl.clock import SimClock
from tests.automation.fault_proxy import FaultProxy, writes_to
from tests.conftest import split_configmap, write_config
from tests.rollout.conftest import END
from tests.rollout.test_controller import plan_data

NS = "llm"
SPLIT_CM = "grammar-traffic-split"
LEASE = "opsctl-llm-inference-serve"

pytestmark = pytest.mark.slow


def config(root, url, healthy_store):
    from opsctl.config.loading import load_config_file

    (root / "state").mkdir(parents=True, exist_ok=True)
    shutil.copy(healthy_store, root / "state" / "metrics.sqlite")
    return load_config_file(write_config(root, f"""\
state: {{backend: kubernetes, namespace: {NS}}}
traffic:
  actuator: configmap
  kubernetes: {{host: "{url}", namespace: {NS}, timeout: 2}}
  configmap: {{name: {SPLIT_CM}, key: split.json}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
paging: {{provider: local}}
freezes: []
"""))


class Replica:
    def __init__(self, root, api, healthy_store, identity, clock, mono):
        from opsctl.automation.leader import LeaseElector
        from opsctl.rollout.analyses import Evidence
        from opsctl.rollout.controller import RolloutController
        from opsctl.rollout.document import RolloutStore
        from opsctl.state import open_state_store
        from opsctl.traffic.registry import kube_for
        from opsctl.traffic.service import TrafficService

        self.proxy = FaultProxy(api.url).start()
        self.cfg = cfg = config(root, self.proxy.url, healthy_store)
        self.elector = LeaseElector(kube_for(cfg.state_kubernetes, cfg.base_dir), name=LEASE, namespace=NS,
                                    identity=identity, lease_duration=4, renew_deadline=3, retry_period=1,
                                    monotonic=lambda: mono[0])
        self.traffic = TrafficService(cfg, clock=clock)
        self.store = RolloutStore(open_state_store(cfg), term=lambda: self.elector.term)
        self.controller = RolloutController(cfg, self.store, self.traffic, clock=clock, term=lambda: self.elector.term,
                                            evidence=lambda at, plan: Evidence(cfg, plan, END))


@pytest.fixture
def api(kube_api):
    kube_api.seed(split_configmap(SPLIT_CM, NS, {"internal": 100}))
    return kube_api


def test_a_leader_killed_mid_step_the_new_leader_completes_each_step_once(tmp_path, api, healthy_store):
    from opsctl.errors import OpsctlError
    from opsctl.fencing import FencedError
    from opsctl.rollout.controller import run_until
    from opsctl.rollout.document import RolloutStore, start_rollout
    from opsctl.rollout.plan import build_plan
    from opsctl.state import open_state_store

    clock, mono = SimClock(END), [0.0]
    a = Replica(tmp_path / "a", api, healthy_store, "replica-a", clock, mono)
    b = Replica(tmp_path / "b", api, healthy_store, "replica-b", clock, mono)
    try:
        assert a.elector.try_acquire_or_renew() and not b.elector.try_acquire_or_renew()
        term_a = a.elector.term
        data = plan_data()
        person = RolloutStore(open_state_store(a.cfg))  # a laptop: no term
        state = start_rollout(person, data, build_plan(data, "t", backends=list(a.cfg.backends)), by="tester",
                              at=clock.now(), current=a.traffic.read().split, order=list(a.cfg.backends))
        # the leader drives step 1 to its end
        for _ in range(10):
            a.controller.tick()
            if a.store.read().step == 1:
                break
            clock.advance(3600)
        assert a.store.read().step == 1 and a.store.read().phase == "apply"

        # killed mid-step: step 2's split write lands, the state write is cut, no more renewals
        a.proxy.down(writes_to(f"configmaps/opsctl-llm-inference-{'rollout'}"))
        with pytest.raises(OpsctlError):
            a.controller.tick()
        assert a.traffic.read().split.weight("databricks") == 50  # the split moved...
        assert a.store.read().phase == "apply"  # ...and the state never said so
        a.proxy.up()

        mono[0] += 5  # the Lease, unrenewed, expires as replica b observes it
        assert b.elector.try_acquire_or_renew()
        term_b = b.elector.term
        assert term_b.epoch > term_a.epoch
        assert run_until(b.controller, clock, max_ticks=100, step_seconds=3600) == "completed"

        history = b.traffic.history()
        applied = {}
        for e in history:
            if e.operation.startswith(state.id) and e.outcome == "applied":
                applied[e.operation] = applied.get(e.operation, 0) + 1
        assert applied == {f"{state.id}-s1": 1, f"{state.id}-s2": 1, f"{state.id}-s3": 1}
        assert b.traffic.read().split.weight("databricks") == 80
        final = b.store.read()
        assert final.status == "completed" and final.term == str(term_b)
        step2 = [e for e in final.history if e.step == 2 and e.what == "applied"]
        assert len(step2) == 1 and step2[0].term == str(term_b)

        # the dead leader wakes up believing it still leads: its write is refused by the fence
        stale = RolloutStore(open_state_store(a.cfg), term=lambda: term_a)
        with pytest.raises(FencedError):
            stale.write(lambda s: s)
    finally:
        for r in (a, b):
            r.proxy.stop()
