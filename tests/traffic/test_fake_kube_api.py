"""The fake API server behaves like the real one where opsctl depends on it, seen through the
official client: patch content types and their semantics, resourceVersion, dry run, scale."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_until
from tests.traffic.conftest import deployment

NS = "llm"


@pytest.fixture
def k8s(kube_api):
    from kubernetes import client

    api = client.ApiClient(client.Configuration(host=kube_api.url))
    return client, api


def vs(kube_api):
    return kube_api.seed({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "llm", "namespace": NS},
        "spec": {"hosts": ["llm"], "http": [
            {"name": "a", "route": [{"destination": {"host": "x"}}]},
            {"name": "b", "route": [{"destination": {"host": "y"}}]},
        ]},
    })


def test_a_dict_patch_on_a_custom_object_is_a_merge_patch_that_replaces_lists_whole(kube_api, k8s):
    client, api = k8s
    vs(kube_api)
    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm",
                                          {"spec": {"http": [{"name": "only", "route": [{"destination": {"host": "z"}}]}]}})
    assert kube_api.requests[-1].content_type == "application/merge-patch+json"
    http = kube_api.get("networking.istio.io", "virtualservices", NS, "llm")["spec"]["http"]
    assert [r["name"] for r in http] == ["only"], "route b is gone: lists are replaced, not merged"


def test_strategic_merge_patch_is_refused_on_custom_objects_and_merges_by_key_on_built_ins(kube_api, k8s):
    client, api = k8s
    vs(kube_api)
    custom = client.CustomObjectsApi(api)
    with pytest.raises(client.exceptions.ApiException) as refused:
        custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm", {"spec": {}},
                                              _content_type="application/strategic-merge-patch+json")
    assert refused.value.status == 415
    kube_api.seed(deployment(NS, "vllm", 1))
    apps = client.AppsV1Api(api)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}}}}
    apps.patch_namespaced_deployment("vllm", NS, patch, _content_type="application/strategic-merge-patch+json",
                                     _preload_content=False)
    containers = kube_api.get("apps", "deployments", NS, "vllm")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["vllm", "sidecar"], "containers merge by name"
    apps.patch_namespaced_deployment("vllm", NS, patch, _content_type="application/merge-patch+json",
                                     _preload_content=False)
    containers = kube_api.get("apps", "deployments", NS, "vllm")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["sidecar"], "a merge patch replaces the list"


def test_json_patch_applies_operations_and_a_failed_test_changes_nothing(kube_api, k8s):
    client, api = k8s
    seeded = vs(kube_api)
    custom = client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm",
                                          [{"op": "replace", "path": "/spec/http/1/name", "value": "B"}],
                                          _content_type="application/json-patch+json")
    after = kube_api.get("networking.istio.io", "virtualservices", NS, "llm")
    assert [r["name"] for r in after["spec"]["http"]] == ["a", "B"]
    with pytest.raises(client.exceptions.ApiException) as failed:
        custom.patch_namespaced_custom_object(
            "networking.istio.io", "v1", NS, "virtualservices", "llm",
            [{"op": "test", "path": "/metadata/resourceVersion", "value": seeded["metadata"]["resourceVersion"]},
             {"op": "remove", "path": "/spec/http/0"}],
            _content_type="application/json-patch+json")
    assert failed.value.status == 422
    assert kube_api.get("networking.istio.io", "virtualservices", NS, "llm") == after


def test_a_stale_resource_version_in_the_body_is_409_with_a_status_body_as_a_string(kube_api, k8s):
    client, api = k8s
    seeded = vs(kube_api)
    custom = client.CustomObjectsApi(api)
    rv = seeded["metadata"]["resourceVersion"]
    custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm",
                                          {"metadata": {"resourceVersion": rv, "labels": {"a": "1"}}})
    with pytest.raises(client.exceptions.ApiException) as conflict:
        custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm",
                                              {"metadata": {"resourceVersion": rv, "labels": {"b": "2"}}})
    assert conflict.value.status == 409 and isinstance(conflict.value.body, str)
    status = json.loads(conflict.value.body)
    assert status["reason"] == "Conflict" and "the object has been modified" in status["message"]
    with pytest.raises(client.exceptions.ApiException) as no_rv:
        body = kube_api.get("networking.istio.io", "virtualservices", NS, "llm")
        body["metadata"].pop("resourceVersion")
        custom.replace_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm", body)
    assert no_rv.value.status == 422


def test_server_side_dry_run_validates_and_persists_nothing(kube_api, k8s):
    client, api = k8s
    seeded = vs(kube_api)
    custom = client.CustomObjectsApi(api)
    result = custom.patch_namespaced_custom_object("networking.istio.io", "v1", NS, "virtualservices", "llm",
                                                   {"spec": {"hosts": ["changed"]}}, dry_run="All")
    assert result["spec"]["hosts"] == ["changed"]
    assert result["metadata"]["resourceVersion"] == seeded["metadata"]["resourceVersion"]
    assert kube_api.get("networking.istio.io", "virtualservices", NS, "llm")["spec"]["hosts"] == ["llm"]
    with pytest.raises(client.exceptions.ApiException) as invalid:
        custom.patch_namespaced_custom_object(
            "networking.istio.io", "v1", NS, "virtualservices", "llm",
            {"spec": {"http": [{"route": [{"destination": {"host": "x"}, "weight": 30},
                                          {"destination": {"host": "y"}, "weight": 30}]}]}}, dry_run="All")
    assert invalid.value.status == 400 and "!= 100" in invalid.value.body


def test_the_scale_subresource_sets_replicas_and_pods_become_ready_after_a_delay_up_to_the_gpus(kube_api, k8s):
    client, api = k8s
    kube_api.seed(deployment(NS, "vllm", 1))
    kube_api.simulate_deployment(NS, "vllm", ready_delay=0.3, schedulable=3)
    apps = client.AppsV1Api(api)
    scale = apps.read_namespaced_deployment_scale("vllm", NS)
    assert scale.spec.replicas == 1 and scale.status.selector == "app=vllm"
    apps.patch_namespaced_deployment_scale("vllm", NS, {"spec": {"replicas": 5}},
                                           _content_type="application/merge-patch+json")
    assert kube_api.get("apps", "deployments", NS, "vllm")["status"]["readyReplicas"] == 1
    status = wait_until(lambda: (d := kube_api.get("apps", "deployments", NS, "vllm"))["status"]["readyReplicas"] != 1
                        and d, timeout=5, what="the scaled pods to become ready")
    assert status["spec"]["replicas"] == 5 and status["status"]["readyReplicas"] == 3


# -- Leases, autoscalers, compare-and-swap on every kind ------------------------------------------


def lease_body(holder: str, version: str | None = None) -> dict:
    meta = {"name": "opsctl-serve", "namespace": NS}
    if version:
        meta["resourceVersion"] = version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 0,
                     "renewTime": "2026-12-01T00:00:00.000000Z"}}


def test_leases_are_created_once_and_replaced_only_at_the_version_read(kube_api, k8s):
    client, api = k8s
    coord = client.CoordinationV1Api(api)
    created = coord.create_namespaced_lease(NS, lease_body("a"))
    with pytest.raises(client.exceptions.ApiException) as taken:
        coord.create_namespaced_lease(NS, lease_body("b"))
    assert taken.value.status == 409 and json.loads(taken.value.body)["reason"] == "AlreadyExists"
    read = coord.read_namespaced_lease("opsctl-serve", NS)
    assert read.spec.holder_identity == "a" and read.spec.lease_duration_seconds == 15
    renewed = coord.replace_namespaced_lease("opsctl-serve", NS, lease_body("a", created.metadata.resource_version))
    assert int(renewed.metadata.resource_version) > int(created.metadata.resource_version)
    with pytest.raises(client.exceptions.ApiException) as stale:  # b read the lease before a renewed it
        coord.replace_namespaced_lease("opsctl-serve", NS, lease_body("b", created.metadata.resource_version))
    assert stale.value.status == 409
    patched = coord.patch_namespaced_lease(
        "opsctl-serve", NS, {"metadata": {"resourceVersion": renewed.metadata.resource_version},
                             "spec": {"holderIdentity": "b", "leaseTransitions": 1}})
    assert patched.spec.holder_identity == "b" and patched.spec.lease_transitions == 1
    with pytest.raises(client.exceptions.ApiException) as stale_patch:
        coord.patch_namespaced_lease("opsctl-serve", NS, {"metadata": {"resourceVersion": renewed.metadata.resource_version},
                                                          "spec": {"holderIdentity": "a"}})
    assert stale_patch.value.status == 409
    assert kube_api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")["spec"]["holderIdentity"] == "b"


def test_a_lease_is_deleted_only_when_its_preconditions_still_hold(kube_api, k8s):
    client, api = k8s
    coord = client.CoordinationV1Api(api)
    created = coord.create_namespaced_lease(NS, lease_body("a"))
    coord.replace_namespaced_lease("opsctl-serve", NS, lease_body("b", created.metadata.resource_version))
    with pytest.raises(client.exceptions.ApiException) as moved:  # a releases a lease b has taken meanwhile
        coord.delete_namespaced_lease("opsctl-serve", NS, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=created.metadata.resource_version)))
    assert moved.value.status == 409
    current = kube_api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")
    coord.delete_namespaced_lease("opsctl-serve", NS, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(resource_version=current["metadata"]["resourceVersion"])))
    assert kube_api.get("coordination.k8s.io", "leases", NS, "opsctl-serve") is None


def test_an_invalid_lease_is_refused(kube_api, k8s):
    client, api = k8s
    body = lease_body("a")
    body["spec"]["leaseDurationSeconds"] = 0
    with pytest.raises(client.exceptions.ApiException) as refused:
        client.CoordinationV1Api(api).create_namespaced_lease(NS, body)
    assert refused.value.status == 422


@pytest.mark.parametrize("scaler", ["hpa", "keda"])
def test_an_autoscaler_overwrites_a_scale_patch_and_follows_its_minimum(kube_api, k8s, scaler):
    client, api = k8s
    kube_api.seed(deployment(NS, "vllm", 2))
    kube_api.simulate_deployment(NS, "vllm", ready_delay=0)
    if scaler == "hpa":
        kube_api.seed({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "vllm", "namespace": NS},
                       "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
                                "minReplicas": 2, "maxReplicas": 8}})
        hpa = client.AutoscalingV2Api(api)
        read = hpa.read_namespaced_horizontal_pod_autoscaler("vllm", NS)
        assert read.spec.min_replicas == 2

        def raise_minimum(n, version):
            hpa.patch_namespaced_horizontal_pod_autoscaler(
                "vllm", NS, {"metadata": {"resourceVersion": version}, "spec": {"minReplicas": n}})

        def version():
            return hpa.read_namespaced_horizontal_pod_autoscaler("vllm", NS).metadata.resource_version
    else:
        kube_api.seed({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                       "metadata": {"name": "vllm", "namespace": NS},
                       "spec": {"scaleTargetRef": {"name": "vllm"}, "minReplicaCount": 2, "maxReplicaCount": 8,
                                "triggers": [{"type": "prometheus", "metadata": {"threshold": "100"}}]}})
        custom = client.CustomObjectsApi(api)
        read = custom.get_namespaced_custom_object("keda.sh", "v1alpha1", NS, "scaledobjects", "vllm")
        assert read["spec"]["minReplicaCount"] == 2

        def raise_minimum(n, version):
            custom.patch_namespaced_custom_object("keda.sh", "v1alpha1", NS, "scaledobjects", "vllm",
                                                  {"metadata": {"resourceVersion": version}, "spec": {"minReplicaCount": n}})

        def version():
            return custom.get_namespaced_custom_object("keda.sh", "v1alpha1", NS, "scaledobjects",
                                                       "vllm")["metadata"]["resourceVersion"]
    apps = client.AppsV1Api(api)
    apps.patch_namespaced_deployment_scale("vllm", NS, {"spec": {"replicas": 6}})
    assert apps.read_namespaced_deployment("vllm", NS).spec.replicas == 2, "the autoscaler's next sync undid the scale patch"
    stale = version()
    raise_minimum(6, stale)
    assert apps.read_namespaced_deployment("vllm", NS).spec.replicas == 6
    with pytest.raises(client.exceptions.ApiException) as conflict:
        raise_minimum(3, stale)
    assert conflict.value.status == 409
    kube_api.set_autoscaler_desired(NS, "vllm", 7)  # the metrics ask for more: the minimum is no ceiling
    assert apps.read_namespaced_deployment("vllm", NS).spec.replicas == 7


def test_the_fake_starts_on_its_own_and_serves_the_client(tmp_path):
    import socket
    import subprocess
    import sys

    from tests.conftest import REPO

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    seed = tmp_path / "seed.yaml"
    seed.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: grammar-split, namespace: llm}\n"
                    "data: {split.json: '{\"databricks\": 80, \"internal\": 20}'}\n")
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.kube_api", "--port", str(port), "--seed", str(seed)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert "fake Kubernetes API on http://127.0.0.1:" in proc.stdout.readline()
        from kubernetes import client

        api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}"))
        cm = client.CoreV1Api(api).read_namespaced_config_map("grammar-split", NS)
        assert json.loads(cm.data["split.json"]) == {"databricks": 80, "internal": 20}
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
