"""The incident store on both backends (a file per incident; one ConfigMap per incident on the
loopback API server): grouping (auth then latency on one vendor: one incident), the correlation
window, compare-and-swap under concurrent writers (409), two replicas opening at once (one
incident), fencing of a stale term, a lost answer recognised by its write id, a malformed record."""

from __future__ import annotations

import threading

import pytest

from opsctl.config import KubernetesSettings
from opsctl.errors import NoDataError
from opsctl.fencing import FencedError, Term
from opsctl.incident.file import file_incident_store
from opsctl.incident.grouping import dedup_key, incident_id, service_group_key
from opsctl.incident.kubernetes import kubernetes_incident_store
from opsctl.incident.record import IncidentAlert, MalformedIncident
from opsctl.traffic.kube import Kube

NS = "ops"
SERVICE = "llm-inference"


class Clock:
    def __init__(self, t: float = 1_796_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def alert(fp: str, *, cause: str = "auth", backend: str = "vendor", status: str = "firing", name: str = "SloBurn",
          starts: str = "2026-12-07T08:00:00Z") -> IncidentAlert:
    return IncidentAlert(fingerprint=fp, alertname=name, starts_at=starts, status=status, backend=backend,
                         cause=cause, severity="page", slo="availability")


@pytest.fixture(params=["file", "kubernetes"])
def make(request, tmp_path):
    """A factory of stores on one backend (several stores: several replicas), sharing `clock`."""
    clock = Clock()

    def factory(term=None, url=None):
        if request.param == "file":
            return file_incident_store(tmp_path, service=SERVICE, term=term, clock=clock)
        api = request.getfixturevalue("kube_api")
        kube = Kube(KubernetesSettings(host=url or api.url, namespace=NS, timeout=5))
        return kubernetes_incident_store(kube, namespace=NS, service=SERVICE, term=term, clock=clock)

    factory.clock = clock  # type: ignore[attr-defined]
    return factory


def test_auth_then_latency_on_one_vendor_join_one_incident(make):
    store = make()
    first = store.take_alert(alert("a1", cause="auth"))
    make.clock.t += 14 * 60
    second = store.take_alert(alert("l1", cause="latency", name="SloLatencyBurn"))
    assert first.opened and not second.opened
    assert second.incident.id == first.incident.id
    assert second.new_cause == "latency" and second.new_backend is None
    assert second.incident.causes == ("auth", "latency")
    assert second.incident.backends == ("vendor",)
    assert [i.id for i in store.incidents()] == [first.incident.id]


def test_the_id_is_the_service_the_opening_instant_and_the_alert(make):
    store = make()
    joined = store.take_alert(alert("a1"))
    # 1_796_000_000 s is 2026-11-30T00:53:20Z (date -u -d @1796000000); the 4 hex are sha256("a1\0startsAt")'s first four
    assert joined.incident.id.startswith(f"{SERVICE}-20261130T005320Z-")
    assert joined.incident.id == incident_id(SERVICE, make.clock.t, "a1", "2026-12-07T08:00:00Z")
    assert len(joined.incident.id.rsplit("-", 1)[1]) == 4


def test_an_internal_alert_adds_the_second_backend(make):
    store = make()
    store.take_alert(alert("a1", backend="vendor"))
    joined = store.take_alert(alert("i1", backend="internal", cause="latency"))
    assert joined.incident.backends == ("vendor", "internal") and joined.new_backend == "internal"


def test_a_repeat_of_the_same_alert_changes_nothing(make):
    store = make()
    store.take_alert(alert("a1"))
    again = store.take_alert(alert("a1"))
    assert not again.opened and not again.new_alert and len(again.incident.alerts) == 1


def test_resolved_then_quiet_past_the_window_closes_and_a_new_alert_opens_another(make):
    store = make()
    first = store.take_alert(alert("a1")).incident
    resolved = store.take_alert(alert("a1", status="resolved"))
    assert resolved.incident.state == "resolved"
    make.clock.t += 10 * 60  # inside the 15-minute window: a new alert joins (and reopens) it
    inside = store.take_alert(alert("a2", starts="2026-12-07T08:10:00Z"))
    assert inside.incident.id == first.id and inside.reopened and inside.incident.state == "open"
    store.take_alert(alert("a2", starts="2026-12-07T08:10:00Z", status="resolved"))
    make.clock.t += 15 * 60
    assert [i.id for i in store.close_due()] == [first.id]
    assert store.open_incident() is None
    later = store.take_alert(alert("a3", starts="2026-12-07T08:40:00Z"))
    assert later.opened and later.incident.id != first.id
    assert store.get(first.id).state == "closed"


def test_an_incident_that_moved_traffic_does_not_close_before_it_is_restored(make):
    from opsctl.incident.record import IncidentMove

    store = make()
    inc = store.take_alert(alert("a1")).incident
    store.change(inc.id, lambda i: i.with_move(IncidentMove(kind="failover", backend="vendor", op_id="op1",
                                                            status="applied", at=make.clock.t)))
    assert store.take_alert(alert("a1", status="resolved")).incident.state == "restoring"
    make.clock.t += 3600
    assert store.close_due() == []
    store.change(inc.id, lambda i: i.with_move(IncidentMove(kind="restore", backend="vendor", op_id="op2",
                                                            status="applied", at=make.clock.t)))
    assert [i.id for i in store.close_due()] == [inc.id]


def test_concurrent_changes_lose_nothing(make):
    store = make()
    inc = store.take_alert(alert("a1")).incident
    writers, each = 4, 5

    errors: list[BaseException] = []

    def bump():
        from opsctl.errors import ConflictError

        try:
            for _ in range(each):
                for _attempt in range(50):  # as the automation does: a change that met 8 concurrent writes is retried
                    try:
                        store.change(inc.id, lambda i: i.changed(retry={"n": i.retry.get("n", 0) + 1}))
                        break
                    except ConflictError:
                        continue
                else:
                    raise AssertionError("50 rounds of 8 compare-and-swap attempts all met a concurrent write")
        except BaseException as exc:  # a thread's exception would otherwise only be printed
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.get(inc.id).retry == {"n": 20.0}  # 4 writers x 5 increments, none lost to a 409


def test_two_replicas_opening_at_once_make_one_incident(make):
    stores = [make(), make(), make()]
    results: list = []
    barrier = threading.Barrier(3)

    def take(i):
        barrier.wait()
        results.append(stores[i].take_alert(alert(f"fp{i}", starts=f"2026-12-07T08:00:0{i}Z")))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    open_now = stores[0].open_incident()
    assert open_now is not None
    assert sum(r.opened for r in results if r.incident.id == open_now.id) == 1
    assert {a.fingerprint for a in open_now.alerts} == {"fp0", "fp1", "fp2"}
    assert [i.id for i in stores[0].incidents(open_only=True)] == [open_now.id]


def test_a_write_under_a_stale_term_is_fenced_and_changes_nothing(make):
    new_term, old_term = Term(holder="b", epoch=2), Term(holder="a", epoch=1)
    successor = make(term=lambda: new_term)
    stale = make(term=lambda: old_term)
    inc = successor.take_alert(alert("a1")).incident
    assert inc.term == "b@2"
    with pytest.raises(FencedError) as fenced:
        stale.change(inc.id, lambda i: i.changed(state="mitigated"))
    assert fenced.value.exit_code == 5
    with pytest.raises(FencedError):
        stale.take_alert(alert("a2"))
    assert successor.get(inc.id).state == "open" and len(successor.get(inc.id).alerts) == 1
    # a person's write (no term) is compare-and-swapped only and keeps the leader's fence
    person = make()
    taken = person.take_over(inc.id, by="alice", reason="hands on")
    assert taken.takeover.by == "alice" and taken.term == "b@2"


def test_a_malformed_record_is_refused_with_its_name(make, tmp_path):
    store = make()
    inc = store.take_alert(alert("a1")).incident
    from opsctl.incident.grouping import document_name

    doc = store.state.get(document_name(inc.id, SERVICE))
    store.state.put(doc.name, {**doc.data, "alerts": "not a list"}, version=doc.version)
    with pytest.raises(MalformedIncident) as bad:
        store.get(inc.id)
    assert isinstance(bad.value, NoDataError) and bad.value.exit_code == 3
    assert doc.name in bad.value.message


def test_unknown_keys_of_a_newer_writer_are_kept(make):
    store = make()
    inc = store.take_alert(alert("a1")).incident
    from opsctl.incident.grouping import document_name

    doc = store.state.get(document_name(inc.id, SERVICE))
    store.state.put(doc.name, {**doc.data, "newer": {"x": 1}}, version=doc.version)
    store.change(inc.id, lambda i: i.changed(state="mitigated"))
    assert store.state.get(doc.name).data["newer"] == {"x": 1}


def test_a_create_whose_answer_was_lost_is_recognised_by_its_write_id(kube_api):
    from tests.automation.fault_proxy import FaultProxy, writes_to

    proxy = FaultProxy(kube_api.url).start()
    try:
        kube = Kube(KubernetesSettings(host=proxy.url, namespace=NS, timeout=5))
        store = kubernetes_incident_store(kube, namespace=NS, service=SERVICE, clock=Clock())
        proxy.lose_answer(writes_to("/configmaps"))
        joined = store.take_alert(alert("a1"))
        assert proxy.lost, "no answer was dropped"
        assert joined.opened and store.state.own_writes == 1
        assert [i.id for i in store.incidents()] == [joined.incident.id]
    finally:
        proxy.stop()


def test_the_dedup_key_is_alertmanagers_sha256_of_the_group_key():
    key = service_group_key('{}/{severity=~"page|ticket"}', "llm-inference")
    assert key == '{}/{severity=~"page|ticket"}:{service="llm-inference"}'
    # sha256sum of that text, computed outside Python
    assert dedup_key(key) == "2e3e25886c114b50733bbb38f4f9ca7a6d5730dce04921eff06a618f81c14176"
