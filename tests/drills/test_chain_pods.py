"""The chain serves the simulated internal Deployment (issue 37 item 8, decisions/0355): serve's real
`kubernetes` client, through opsctl's capacity path (Capacity.read_replicas, canary_readiness), reads
the pods the chain exporter's faults leave ready at each instant, from a loopback Kubernetes API that
refuses what it does not serve with a Kubernetes Status."""

from __future__ import annotations

import json
import math
import stat
import urllib.error
import urllib.request

import pytest
import yaml

from opsctl.config import load_config_file
from opsctl.drills.chain.exporter import ProxyExporter
from opsctl.drills.chain.kubeapi import SimulatedDeployment
from opsctl.drills.chain.setup import Shortened, drill_config, drill_fleet
from opsctl.drills.scenario import load_scenario
from opsctl.traffic.canary_readiness import read_readiness
from opsctl.traffic.capacity import Capacity, no_source
from tests.conftest import REPO
from tests.drills.conftest import CHAOS

T = 1_800_000_000.0  # the wall-clock instant the fault is switched on (a step boundary)


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _chain(tmp_path, config, scenario: str, clock: Clock):
    """The chain's exporter with the scenario's faults switched on at T (at their own onsets after
    the first, as the chain schedules them), its simulated Deployment on loopback, and the drill's
    config (setup.drill_config) loaded as serve loads it."""
    user = load_config_file(config)
    sc = load_scenario(CHAOS / f"{scenario}.yaml")
    backends = {n: b.kind for n, b in user.backends.items()}
    exporter = ProxyExporter(backends, peak_rps=200, seed=1, split=lambda: {"internal": 20.0, "databricks": 80.0},
                             clock=clock)
    fleet = drill_fleet(user)
    import dataclasses

    fleet = dataclasses.replace(fleet, kubeconfig=tmp_path / "kubeconfig")
    pods = SimulatedDeployment(fleet.namespace, fleet.deployment, fleet.replicas,
                               lambda at: exporter.ready_share(fleet.backend, at), clock=clock)
    url = pods.start()
    pods.write_kubeconfig(fleet.kubeconfig, url)
    shortened = Shortened()
    raw = drill_config(user, tmp_path, prometheus_url="http://127.0.0.1:9", token_file=tmp_path / "token",
                       shortened=shortened, fleet=fleet)
    (tmp_path / "opsctl.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    cfg = load_config_file(tmp_path / "opsctl.yaml")
    onset = T
    for i, step in enumerate(s for s in sc.method if s.action == "inject-fault"):
        if i:
            onset += step.pause_before
        clock.now = onset
        f = step.fault
        exporter.fault_on(f"f{i + 1}", f.kind, f.backend, f.params, duration=f.duration, waves=f.waves)
    return exporter, pods, cfg, shortened


@pytest.fixture
def served(tmp_path):
    started = []

    def make(config, scenario, clock):
        exporter, pods, cfg, shortened = _chain(tmp_path, config, scenario, clock)
        started.append(pods)
        return exporter, pods, cfg, shortened

    yield make
    for pods in started:
        pods.stop()


def _read(cfg, clock, at):
    clock.now = at
    return Capacity(cfg, no_source, lambda: 0.0).read_replicas()


# By hand, oom-kill-loop (rate 0.4, waves on 4m / off 3m from the fault's onset T, for 1h): the loop
# takes 40% of the pods in each on period (T, T+240], (T+420, T+660], ... and none between; 60% of 6
# is 3.6 -> 3 ready, of 400: 240. Its last on period, (T+3360, T+3600], ends with the fault.
OOM = [(T, 6, 400), (T + 10, 3, 240), (T + 240, 3, 240), (T + 250, 6, 400), (T + 420, 6, 400),
       (T + 430, 3, 240), (T + 660, 3, 240), (T + 670, 6, 400), (T + 3600, 3, 240), (T + 3610, 6, 400)]
# both-degraded: a third of the pods lost (rate 0.33) for 1h from T: 0.67 x 6 = 4.02 -> 4, x 400 = 268;
# the vendor's latency tail (T + 3m) takes no internal pod.
BOTH = [(T, 6, 400), (T + 10, 4, 268), (T + 180, 4, 268), (T + 1800, 4, 268), (T + 3600, 4, 268), (T + 3610, 6, 400)]
CONFIGS = {"shipped": (REPO / "opsctl.yaml", 1), "production": (REPO / "examples" / "production" / "opsctl.yaml", 2)}


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("scenario,instants", [("oom-kill-loop", OOM), ("both-degraded", BOTH)])
def test_the_loopback_deployment_answers_the_real_client_with_the_pods_ready_at_each_instant(
        served, config, scenario, instants):
    path, column = CONFIGS[config]
    clock = Clock(T)
    _exporter, _pods, cfg, _ = served(path, scenario, clock)
    desired = 6 if config == "shipped" else 400
    assert cfg.capacity.source == "kubernetes" and cfg.capacity.deployment == "vllm"
    for at, *ready in instants:
        assert _read(cfg, clock, at) == (ready[column - 1], desired), f"T+{at - T:g}s"


def test_the_canary_restore_reads_the_simulated_pods_and_the_rollback_makes_them_whole(served):
    clock = Clock(T)
    exporter, pods, cfg, _ = served(REPO / "opsctl.yaml", "internal-capacity-loss", clock)
    clock.now = T + 60  # rate 0.3: 0.7 x 6 = 4.2 -> 4 ready
    short = read_readiness(cfg, "internal")
    assert (short.ready, short.desired, short.where) == (4, 6, "Deployment llm/vllm")
    assert read_readiness(cfg, "databricks") is None  # a vendor has no pods opsctl counts
    clock.now = T + 120
    assert exporter.fault_off("f1") is not None  # the drill's remove-faults rollback
    clock.now = T + 121
    whole = read_readiness(cfg, "internal")
    assert (whole.ready, whole.desired) == (6, 6)
    assert [r["ready"] for r in pods.reads if r["path"].endswith("/status")] == [4, 6]


def test_the_scale_subresource_is_read_and_every_write_refused_with_a_status(served, tmp_path):
    from kubernetes.client.exceptions import ApiException

    from opsctl.traffic.kube import Kube

    clock = Clock(T)
    _exporter, pods, cfg, _ = served(REPO / "opsctl.yaml", "oom-kill-loop", clock)
    kube = Kube(cfg.traffic.kubernetes, cfg.base_dir)
    apps = kube.apps()
    clock.now = T + 10
    scale = apps.read_namespaced_deployment_scale("vllm", "llm")
    assert (scale.kind, scale.spec.replicas, scale.status.replicas) == ("Scale", 6, 6)
    before = scale.metadata.resource_version
    clock.now = T + 250  # the wave's off period: the status changed, so does the resourceVersion
    assert apps.read_namespaced_deployment_scale("vllm", "llm").metadata.resource_version != before
    with pytest.raises(ApiException) as refused:
        apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": 9}},
                                               _content_type="application/merge-patch+json")
    body = json.loads(refused.value.body)
    assert refused.value.status == 403 and (body["kind"], body["reason"], body["code"]) == ("Status", "Forbidden", 403)
    assert 'cannot patch resource "deployments/scale"' in body["message"]
    with pytest.raises(ApiException) as missing:
        apps.read_namespaced_deployment_status("other", "llm")
    assert missing.value.status == 404 and json.loads(missing.value.body)["message"].startswith(
        'deployments.apps "other" not found')
    assert pods.refused == [{"at": T + 250, "method": "PATCH",
                             "path": "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"}]
    url = f"{pods.url}/apis/apps/v1/namespaces/llm/deployments/vllm?watch=true"
    for headers, code, reason in (({"Authorization": f"Bearer {pods.token}"}, 405, "MethodNotAllowed"),
                                  ({}, 401, "Unauthorized")):
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5)
        assert answered.value.code == code and json.loads(answered.value.read())["reason"] == reason
    mode = stat.S_IMODE((tmp_path / "kubeconfig").stat().st_mode)
    assert mode == 0o600  # it holds the API's token


def test_the_drill_config_says_the_chain_serves_the_pods(served):
    clock = Clock(T)
    _exporter, _pods, cfg, shortened = served(REPO / "examples" / "production" / "opsctl.yaml", "both-degraded", clock)
    changes = {s["where"]: s for s in shortened.items}
    assert changes["capacity.source"]["was"] == "static (400 replicas)"
    assert changes["capacity.source"]["now"] == "kubernetes: the chain's simulated Deployment llm/vllm on loopback (400 pods)"
    assert changes["traffic.kubernetes"]["now"].startswith("the drill's kubeconfig ")
    assert cfg.capacity.max_replicas == 400 and "capacity.max_replicas" not in changes  # already the fleet
    assert math.isclose(cfg.cost.backends["internal"].gpu.replicas, 400)  # billing counts the same pods
