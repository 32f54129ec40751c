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


# -- state across restarts, faults, the Date header (the fake's team-mode hooks) ------------------


def _cm(name: str, value: str = "1") -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS},
                       "data": {"v": value}}).encode()


def _call(url: str, method: str, path: str, body: bytes | None = None, timeout: float = 10.0):
    """One request on a fresh connection: (status, headers, parsed body), or None when the server
    closed the connection without an answer."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json"}
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        raw = answer.read()
        return answer.status, dict(answer.getheaders()), json.loads(raw) if raw else None
    except (http.client.RemoteDisconnected, ConnectionResetError):
        return None
    finally:
        conn.close()


CMS = f"/api/v1/namespaces/{NS}/configmaps"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_with_state_a_restart_after_sigkill_keeps_every_acknowledged_object_and_the_version_counter(tmp_path):
    # A separate process is the point: it is killed with SIGKILL, as a crashed API server would be.
    import subprocess
    import sys

    from tests.conftest import REPO

    port, state = _free_port(), tmp_path / "etcd.json"
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tests.fakes.kube_api", "--port", str(port), "--state", str(state)]

    def started():
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert "fake Kubernetes API on" in proc.stdout.readline()
        return proc

    proc = started()
    try:
        versions = []
        for i in range(3):
            status, _h, created = _call(url, "POST", CMS, _cm(f"doc-{i}", str(i)))
            assert status == 201
            versions.append(int(created["metadata"]["resourceVersion"]))
        status, _h, patched = _call(url, "PATCH", f"{CMS}/doc-1", json.dumps({"data": {"v": "patched"}}).encode())
        assert status == 200
        status, _h, _b = _call(url, "DELETE", f"{CMS}/doc-2")
        assert status == 200
    finally:
        proc.kill()
        proc.wait(timeout=10)
    proc = started()
    try:
        status, _h, listed = _call(url, "GET", CMS)
        assert status == 200
        by_name = {item["metadata"]["name"]: item for item in listed["items"]}
        assert sorted(by_name) == ["doc-0", "doc-1"], "the deleted object stays deleted"
        assert by_name["doc-1"]["data"] == {"v": "patched"}
        assert by_name["doc-1"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        assert by_name["doc-0"]["metadata"]["resourceVersion"] == str(versions[0])
        # A write carrying the version read before the restart still compares and swaps.
        stale = json.dumps({"metadata": {"resourceVersion": str(versions[0] - 1)}, "data": {"v": "x"}}).encode()
        assert _call(url, "PATCH", f"{CMS}/doc-0", stale)[0] == 409
        status, _h, after = _call(url, "POST", CMS, _cm("doc-3"))
        assert status == 201
        assert int(after["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"]), \
            "the counter goes on from where it was: no version is handed out twice"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_down_and_up_in_process_serve_the_state_file_on_the_same_port(tmp_path):
    from tests.fakes.kube_api import FakeKubeAPI

    api = FakeKubeAPI(state=tmp_path / "etcd.json").start()
    try:
        assert _call(api.url, "POST", CMS, _cm("split"))[0] == 201
        api.objects.clear()  # what is only in memory dies with the process
        api.down()
        with pytest.raises(ConnectionRefusedError):
            _call(api.url, "GET", f"{CMS}/split", timeout=2)
        api.up()
        status, _h, body = _call(api.url, "GET", f"{CMS}/split")
        assert status == 200 and body["data"] == {"v": "1"}
    finally:
        api.stop()


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_a_status_fault_hits_its_share_of_matching_requests_only_and_applies_nothing(kube_api, share):
    from tests.fakes.kube_api import Fault

    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS},
                   "data": {"v": "0"}})
    kube_api.seed_faults(7)
    fault = kube_api.inject(Fault(verb="patch", resource="configmaps", share=share, status=500))
    n = 200
    statuses = []
    for i in range(n):
        status, _h, _b = _call(kube_api.url, "PATCH", f"{CMS}/doc", json.dumps({"data": {"v": str(i)}}).encode())
        statuses.append(status)
        assert _call(kube_api.url, "GET", f"{CMS}/doc")[0] == 200, "a get is not a patch: never faulted"
    failed = statuses.count(500)
    assert statuses.count(200) + failed == n
    assert fault.fired == failed
    # Binomial(200, share): 4.5 standard deviations either side (sd = sqrt(n p (1 - p))).
    sd = (n * share * (1 - share)) ** 0.5
    assert n * share - 4.5 * sd <= failed <= n * share + 4.5 * sd
    # Only the answered patches applied: the stored value is the last one answered 200.
    last_ok = max((i for i, s in enumerate(statuses) if s == 200), default=None)
    assert kube_api.get("", "configmaps", NS, "doc")["data"]["v"] == ("0" if last_ok is None else str(last_ok))


def test_the_same_fault_seed_faults_the_same_requests_and_another_seed_others(kube_api):
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS}})

    def pattern(seed: int) -> list[bool]:
        kube_api.clear_faults()
        kube_api.seed_faults(seed)
        kube_api.inject(verb="get", resource="configmaps", share=0.5, status=429)
        return [_call(kube_api.url, "GET", f"{CMS}/doc")[0] == 429 for _ in range(40)]

    first = pattern(1)
    assert pattern(1) == first
    assert pattern(2) != first
    assert 0 < sum(first) < 40


def test_shares_of_several_faults_partition_the_requests_they_match(kube_api):
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS}})
    kube_api.seed_faults(3)
    kube_api.inject(verb="get", resource="configmaps", share=0.2, status=500)
    kube_api.inject(verb="get", resource="configmaps", share=0.2, status=409)
    kube_api.inject(verb="get", resource="configmaps", share=0.6, status=429)
    statuses = [_call(kube_api.url, "GET", f"{CMS}/doc")[0] for _ in range(150)]
    assert statuses.count(200) == 0, "the shares sum to 1: every request is faulted, once"
    for code, share in ((500, 0.2), (409, 0.2), (429, 0.6)):
        sd = (150 * share * (1 - share)) ** 0.5
        assert abs(statuses.count(code) - 150 * share) <= 4.5 * sd, code


def test_injected_status_answers_read_as_the_real_servers_through_the_client(kube_api, k8s):
    client, api = k8s
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS}})
    core = client.CoreV1Api(api)
    for code, reason in ((409, "Conflict"), (429, "TooManyRequests"), (500, "InternalError")):
        kube_api.clear_faults()
        kube_api.inject(verb="get", resource="configmaps", name="doc", status=code, times=1, retry_after=None)
        with pytest.raises(client.exceptions.ApiException) as raised:
            core.read_namespaced_config_map("doc", NS)
        assert raised.value.status == code
        assert json.loads(raised.value.body)["reason"] == reason
        assert core.read_namespaced_config_map("doc", NS).metadata.name == "doc", "times=1: the next one passes"


def test_a_429_with_retry_after_is_retried_by_the_client_itself(kube_api, k8s):
    client, api = k8s
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS}})
    kube_api.inject(verb="get", resource="configmaps", status=429, times=1)  # Retry-After: 1, as the real server
    assert _call(kube_api.url, "GET", f"{CMS}/doc")[1]["Retry-After"] == "1"
    kube_api.inject(verb="get", resource="configmaps", status=429, times=1)
    assert client.CoreV1Api(api).read_namespaced_config_map("doc", NS).metadata.name == "doc"
    gets = [r.fault for r in kube_api.requests if r.method == "GET"]
    assert gets == ["status 429", "status 429", None], "urllib3 answered the Retry-After with one retry"


def test_a_write_dropped_after_applying_is_stored_and_one_dropped_before_is_not(kube_api):
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS},
                   "data": {"v": "0"}})
    rv = kube_api.get("", "configmaps", NS, "doc")["metadata"]["resourceVersion"]
    kube_api.inject(verb="patch", resource="configmaps", drop="after", times=1)
    assert _call(kube_api.url, "PATCH", f"{CMS}/doc", json.dumps({"data": {"v": "after"}}).encode()) is None
    stored = kube_api.get("", "configmaps", NS, "doc")
    assert stored["data"] == {"v": "after"} and stored["metadata"]["resourceVersion"] != rv
    kube_api.inject(verb="patch", resource="configmaps", drop="before", times=1)
    assert _call(kube_api.url, "PATCH", f"{CMS}/doc", json.dumps({"data": {"v": "before"}}).encode()) is None
    assert kube_api.get("", "configmaps", NS, "doc")["data"] == {"v": "after"}
    assert [r.fault for r in kube_api.writes()] == ["dropped after applying", "dropped before applying"]


def test_a_held_write_applies_only_when_released_and_others_are_answered_meanwhile(kube_api):
    import threading

    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS},
                   "data": {"v": "0"}})
    kube_api.inject(verb="patch", resource="configmaps", hold=True, times=1)
    answers = []
    writer = threading.Thread(target=lambda: answers.append(
        _call(kube_api.url, "PATCH", f"{CMS}/doc", json.dumps({"data": {"v": "held"}}).encode())))
    writer.start()
    wait_until(lambda: kube_api.held() == 1, what="the write to be held")
    assert _call(kube_api.url, "GET", f"{CMS}/doc")[2]["data"] == {"v": "0"}, "not applied while held"
    kube_api.release()
    writer.join(timeout=10)
    assert answers[0][0] == 200 and kube_api.get("", "configmaps", NS, "doc")["data"] == {"v": "held"}


def test_a_delayed_write_is_not_applied_before_its_delay_and_a_server_going_down_drops_it(tmp_path):
    import threading

    from tests.fakes.kube_api import FakeKubeAPI

    api = FakeKubeAPI(state=tmp_path / "etcd.json").start()
    try:
        api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS},
                  "data": {"v": "0"}})
        fault = api.inject(verb="patch", resource="configmaps", delay=60.0)
        answers = []
        writer = threading.Thread(target=lambda: answers.append(
            _call(api.url, "PATCH", f"{CMS}/doc", json.dumps({"data": {"v": "late"}}).encode(), timeout=30)))
        writer.start()
        wait_until(lambda: fault.fired == 1, what="the write to reach the fake")
        assert _call(api.url, "GET", f"{CMS}/doc")[2]["data"] == {"v": "0"}, "a get is not delayed"
        api.down()  # killed mid-write: the delayed write never applies, its client gets no answer
        writer.join(timeout=10)
        assert answers == [None]
        api.clear_faults()
        api.up()
        assert _call(api.url, "GET", f"{CMS}/doc")[2]["data"] == {"v": "0"}
    finally:
        api.stop()


def test_every_answer_has_a_date_header_on_the_fakes_clock(tmp_path):
    from email.utils import parsedate_to_datetime
    import time

    from tests.fakes.kube_api import FakeKubeAPI

    api = FakeKubeAPI(clock_offset=7200).start()
    try:
        api.inject(verb="create", resource="configmaps", status=500, times=1)
        answers = [_call(api.url, "GET", f"{CMS}/missing"), _call(api.url, "POST", CMS, _cm("x")),
                   _call(api.url, "POST", CMS, _cm("x")), _call(api.url, "GET", "/fake/faults")]
        assert [a[0] for a in answers] == [404, 500, 201, 200]
        for _status, headers, _body in answers:
            skew = parsedate_to_datetime(headers["Date"]).timestamp() - time.time()
            assert 7200 - 60 < skew < 7200 + 60, headers["Date"]
    finally:
        api.stop()


def test_a_fake_in_another_process_takes_faults_from_flags_and_its_control_endpoint(tmp_path):
    # A separate process is the point: the faults are set from outside it.
    import subprocess
    import sys

    from tests.conftest import REPO

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.kube_api", "--port", str(port), "--fault-seed", "5",
                             "--fault", "verb=create,resource=configmaps,share=1,status=503,times=2"],
                            cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert "fake Kubernetes API on" in proc.stdout.readline()
        assert [_call(url, "POST", CMS, _cm("a"))[0] for _ in range(3)] == [503, 503, 201]
        status, _h, listed = _call(url, "PUT", "/fake/faults", json.dumps(
            {"seed": 1, "faults": [{"verb": "get|list", "resource": "configmaps", "status": 429}]}).encode())
        assert status == 200 and [f["status"] for f in listed["faults"]] == [429]
        assert _call(url, "GET", f"{CMS}/a")[0] == 429 and _call(url, "GET", CMS)[0] == 429
        assert _call(url, "PUT", "/fake/faults", json.dumps({"faults": [{"verb": "bogus", "status": 500}]}).encode())[0] == 400
        assert _call(url, "DELETE", "/fake/faults")[0] == 200
        assert _call(url, "GET", f"{CMS}/a")[0] == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_fault_spec_is_parsed_and_a_bad_one_refused():
    from tests.fakes.kube_api import Fault

    fault = Fault.parse("verb=update|patch,resource=configmaps,name=serve-deliveries,share=0.15,delay=2-10")
    assert (fault.verb, fault.resource, fault.name, fault.share, fault.delay) == (
        "update|patch", "configmaps", "serve-deliveries", 0.15, (2.0, 10.0))
    assert Fault.parse("verb=*,drop=after,times=1").drop == "after"
    for bad in ("verb=put,status=500", "share=1.5,status=500", "status=200", "drop=sideways", "share=0.5",
                "status=500,drop=after"):
        with pytest.raises(ValueError):
            Fault.parse(bad)


def test_through_the_client_a_lost_answer_to_a_replace_comes_back_as_a_conflict_with_itself(kube_api, k8s):
    # urllib3 retries an idempotent method (PUT, GET, DELETE) after a dropped answer; the retried
    # replace carries the version its first attempt already moved: the writer meets its own write as 409.
    client, api = k8s
    kube_api.seed({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doc", "namespace": NS},
                   "data": {"v": "0"}})
    core = client.CoreV1Api(api)
    read = core.read_namespaced_config_map("doc", NS)
    read.data = {"v": "mine"}
    kube_api.inject(verb="update", resource="configmaps", drop="after", times=1)
    with pytest.raises(client.exceptions.ApiException) as conflict:
        core.replace_namespaced_config_map("doc", NS, read)
    assert conflict.value.status == 409
    assert kube_api.get("", "configmaps", NS, "doc")["data"] == {"v": "mine"}, "the first attempt applied"
    assert [r.fault for r in kube_api.writes()] == ["dropped after applying", None]
