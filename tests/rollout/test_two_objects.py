"""A plan driving two objects (issue 23 item 5): the flagd gate (`traffic.actuator: flagd`, a file)
assigns users for the A/B and ramp steps, the Istio VirtualService's mirror share
(`traffic.shadow_actuator: istio`, on the loopback API server through the real kubernetes client)
carries the shadow steps. Each change is one write on the object it changes, with its record there;
the rollout's state says which step each object holds; abort returns both to where they started;
a failover on the gate holds the rollout and the restore returns both to the current step.

Expected contents are written out here from the plan (weights in the configured backend order,
the mirror's destination from traffic.destinations), never read back from opsctl's own builders."""

from __future__ import annotations

import json
import shutil

import pytest

from opsctl.clock import SimClock
from tests.conftest import run_opsctl, write_config
from tests.fakes.kube_api import FakeKubeAPI
from tests.rollout.conftest import END

NS = "llm"
VS = "llm"
INTERNAL = {"host": "vllm.llm.svc.cluster.local", "port": {"number": 8000}}
DATABRICKS = {"host": "databricks-egress.llm.svc.cluster.local", "port": {"number": 443}}
START_MIRROR = 5  # the VirtualService already mirrors 5% to databricks when the rollout starts

PLAN = {"name": "two", "backend": "databricks", "baseline": "internal", "stages": [
    {"shadow": {"steps": [{"mirror": 10, "hold": "1h"}, {"mirror": 50, "hold": "1h"}]}},
    {"ab": {"share": 20, "min_duration": "1h"}},
    {"ramp": {"steps": [{"weight": 50, "soak": "1h"}, {"weight": 80, "soak": "1h"}]}},
]}


def traffic_yaml(url: str) -> str:
    return f"""\
traffic:
  actuator: flagd
  flagd: {{path: gate/flags.flagd.json, flag: llm-backend}}
  shadow_actuator: istio
  kubernetes: {{host: "{url}", namespace: {NS}, timeout: 5}}
  istio: {{name: {VS}, route: primary}}
  destinations:
    internal: {{host: {INTERNAL['host']}, port: 8000}}
    databricks: {{host: {DATABRICKS['host']}, port: 443}}
  rate_limit: {{max_changes: 50, window: 1h}}
capacity: {{backend: internal, source: static, replicas: 10, rps_per_replica: 150, headroom: 0.25, max_replicas: 10}}
paging: {{provider: local}}
freezes: []
"""


def virtual_service() -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": VS, "namespace": NS},
            "spec": {"hosts": ["llm.llm.svc.cluster.local"], "http": [
                {"name": "canary", "match": [{"headers": {"x-canary": {"exact": "1"}}}],
                 "route": [{"destination": dict(INTERNAL)}]},
                {"name": "primary", "timeout": "2s", "route": [{"destination": dict(INTERNAL), "weight": 100}],
                 "mirror": dict(DATABRICKS), "mirrorPercentage": {"value": float(START_MIRROR)}}]}}


def expected_primary(mirror: int) -> dict:
    """The primary route as Istio must hold it with `mirror`% mirrored to databricks (0: none)."""
    route = {"name": "primary", "timeout": "2s", "route": [{"destination": dict(INTERNAL), "weight": 100}]}
    if mirror:
        route["mirror"] = dict(DATABRICKS)
        route["mirrorPercentage"] = {"value": float(mirror)}
    return route


def expected_fractions(databricks: int) -> list:
    """flagd's fractional entries in the configured backends' order (internal, then databricks)."""
    return [["internal", 100 - databricks], ["databricks", databricks]]


