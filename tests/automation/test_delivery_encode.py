"""The delivery log's writes do each piece's JSON work once (issue 22, the team-mode p99): a
delivery recorded into a piece this replica last wrote (from the version it knew) encodes the piece
once (the size bound is known from that write, so the piece is not measured by a second encoding) and does not parse the
API server's echo of its own write; the version it last wrote is never changed (copy on write),
so a compare-and-swap that fails starts again from what the store holds. Counted on the stdlib's
json calls over the piece, on the loopback API server through the official client."""

from __future__ import annotations

import json

import pytest

from opsctl.automation import delivery_pieces, delivery_store
from opsctl.automation.delivery_pieces import piece_name, piece_of
from opsctl.automation.delivery_store import SharedDeliveryLog
from opsctl.automation.idempotency import NewEvent
from opsctl.clock import SimClock

PIECE = 5


def event(key: str, needs_action: bool = False) -> NewEvent:
    return NewEvent(key, "alertmanager", "databricks", {"status": "firing", "labels": {"alertname": key}},
                    needs_action)


def keys(n: int, start: int = 0) -> list[str]:
    return [k for k in (f"key-{i}" for i in range(start, start + 40 * n)) if piece_of(k) == PIECE][:n]


@pytest.fixture
def log(kube_api):
    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube

    store = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace="ops", timeout=10)),
                                 namespace="ops", service="llm-inference")
    return SharedDeliveryLog(store, clock=SimClock(1000).now, owner="serve-a:1")


class JsonCalls:
    """json.dumps of a piece of the delivery log (or its events) and json.loads of a piece's text."""

    def __init__(self, monkeypatch):
        self.dumps = self.loads = 0
        real_dumps, real_loads = json.dumps, json.loads

        def dumps(obj, *args, **kwargs):
            if isinstance(obj, dict) and ("events" in obj or any(k.startswith("key-") for k in obj)):
                self.dumps += 1
            return real_dumps(obj, *args, **kwargs)

        def loads(text, *args, **kwargs):
            if isinstance(text, (str, bytes)) and text[:10] in ('{"events":', b'{"events":'):
                self.loads += 1
            return real_loads(text, *args, **kwargs)

        monkeypatch.setattr(json, "dumps", dumps)
        monkeypatch.setattr(json, "loads", loads)


def test_a_delivery_into_a_piece_this_replica_wrote_encodes_it_once_and_parses_no_echo(log, kube_api, monkeypatch):
    first = keys(60)
    # The piece's first write starts from a read (then creates it): its size is measured, as after
    # any re-read; the next write starts from what this replica wrote, whose size it knows.
    assert len(log.admit([event(k) for k in first[:-1]])) == 59
    assert len(log.admit([event(first[-1])])) == 1
    calls = JsonCalls(monkeypatch)
    [late] = keys(1, start=10_000)
    assert [e.key for e in log.admit([event(late)])] == [late]
    assert (calls.dumps, calls.loads) == (1, 0)
    stored = json.loads(kube_api.get("", "configmaps", "ops", f"opsctl-llm-inference-{piece_name(PIECE)}")
                        ["data"]["state.json"])["events"]
    assert set(stored) == set(first) | {late}


def test_a_sweep_between_two_writes_reads_the_version_written_and_the_next_write_still_encodes_once(
        log, monkeypatch):
    first = keys(30)
    log.admit([event(k) for k in first[:-1]])
    log.admit([event(first[-1])])  # written from what this replica wrote: its size known
    assert log.due(older_than=0, limit=10) == []  # the leader's sweep reads every piece
    calls = JsonCalls(monkeypatch)
    [late] = keys(1, start=10_000)
    assert [e.key for e in log.admit([event(late)])] == [late]
    assert (calls.dumps, calls.loads) == (1, 0)  # the piece read back is the one written: not measured again


def test_the_version_last_written_is_never_changed_and_a_lost_swap_starts_from_the_store(log, kube_api):
    [k] = keys(1)
    log.admit([event(k, needs_action=True)])
    before = log.pieces._known[PIECE]
    snapshot = json.dumps(before.data, sort_keys=True)
    claimed = log.claim(k)
    assert claimed is not None and claimed.attempts == 1
    # Someone else writes the piece meanwhile: this replica's next write meets 409 and re-reads.
    name = f"opsctl-llm-inference-{piece_name(PIECE)}"
    cm = kube_api.get("", "configmaps", "ops", name)
    other = json.loads(cm["data"]["state.json"])
    other["events"]["other-key"] = {"source": "alertmanager", "partition": "x", "attempts": 0, "received_at": 1,
                                    "not_before": 0, "state": "done", "done_at": 1, "result": {}}
    from kubernetes import client

    cm["data"]["state.json"] = json.dumps(other)
    client.CoreV1Api(client.ApiClient(client.Configuration(host=kube_api.url))).replace_namespaced_config_map(
        name, "ops", cm)
    log.finish(k, {"actions": ["failover"], "policies": ("p",)})
    assert json.dumps(before.data, sort_keys=True) == snapshot  # the admit's version, as it was written
    stored = json.loads(kube_api.get("", "configmaps", "ops", name)["data"]["state.json"])["events"]
    assert stored[k]["state"] == "done" and "payload" not in stored[k] and "other-key" in stored
    assert stored[k]["result"] == {"actions": ["failover"], "policies": ["p"]}
    assert log.state(k).state == "done"


def test_a_piece_near_its_bound_is_still_measured_and_what_does_not_fit_waits(log, monkeypatch):
    monkeypatch.setattr(delivery_pieces, "MAX_BYTES", 6000)
    big = {"status": "firing", "labels": {"alertname": "x" * 1500}}
    batch = [NewEvent(k, "alertmanager", "databricks", big, True) for k in keys(3)]
    assert len(log.admit(batch[:1])) == 1
    with pytest.raises(delivery_store.DeliveryLogFull):
        log.admit(batch[1:] + [NewEvent(k, "alertmanager", "databricks", big, True) for k in keys(3, 20_000)])
    assert delivery_pieces._size(log.pieces.read(PIECE).raw) <= 6000
