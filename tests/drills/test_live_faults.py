"""Live fault injectors through the real kubernetes client against the loopback Kubernetes API fake:
an Istio fault on a backend's route and the internal Deployment scaled down, each undone exactly,
and never undoing what someone else changed since."""

from __future__ import annotations


from opsctl.config import KubernetesSettings
from opsctl.drills.faults.istio import IstioRouteFault
from opsctl.drills.faults.scale import DeploymentScaleFault
from opsctl.drills.scenario import Fault, LiveRouteFault, LiveScaleFault
from opsctl.traffic.kube import Kube
from tests.drills.test_live import egress_vs
from tests.traffic.conftest import deployment

ISTIO = ("networking.istio.io", "virtualservices")




def kube(api) -> Kube:
    return Kube(KubernetesSettings(host=api.url, namespace="llm", timeout=5))


def route_fault(**live) -> Fault:
    return Fault("vendor-5xx", "databricks", 600, {"rate": 0.25},
                 LiveRouteFault(namespace="llm-staging", virtual_service="databricks-egress", **live))


def test_an_istio_abort_is_injected_and_removed_with_the_rest_of_the_route_untouched(kube_api):
    kube_api.seed(egress_vs())
    injector = IstioRouteFault(kube(kube_api), api_version="v1", run_id="RUN1")
    record = injector.prepare(route_fault(), "databricks", 100.0)
    assert record["original_fault"] is None and record["route_index"] == 0
    assert not [r for r in kube_api.requests if r.method == "PATCH"], "prepare changes nothing"
    injector.apply(record)
    vs = kube_api.get(*ISTIO, "llm-staging", "databricks-egress")
    assert vs["spec"]["http"][0]["fault"] == {"abort": {"percentage": {"value": 25.0}, "httpStatus": 503}}
    assert vs["metadata"]["annotations"]["opsctl.io/drill-run"] == "RUN1"
    message = injector.remove(record, 200.0)
    assert message.endswith("fault removed")
    vs = kube_api.get(*ISTIO, "llm-staging", "databricks-egress")
    assert vs["spec"]["http"] == egress_vs()["spec"]["http"]
    assert "opsctl.io/drill-run" not in (vs["metadata"].get("annotations") or {})
    assert [e["reason"] for e in kube_api.events("databricks-egress")] == ["DrillFault", "DrillFault"]


def test_a_delay_and_an_explicit_status_and_percentage_are_written_as_given(kube_api):
    kube_api.seed(egress_vs())
    injector = IstioRouteFault(kube(kube_api), api_version="v1", run_id="RUN2")
    delay = Fault("latency-spike", "databricks", 600, {"factor": 3.0},
                  LiveRouteFault(namespace="llm-staging", virtual_service="databricks-egress", route="egress",
                                 percentage=50, fixed_delay="800ms"))
    assert injector.prepare(delay, "databricks", 0)["injected_fault"] == {
        "delay": {"percentage": {"value": 50.0}, "fixedDelay": "800ms"}}
    throttle = Fault("auth-throttling", "databricks", 600, {"rate": 0.3},
                     LiveRouteFault(namespace="llm-staging", virtual_service="databricks-egress"))
    assert injector.prepare(throttle, "databricks", 0)["injected_fault"] == {
        "abort": {"percentage": {"value": 30.0}, "httpStatus": 429}}


def test_a_concurrent_write_is_retried_with_a_fresh_resource_version(kube_api):
    kube_api.seed(egress_vs())
    injector = IstioRouteFault(kube(kube_api), api_version="v1", run_id="RUN3")
    record = injector.prepare(route_fault(), "databricks", 0)
    kube_api.inject_conflicts(*ISTIO, "llm-staging", "databricks-egress", 2)
    injector.apply(record)
    patches = [r for r in kube_api.requests if r.method == "PATCH"]
    assert len(patches) == 3
    assert "fault" in kube_api.get(*ISTIO, "llm-staging", "databricks-egress")["spec"]["http"][0]


def test_a_fault_someone_else_changed_since_is_left_alone_and_reported(kube_api):
    kube_api.seed(egress_vs())
    api = kube(kube_api)
    injector = IstioRouteFault(api, api_version="v1", run_id="RUN4")
    record = injector.prepare(route_fault(), "databricks", 0)
    injector.apply(record)
    vs = kube_api.get(*ISTIO, "llm-staging", "databricks-egress")
    theirs = {"abort": {"percentage": {"value": 100.0}, "httpStatus": 500}}
    vs["spec"]["http"][0]["fault"] = theirs
    api.call("someone else", api.custom().patch_namespaced_custom_object, *ISTIO[:1], "v1", "llm-staging",
             "virtualservices", "databricks-egress", {"spec": {"http": vs["spec"]["http"]}},
             _content_type="application/merge-patch+json")
    message = injector.remove(record, 1)
    assert "changed since the drill set it" in message and "left as is" in message
    assert kube_api.get(*ISTIO, "llm-staging", "databricks-egress")["spec"]["http"][0]["fault"] == theirs


def test_the_deployment_is_scaled_down_and_back_unless_someone_scaled_it_since(kube_api):
    kube_api.seed(deployment("llm-staging", "vllm", 6))
    api = kube(kube_api)
    injector = DeploymentScaleFault(api, run_id="RUN5")
    fault = Fault("gpu-capacity-loss", "internal", 600, {"rate": 0.5, "factor": 2.0},
                  LiveScaleFault(namespace="llm-staging", deployment="vllm"))
    record = injector.prepare(fault, "internal", 0)
    assert (record["original_replicas"], record["target_replicas"]) == (6, 3)
    assert injector.apply(record).endswith("scaled 6 -> 3 replicas")
    assert kube_api.get("apps", "deployments", "llm-staging", "vllm")["spec"]["replicas"] == 3
    assert injector.remove(record, 1).endswith("scaled back 3 -> 6 replicas")
    assert kube_api.get("apps", "deployments", "llm-staging", "vllm")["spec"]["replicas"] == 6

    record = injector.prepare(fault, "internal", 0)
    injector.apply(record)
    api.call("an autoscaler", api.apps().patch_namespaced_deployment_scale, "vllm", "llm-staging",
             {"spec": {"replicas": 5}}, _content_type="application/merge-patch+json")
    message = injector.remove(record, 1)
    assert "has 5 replicas, not the 3 the drill set; left as is" in message
    assert kube_api.get("apps", "deployments", "llm-staging", "vllm")["spec"]["replicas"] == 5