class World:
    def __init__(self, root, api, healthy_store):
        from opsctl.config.loading import load_config_file

        (root / "state").mkdir(parents=True, exist_ok=True)
        shutil.copy(healthy_store, root / "state" / "metrics.sqlite")
        self.api = api
        self.config_path = write_config(root, traffic_yaml(api.url))
        self.cfg = load_config_file(self.config_path)
        self.clock = SimClock(END)
        self.gate_path = root / "state" / "gate" / "flags.flagd.json"

    def traffic(self):
        from opsctl.traffic.service import TrafficService

        return TrafficService(self.cfg, clock=self.clock)

    def store(self):
        from opsctl.rollout.document import RolloutStore
        from opsctl.state import open_state_store

        return RolloutStore(open_state_store(self.cfg))

    def controller(self):
        from opsctl.rollout.analyses import Evidence
        from opsctl.rollout.controller import RolloutController

        return RolloutController(self.cfg, self.store(), self.traffic(), clock=self.clock,
                                 evidence=lambda at, plan: Evidence(self.cfg, plan, END))

    def start(self):
        from opsctl.rollout.document import start_rollout
        from opsctl.rollout.steps import starting_point
        from opsctl.rollout.plan import build_plan

        self.traffic().set({"internal": 100}, reason="before the rollout")
        current, mirror, objects = starting_point(self.cfg)
        plan = build_plan(PLAN, "two", backends=list(self.cfg.backends))
        return start_rollout(self.store(), PLAN, plan, by="tester", at=self.clock.now(), current=current,
                             order=list(self.cfg.backends), mirror=mirror, objects=objects)

    # what each object holds
    def gate(self) -> dict:
        return json.loads(self.gate_path.read_text())["flags"]["llm-backend"]

    def gate_bytes(self) -> bytes:
        return self.gate_path.read_bytes()

    def vs(self) -> dict:
        return self.api.get("networking.istio.io", "virtualservices", NS, VS)

    def primary(self) -> dict:
        return self.vs()["spec"]["http"][1]

    def vs_patches(self) -> int:
        return sum(1 for r in self.api.requests if r.method == "PATCH" and "/virtualservices/" in r.path)

    def vs_record(self) -> dict:
        return json.loads(self.vs()["metadata"]["annotations"]["opsctl.io/traffic-record"])

    def gate_record(self) -> dict:
        return json.loads(self.gate()["metadata"]["opsctl.io/traffic-record"])


def to_next_applied(ctl, clock, *, limit: int = 10) -> str:
    """Tick (an hour on when a tick does nothing) until a step is applied; bounded."""
    for _ in range(limit):
        what = ctl.tick()
        if what == "applied":
            return what
        if what == "idle":
            clock.advance(3600)
    raise AssertionError(f"no step applied within {limit} ticks")


@pytest.fixture
def api():
    fake = FakeKubeAPI().start()
    fake.seed(virtual_service())
    yield fake
    fake.stop()


