"""The fake API server behaves like the real one where opsctl depends on it, seen through the
official client: patch content types and their semantics, resourceVersion, dry run, scale."""

from __future__ import annotations

import json
import time

import pytest

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
    time.sleep(0.4)
    status = kube_api.get("apps", "deployments", NS, "vllm")
    assert status["spec"]["replicas"] == 5 and status["status"]["readyReplicas"] == 3
