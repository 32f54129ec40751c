"""The shared state store, both backends through the same protocol: create once, compare-and-swap,
read-modify-write under contention, bounded size, names that cannot escape; the kubernetes backend
against the loopback API server through the official client."""

from __future__ import annotations

import json
import threading

import pytest

from opsctl.config import KubernetesSettings
from opsctl.errors import ConflictError, UsageError
from opsctl.state.base import MAX_DOCUMENT_BYTES
from opsctl.state.kubernetes import KEY, KubernetesStateStore
from opsctl.state.local import LocalStateStore
from opsctl.traffic.kube import Kube

NS = "ops"




@pytest.fixture(params=["local", "kubernetes"])
def store(request, tmp_path):
    if request.param == "local":
        yield LocalStateStore(tmp_path / "state")
    else:
        api = request.getfixturevalue("kube_api")
        yield KubernetesStateStore(Kube(KubernetesSettings(host=api.url, namespace=NS, timeout=5)),
                                   namespace=NS, service="llm-inference")


def test_a_missing_document_is_none_and_is_created_once(store):
    assert store.get("traffic") is None
    doc = store.put("traffic", {"a": 1}, version=None)
    assert doc.data == {"a": 1} and doc.version
    with pytest.raises(ConflictError) as exists:
        store.put("traffic", {"a": 2}, version=None)
    assert exists.value.exit_code == 5
    assert store.get("traffic").data == {"a": 1}


def test_a_write_at_a_stale_version_is_a_conflict_and_changes_nothing(store):
    first = store.put("traffic", {"n": 1}, version=None)
    second = store.put("traffic", {"n": 2}, version=first.version)
    assert second.version != first.version
    with pytest.raises(ConflictError):
        store.put("traffic", {"n": 3}, version=first.version)
    now = store.get("traffic")
    assert now.data == {"n": 2} and now.version == second.version


def test_update_loses_no_increment_among_concurrent_writers(store):
    writers, each = 4, 5

    def bump(data):
        data = data or {"n": 0}
        data["n"] += 1
        return data

    errors = []

    def work():
        try:
            for _ in range(each):
                store.update("counter", bump, attempts=100)
        except Exception as exc:  # reported below: a lost update or an error fails the test
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert store.get("counter").data == {"n": writers * each}


def test_update_returning_none_leaves_the_document_alone(store):
    first = store.put("traffic", {"n": 1}, version=None)
    assert store.update("traffic", lambda data: None) == first
    assert store.update("absent", lambda data: None) is None
    assert store.get("absent") is None


def test_documents_are_bounded_and_names_cannot_escape(store):
    with pytest.raises(UsageError) as big:
        store.put("traffic", {"x": "y" * MAX_DOCUMENT_BYTES}, version=None)
    assert "1 MiB" in big.value.hint
    for bad in ("../etc", "Traffic", "", "a/b", "x" * 64):
        with pytest.raises(UsageError):
            store.get(bad)


def test_kubernetes_documents_are_labelled_configmaps_written_with_the_version_read(kube_api):
    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=5)),
                                 namespace=NS, service="LLM Inference")
    doc = store.put("traffic", {"split": {"internal": 20}}, version=None)
    cm = kube_api.get("", "configmaps", NS, "opsctl-llm-inference-traffic")
    assert json.loads(cm["data"][KEY]) == {"split": {"internal": 20}}
    assert cm["metadata"]["labels"]["app.kubernetes.io/name"] == "opsctl"
    assert cm["metadata"]["labels"]["opsctl.io/document"] == "traffic"
    store.put("traffic", {"split": {"internal": 30}}, version=doc.version)
    [put] = [r for r in kube_api.writes() if r.method == "PUT"]
    assert put.body["metadata"]["resourceVersion"] == doc.version
    assert json.loads(kube_api.get("", "configmaps", NS, "opsctl-llm-inference-traffic")["data"][KEY]) == {
        "split": {"internal": 30}}


def test_kubernetes_a_document_deleted_since_it_was_read_is_a_conflict(kube_api):
    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=5)),
                                 namespace=NS, service="svc")
    doc = store.put("traffic", {"n": 1}, version=None)
    from kubernetes import client

    client.CoreV1Api(client.ApiClient(client.Configuration(host=kube_api.url))).delete_namespaced_config_map(
        "opsctl-svc-traffic", NS)
    with pytest.raises(ConflictError):
        store.put("traffic", {"n": 2}, version=doc.version)


def test_the_registry_opens_the_configured_backend(tmp_path, kube_api):
    import dataclasses

    from opsctl.config import StateConfig, load_config
    from opsctl.state import open_state_store
    from tests.conftest import write_config

    cfg = load_config(str(write_config(tmp_path)))
    assert open_state_store(cfg).backend == "local"
    kube = dataclasses.replace(cfg, state=StateConfig(backend="kubernetes", namespace=NS,
                                                      kubernetes=KubernetesSettings(host=kube_api.url)))
    store = open_state_store(kube)
    assert store.backend == "kubernetes" and store.namespace == NS
    bogus = dataclasses.replace(cfg, state=StateConfig.__new__(StateConfig))
    object.__setattr__(bogus.state, "backend", "etcd")
    with pytest.raises(UsageError, match="unknown state backend 'etcd'"):
        open_state_store(bogus)