@pytest.mark.slow  # ~7 s on the shared machine (the kubernetes client, two CLI runs)
def test_shadow_then_ab_then_ramp_each_step_writes_only_the_object_it_changes_and_abort_restores_both(
        tmp_path, api, healthy_store):
    from opsctl.clock import wall_now
    from opsctl.rollout.document import new_intent

    w = World(tmp_path, api, healthy_store)
    state = w.start()
    gate_before, vs_rv_before = w.gate_bytes(), w.vs()["metadata"]["resourceVersion"]
    assert w.gate()["targeting"]["fractional"] == expected_fractions(0)
    assert w.primary() == expected_primary(START_MIRROR)
    assert [(o.role, o.actuator, o.step) for o in state.objects] == [("assignment", "flagd", 0), ("shadow", "istio", 0)]
    ctl = w.controller()

    # steps 1 and 2, shadow: the mirror share on the VirtualService, one patch each; the gate untouched
    for step, mirror in ((1, 10), (2, 50)):
        patches = w.vs_patches()
        assert to_next_applied(ctl, w.clock) == "applied"
        assert w.primary() == expected_primary(mirror)
        assert w.vs()["spec"]["http"][0] == virtual_service()["spec"]["http"][0], "the other route is kept"
        assert w.vs_patches() == patches + 1
        assert w.vs_record()["changes"][-1]["operation"] == f"{state.id}-s{step}"
        assert w.gate_bytes() == gate_before, "a shadow step never writes the gate"
        now = w.store().read()
        assert [(o.role, o.step, o.written_step) for o in now.objects] == [("assignment", step, 0),
                                                                             ("shadow", step, step)]

    # step 3, A/B: 20% of users through the gate; the mirror ends (one patch of the VirtualService)
    patches = w.vs_patches()
    assert to_next_applied(ctl, w.clock) == "applied"
    gate = w.gate()
    assert gate["targeting"]["fractional"] == expected_fractions(20)
    assert gate["variants"] == {"internal": "internal", "databricks": "databricks"}
    assert gate["defaultVariant"] == "internal"
    assert w.gate_record()["changes"][-1]["operation"] == f"{state.id}-s3"
    assert w.primary() == expected_primary(0)
    assert w.vs_patches() == patches + 1
    assert w.vs_record()["changes"][-1]["operation"] == f"{state.id}-s3"

    # step 4, ramp to 50%: the gate only; the VirtualService is not written at all
    vs_after_ab, patches, gate_version = w.vs(), w.vs_patches(), w.gate()["metadata"]["opsctl.io/version"]
    assert to_next_applied(ctl, w.clock) == "applied"
    gate = w.gate()
    assert gate["targeting"]["fractional"] == expected_fractions(50)
    assert gate["metadata"]["opsctl.io/version"] == gate_version + 1  # one write
    assert w.gate_record()["changes"][-1]["operation"] == f"{state.id}-s4"
    assert w.vs_patches() == patches and w.vs() == vs_after_ab, "a ramp step never writes the mirror"
    now = w.store().read()
    assert [(o.role, o.actuator, o.step, o.written_step) for o in now.objects] == [
        ("assignment", "flagd", 4, 4), ("shadow", "istio", 4, 3)]
    assert now.objects[0].split == "internal 50 / databricks 50"

    # status shows both objects, as JSON and as the table
    result = run_opsctl("--config", w.config_path, "rollout", "status", "-o", "json")
    assert result.exit_code == 0, result.output
    shown = {o["role"]: o for o in json.loads(result.stdout)["objects"]}
    assert (shown["assignment"]["step"], shown["assignment"]["written_step"]) == (4, 4)
    assert (shown["shadow"]["step"], shown["shadow"]["written_step"]) == (4, 3)
    assert shown["shadow"]["target"] == f"VirtualService {NS}/{VS} route primary"
    table = run_opsctl("--config", w.config_path, "rollout", "status")
    assert table.exit_code == 0, table.output
    assert any(line.split()[:5] == ["assignment", "flagd", "at", "step", "4"] for line in table.stdout.splitlines())
    assert any(line.split()[:5] == ["shadow", "istio", "at", "step", "4"] for line in table.stdout.splitlines())
    assert "last written during step 3" in table.stdout

    # abort: both objects back where the rollout found them, each in one write
    new_intent(w.store(), "abort", by="tester", at=wall_now(), reason="test")
    patches = w.vs_patches()
    assert ctl.tick() == "intent"
    done = w.store().read()
    assert done.status == "aborted"
    assert w.gate()["targeting"]["fractional"] == expected_fractions(0)
    assert w.gate_record()["changes"][-1]["operation"] == f"{state.id}-abort"
    assert w.primary() == expected_primary(START_MIRROR)
    assert w.vs_patches() == patches + 1
    assert w.vs_record()["changes"][-1]["operation"] == f"{state.id}-abort"
    assert w.vs()["metadata"]["resourceVersion"] != vs_rv_before
    assert [(o.role, o.step, o.written_step) for o in done.objects] == [("assignment", 0, 4), ("shadow", 0, 4)]


def test_a_failover_on_the_gate_holds_the_rollout_and_the_restore_returns_both_to_the_current_step(
        tmp_path, api, healthy_store):
    w = World(tmp_path, api, healthy_store)
    state = w.start()
    ctl = w.controller()
    for _ in range(4):  # shadow 10, shadow 50, A/B 20, ramp 50
        to_next_applied(ctl, w.clock)
    assert w.store().read().step == 3
    vs_at_step, patches = w.vs(), w.vs_patches()

    svc = w.traffic()
    svc.failover("databricks", "INC-7", reason="databricks is down")
    assert w.gate()["targeting"]["fractional"] == expected_fractions(0)
    assert ctl.tick() == "held" and w.store().read().incident == "INC-7"
    assert ctl.tick() == "held"
    saved = svc.saved_split("INC-7").split
    svc.restore_now("INC-7", saved, reason="databricks is back")
    assert ctl.tick() == "intent"  # resumed: step 4 again
    assert ctl.tick() == "applied"
    now = w.store().read()
    assert now.step == 3 and now.incident is None and now.reapply == 1
    assert w.gate()["targeting"]["fractional"] == expected_fractions(50)
    assert w.vs() == vs_at_step and w.vs_patches() == patches, "the failover and restore never touch the mirror"
    assert w.primary() == expected_primary(0)
    assert [(o.role, o.step) for o in now.objects] == [("assignment", 4), ("shadow", 4)]
    # the restore already put step 4's split back, so the re-application finds it there: no change
    operations = [e.operation for e in svc.history()]
    assert f"{state.id}-s4-r1" not in operations
    assert operations.count(f"{state.id}-s4") == 1


@pytest.mark.parametrize("shadow, why", [
    ("flagd", "shadow_actuator"),  # a gate cannot mirror: not a shadow object
    ("istio", "is the actuator itself"),  # one object cannot be both
])
def test_a_shadow_actuator_that_cannot_be_the_second_object_is_a_config_error(tmp_path, shadow, why):
    actuator = "istio" if why == "is the actuator itself" else "flagd"
    path = write_config(tmp_path, f"traffic: {{actuator: {actuator}, shadow_actuator: {shadow}}}\n")
    result = run_opsctl("--config", path, "config", "validate")
    assert result.exit_code == 2, result.output
    assert why in result.output and "Traceback" not in result.output


def test_rollout_start_records_both_objects_where_it_found_them(tmp_path):
    """`opsctl rollout start` from the CLI with the mirror on a file object: the state's `objects`
    and `start_shadow` come from each object as read (the gate has no mirror; the file mirrors 5%)."""
    (tmp_path / "state" / "traffic").mkdir(parents=True)
    (tmp_path / "state" / "traffic" / "split.json").write_text(
        json.dumps({"weights": {"internal": 100, "databricks": 0}, "shadow": {"databricks": START_MIRROR}}))
    path = write_config(tmp_path, "traffic: {actuator: flagd, shadow_actuator: file, default_split: {internal: 100}}\n"
                                  "paging: {provider: local}\n")
    plan = tmp_path / "plan.yaml"
    plan.write_text(json.dumps(PLAN))
    result = run_opsctl("--config", path, "rollout", "start", plan, "-o", "json")
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert state["start_weights"] == {"internal": 100}  # as the gate holds it (flagd: the default split)
    assert state["start_shadow"] == {"databricks": START_MIRROR}
    assert [(o["role"], o["actuator"], o["step"], o["written_step"]) for o in state["objects"]] == [
        ("assignment", "flagd", 0, 0), ("shadow", "file", 0, 0)]
    assert not (tmp_path / "state" / "traffic" / "flags.flagd.json").exists(), "starting writes no object"


HEADER = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-route", "value": "llm"}]}}


def gateway_rule(mirror: int) -> dict:
    """The HTTPRoute's rule as Gateway API must hold it with `mirror`% mirrored to databricks (0: none)."""
    filters = [HEADER] + ([{"type": "RequestMirror", "requestMirror": {
        "backendRef": {"name": "databricks-egress", "port": 443}, "percent": mirror}}] if mirror else [])
    return {"backendRefs": [{"name": "vllm", "port": 8000, "weight": 100}], "filters": filters}