def test_config_refuses_an_unknown_state_backend(tmp_path):
    from tests.conftest import run_opsctl, write_config

    config = write_config(tmp_path, "state: {backend: etcd}\n")
    result = run_opsctl("--config", str(config), "config", "validate")
    assert result.exit_code == 2 and "state.backend" in result.output, result.output


def proxied_store(kube_api):
    from tests.automation.fault_proxy import FaultProxy

    proxy = FaultProxy(kube_api.url).start()
    return proxy, KubernetesStateStore(Kube(KubernetesSettings(host=proxy.url, namespace=NS, timeout=5)),
                                       namespace=NS, service="llm-inference")


def test_an_update_whose_answer_was_lost_is_recognised_as_applied_and_not_applied_twice(kube_api):
    from tests.automation.fault_proxy import writes_to

    proxy, store = proxied_store(kube_api)
    try:
        store.put("counter", {"n": 0}, version=None)
        proxy.lose_answer(writes_to("/configmaps/opsctl-llm-inference-counter"))
        doc = store.update("counter", lambda data: {"n": data["n"] + 1})
        assert proxy.lost, "no answer was dropped"
        assert doc.data == {"n": 1}
        assert store.get("counter").data == {"n": 1}
        assert store.own_writes == 1
    finally:
        proxy.stop()


def test_transient_500_and_429_answers_are_retried_inside_the_deadline(kube_api):
    from tests.automation.fault_proxy import anything, writes_to

    proxy, store = proxied_store(kube_api)
    try:
        store.put("doc", {"a": 1}, version=None)
        proxy.fail(anything, 503, 2)
        proxy.fail(writes_to("/configmaps/opsctl-llm-inference-doc"), 429, 1)
        doc = store.update("doc", lambda data: {"a": data["a"] + 1})
        assert doc.data == {"a": 2} and store.get("doc").data == {"a": 2}
        assert proxy.failed == 3 and store.kube.transient_retries == 3
    finally:
        proxy.stop()


def test_the_store_tells_the_api_servers_time_not_this_hosts(kube_api, monkeypatch):
    import time

    monkeypatch.setenv("OPSCTL_CLOCK_OFFSET", "7200")  # this host's wall clock: 2 h ahead
    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=5)),
                                 namespace=NS, service="llm-inference")
    store.get("anything")
    assert abs(store.now() - time.time()) < 5  # the fake API server runs on the real clock


def test_a_document_handed_over_is_returned_as_it_is_and_stored_as_encoded(store):
    """put(owned=True) keeps the caller's dict (no parse of the answer) and put(encoded=...) stores
    the text it is given (not encoded twice); a fresh read gives the same values (issue 22)."""
    from opsctl.state.base import encode

    data = {"events": {"k": {"state": "done", "at": 1.5, "tags": ["a", "b"], "none": None}}}
    text = encode("pieces", data)
    doc = store.put("pieces", data, version=None, encoded=text, owned=True)
    assert doc.data is data
    again = store.get("pieces")
    assert again.data == data and again.version == doc.version
    later = {"events": {}}
    assert store.put("pieces", later, version=doc.version).data is not later  # not handed over: parsed back


def test_kubernetes_the_text_given_is_the_text_stored(kube_api):
    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=5)),
                                 namespace=NS, service="llm-inference")
    from opsctl.state.base import encode

    data = {"b": 1, "a": [1, 2]}
    store.put("traffic", data, version=None, encoded=encode("traffic", data), owned=True)
    assert kube_api.get("", "configmaps", NS, "opsctl-llm-inference-traffic")["data"][KEY] == '{"a":[1,2],"b":1}'


def test_the_state_stores_client_keeps_a_connection_for_each_of_serves_threads(tmp_path, kube_api, caplog):
    """As many reads in flight at once as serve's 20 recorder threads: each connection goes back to
    the pool, none is dropped as "Connection pool is full" (the client's default pool is 10)."""
    import dataclasses
    import logging

    from opsctl.config import StateConfig, load_config
    from opsctl.state import open_state_store
    from tests.conftest import wait_until, write_config

    cfg = load_config(str(write_config(tmp_path)))
    cfg = dataclasses.replace(cfg, state=StateConfig(backend="kubernetes", namespace=NS,
                                                     kubernetes=KubernetesSettings(host=kube_api.url, timeout=20)))
    store = open_state_store(cfg)
    store.put("traffic", {"a": 1}, version=None)
    kube_api.inject(verb="get", resource="configmaps", hold=True)
    readers = [threading.Thread(target=store.get, args=("traffic",)) for _ in range(20)]
    with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
        for t in readers:
            t.start()
        wait_until(lambda: kube_api.held() == 20, what="20 reads in flight at once")
        kube_api.clear_faults()
        for t in readers:
            t.join(timeout=30)
    assert not [t for t in readers if t.is_alive()]
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]