def test_the_shadow_object_may_be_a_gateway_api_httproute(tmp_path, healthy_store):
    from opsctl.config.loading import load_config_file

    fake = FakeKubeAPI().start()
    try:
        fake.seed({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                   "metadata": {"name": VS, "namespace": NS},
                   "spec": {"parentRefs": [{"name": "edge"}], "rules": [gateway_rule(0)]}})
        w = World(tmp_path, fake, healthy_store)
        w.config_path.write_text(w.config_path.read_text()
                                 .replace("shadow_actuator: istio", "shadow_actuator: gateway-api")
                                 .replace(f"istio: {{name: {VS}, route: primary}}", f"gateway_api: {{name: {VS}}}")
                                 .replace(INTERNAL["host"], "vllm").replace(DATABRICKS["host"], "databricks-egress"))
        w.cfg = load_config_file(w.config_path)

        def rule():
            return fake.get("gateway.networking.k8s.io", "httproutes", NS, VS)["spec"]["rules"][0]

        w.start()
        gate_before = w.gate_bytes()
        ctl = w.controller()
        to_next_applied(ctl, w.clock)  # shadow 10%
        assert rule() == gateway_rule(10) and w.gate_bytes() == gate_before
        to_next_applied(ctl, w.clock)  # shadow 50%
        assert rule() == gateway_rule(50) and w.gate_bytes() == gate_before
        to_next_applied(ctl, w.clock)  # A/B 20%: the gate, and the mirror ends
        assert rule() == gateway_rule(0) and w.gate()["targeting"]["fractional"] == expected_fractions(20)
        route = fake.get("gateway.networking.k8s.io", "httproutes", NS, VS)
        to_next_applied(ctl, w.clock)  # ramp 50%: the gate only
        assert fake.get("gateway.networking.k8s.io", "httproutes", NS, VS) == route
        assert w.gate()["targeting"]["fractional"] == expected_fractions(50)
    finally:
        fake.stop()


def test_a_step_cut_between_its_two_writes_is_finished_by_the_next_tick_each_object_written_once(
        tmp_path, api, healthy_store):
    """The A/B step writes the gate, then the VirtualService; the API server refuses that second write
    once (422). The state never says the step was applied; the next tick applies it again under the
    same operation id: the gate is found as asked (not written again), the mirror is ended."""
    from opsctl.errors import OpsctlError
    from tests.fakes.kube_api import Fault

    w = World(tmp_path, api, healthy_store)
    state = w.start()
    ctl = w.controller()
    to_next_applied(ctl, w.clock)
    to_next_applied(ctl, w.clock)  # shadow 10%, 50%
    assert ctl.tick() == "idle"
    w.clock.advance(3600)
    assert ctl.tick() == "next"
    fault = api.inject(Fault(verb="patch", resource="virtualservices", status=422, times=1))
    with pytest.raises(OpsctlError):
        ctl.tick()
    assert fault.fired == 1
    cut = w.store().read()
    assert (cut.step, cut.phase) == (2, "apply")  # not recorded as applied
    assert w.gate()["targeting"]["fractional"] == expected_fractions(20)  # the first write landed
    assert w.primary() == expected_primary(50)  # the second did not
    gate_version = w.gate()["metadata"]["opsctl.io/version"]

    assert ctl.tick() == "applied"
    assert w.gate()["metadata"]["opsctl.io/version"] == gate_version, "the gate is not written twice"
    assert w.primary() == expected_primary(0)
    s3 = f"{state.id}-s3"
    assert [c["operation"] for c in w.gate_record()["changes"]].count(s3) == 1
    assert [c["operation"] for c in w.vs_record()["changes"]].count(s3) == 1
    done = w.store().read()  # both written during step 3, the gate by the cut tick: its change is found
    assert [(o.role, o.step, o.written_step) for o in done.objects] == [("assignment", 3, 3), ("shadow", 3, 3)]
    gate_change = next(c for c in w.gate_record()["changes"] if c["operation"] == s3)
    assert done.objects[0].change_id == gate_change["id"]
