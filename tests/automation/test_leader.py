"""Leader election on a coordination.k8s.io/v1 Lease, through the official client against the loopback
API server. Rounds are driven one at a time with a manual monotonic clock: no sleeps, no timing."""

from __future__ import annotations

import pytest

from opsctl.automation.leader import LeaseElector
from opsctl.config import KubernetesSettings
from opsctl.traffic.kube import Kube

NS = "ops"
DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def api(kube_api):
    return kube_api


def elector(api, identity: str, clock: Clock, changes: list | None = None) -> LeaseElector:
    kube = Kube(KubernetesSettings(host=api.url, namespace=NS))
    return LeaseElector(kube, name="opsctl-serve", namespace=NS, identity=identity, lease_duration=DURATION,
                        renew_deadline=DEADLINE, retry_period=RETRY, monotonic=clock,
                        on_change=(lambda leader: changes.append((identity, leader))) if changes is not None else None)


def lease(api) -> dict:
    return api.get("coordination.k8s.io", "leases", NS, "opsctl-serve")


def test_the_first_replica_creates_the_lease_and_the_other_follows(api):
    clock, changes = Clock(), []
    a, b = elector(api, "serve-a", clock, changes), elector(api, "serve-b", clock, changes)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert a.is_leader and not b.is_leader
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "serve-a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert changes == [("serve-a", True)]
    assert b.holder == "serve-a"


def test_the_leader_renews_and_a_follower_waits_while_it_does(api):
    clock = Clock()
    a, b = elector(api, "serve-a", clock), elector(api, "serve-b", clock)
    a.try_acquire_or_renew()
    renewed = lease(api)["spec"]["renewTime"]
    for _ in range(20):  # 40 s of renewals every 2 s: far past the lease duration, never taken
        clock.t += RETRY
        assert a.try_acquire_or_renew() is True
        assert b.try_acquire_or_renew() is False
    assert lease(api)["spec"]["renewTime"] != renewed
    assert lease(api)["spec"]["holderIdentity"] == "serve-a"


def test_a_dead_leaders_lease_is_taken_over_after_the_lease_duration_as_the_follower_observed_it(api):
    clock = Clock()
    a, b = elector(api, "serve-a", clock), elector(api, "serve-b", clock)
    a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is False  # b first sees the record now
    # a dies: no more renewals. Before lease_duration has passed since b saw the record, b waits.
    clock.t += DURATION - 0.5
    assert b.try_acquire_or_renew() is False
    clock.t += 1.0
    assert b.try_acquire_or_renew() is True
    spec = lease(api)["spec"]
    assert spec["holderIdentity"] == "serve-b" and spec["leaseTransitions"] == 1
    # the old leader, were it to come back, finds it held and does not act
    assert a.try_acquire_or_renew() is False


def test_a_leader_that_cannot_renew_stops_acting_within_the_renew_deadline(api):
    clock = Clock()
    a = elector(api, "serve-a", clock)
    a.try_acquire_or_renew()
    api.inject_conflicts("coordination.k8s.io", "leases", NS, "opsctl-serve", 100)  # every renewal meets 409
    clock.t += RETRY
    assert a.try_acquire_or_renew() is False
    assert a.is_leader  # still inside its renew deadline
    clock.t += DEADLINE - RETRY
    assert not a.is_leader  # renew_deadline (10 s) < lease_duration (15 s): it stops before anyone may take over


def test_release_on_shutdown_hands_over_at_once(api):
    clock, changes = Clock(), []
    a, b = elector(api, "serve-a", clock, changes), elector(api, "serve-b", clock, changes)
    a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is False
    assert a.release() is True
    assert not a.is_leader
    assert not lease(api)["spec"].get("holderIdentity")
    assert b.try_acquire_or_renew() is True  # no waiting for the lease to expire
    assert changes == [("serve-a", True), ("serve-a", False), ("serve-b", True)]


def test_two_replicas_racing_for_a_free_lease_elect_exactly_one(api):
    import threading

    clock = Clock()
    a, b = elector(api, "serve-a", clock), elector(api, "serve-b", clock)
    a.try_acquire_or_renew()
    a.release()
    electors = [elector(api, f"serve-{i}", clock) for i in range(6)]
    barrier = threading.Barrier(len(electors))
    won = []

    def race(e):
        barrier.wait()
        if e.try_acquire_or_renew():
            won.append(e.identity)

    threads = [threading.Thread(target=race, args=(e,)) for e in electors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1
    assert lease(api)["spec"]["holderIdentity"] == won[0]


def test_the_term_is_the_holder_and_the_transitions_at_acquisition_and_none_when_not_leading(api):
    clock = Clock()
    a, b = elector(api, "serve-a", clock), elector(api, "serve-b", clock)
    assert a.term is None
    a.try_acquire_or_renew()
    assert str(a.term) == "serve-a@0" and b.term is None
    clock.t += RETRY
    a.try_acquire_or_renew()  # a renewal keeps the term
    assert str(a.term) == "serve-a@0"
    # A stops renewing (paused): past renew_deadline it no longer has a term, before B may take over.
    clock.t += DEADLINE
    assert a.term is None
    b.try_acquire_or_renew()  # B first sees the record here; it expires lease_duration later
    clock.t += DURATION
    assert b.try_acquire_or_renew() is True
    assert str(b.term) == "serve-b@1" and lease(api)["spec"]["leaseTransitions"] == 1
    assert b.term.is_older_than(None) is False and a.term is None
    # A comes back: it reads B's Lease, is not the holder, and its old term stays gone.
    assert a.try_acquire_or_renew() is False
    assert a.term is None


def test_a_leaders_renewal_is_one_write_with_its_last_resource_version_and_no_read(api):
    clock = Clock()
    a = elector(api, "serve-a", clock)
    assert a.try_acquire_or_renew() is True  # acquire: read (404), create
    before = len(api.requests)
    for _ in range(5):
        clock.t += RETRY
        assert a.try_acquire_or_renew() is True
    renewals = api.requests[before:]
    assert [r.method for r in renewals] == ["PUT"] * 5
    assert [r.body["metadata"]["resourceVersion"] for r in renewals[1:]] == \
        [str(int(r.body["metadata"]["resourceVersion"]) + 1) for r in renewals[:-1]]  # each the one before's answer
    assert a.rounds == {"renew": 5, "read": 1}


def test_a_renewal_meeting_409_reads_and_a_taken_lease_makes_the_old_leader_step_down(api):
    clock = Clock()
    a, b = elector(api, "serve-a", clock), elector(api, "serve-b", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    clock.t += DURATION + 1  # a was paused: b takes over
    assert b.try_acquire_or_renew() is True
    assert a.try_acquire_or_renew() is False  # its renewal meets 409, it reads b's Lease
    assert not a.is_leader and a.term is None and a.holder == "serve-b"
    assert a.rounds == {"renew": 1, "read": 2}
    assert lease(api)["spec"]["holderIdentity"] == "serve-b"


def test_a_leader_keeps_its_lease_while_every_api_call_is_slow(api):
    """Every call takes `LATENCY`; sizes are the shipped 20 s / 15 s / 2 s against a 5 s API, scaled by 0.1,
    so the test is bounded: the leader renews without standing down once, no transition."""
    from tests.conftest import wait_until

    latency, duration, deadline, retry = 0.5, 2.0, 1.5, 0.2
    changes: list = []
    kube = Kube(KubernetesSettings(host=api.url, namespace=NS))
    a = LeaseElector(kube, name="opsctl-serve", namespace=NS, identity="serve-a", lease_duration=duration,
                     renew_deadline=deadline, retry_period=retry,
                     on_change=lambda leader: changes.append(leader))
    assert a.try_acquire_or_renew() is True
    api.inject(verb="*", resource="leases", delay=latency)
    a.start()
    try:
        wait_until(lambda: a.rounds["renew"] >= 8, timeout=30, what="8 renewals under latency")
        assert a.is_leader
    finally:
        a.stop(release=False)
        api.clear_faults()
    assert changes == [True, False]  # acquired once; the False is stop()
    assert lease(api)["spec"]["leaseTransitions"] == 0 and lease(api)["spec"]["holderIdentity"] == "serve-a"
    assert a.rounds["read"] == 1  # the acquisition's: never a read round under latency


def test_a_slow_on_change_never_holds_up_the_renewals(api):
    """What a new leader sets off (recovering its predecessor's work: state calls, 5 s each on a slow
    API server) runs off the renewal thread: the leader keeps renewing while its callback is busy.
    Before: the callback ran on the renewal thread, which renewed nothing until it returned."""
    import threading

    from tests.conftest import wait_until

    busy, seen = threading.Event(), []

    def on_change(leader: bool) -> None:
        seen.append(leader)
        if leader:
            busy.wait(30)  # held until the renewals below are counted

    kube = Kube(KubernetesSettings(host=api.url, namespace=NS))
    a = LeaseElector(kube, name="opsctl-serve", namespace=NS, identity="serve-a", lease_duration=2.0,
                     renew_deadline=1.5, retry_period=0.2, on_change=on_change)
    a.start()
    try:
        wait_until(lambda: a.rounds["renew"] >= 5, timeout=20, what="5 renewals while on_change is busy")
        assert seen == [True] and a.is_leader and not busy.is_set()
    finally:
        busy.set()
        a.stop(release=False)
    assert seen == [True, False]  # in order: the acquisition's, then stop()'s
    assert lease(api)["spec"]["leaseTransitions"] == 0 and a.rounds["read"] == 1


def test_a_renewal_may_take_longer_than_what_is_left_before_the_step_down_point(api):
    """A renewal counts from its send, so its call may take up to renew_deadline whatever is left:
    sent 0.6 s before the step-down point and answered 1.5 s later, it renews. Before: its deadline
    was the 0.6 s left, it timed out (and so did urllib3's copy), and the leader stood down."""
    clock = Clock()
    a = elector(api, "serve-a", clock)
    assert a.try_acquire_or_renew() is True
    clock.t += DEADLINE - 0.6
    fault = api.inject(verb="update", resource="leases", delay=1.5, times=2)
    assert a.try_acquire_or_renew() is True
    assert fault.fired == 1  # one write, not re-sent
    assert a.is_leader and a.rounds == {"renew": 1, "read": 1}
    clock.t += DEADLINE - 0.1  # counted from that renewal's send
    assert a.is_leader


def test_a_renewal_applied_with_its_answer_lost_is_recognised_by_the_read_after_the_409(api):
    """The answer to a renewal is lost after the server applied it; its retry meets 409, and so does
    the write after the read. The read found this replica's own renewTime and term, so the leader
    counts from the lost write's send: still leading where counting from the renewal before would
    have stood it down. Before: it stood down."""
    clock, changes = Clock(), []
    a = elector(api, "serve-a", clock, changes)
    assert a.try_acquire_or_renew() is True
    api.inject(verb="update", resource="leases", drop="after", times=1)
    api.inject(verb="update", resource="leases", status=409, times=2)  # the retry, then the write after the read
    clock.t += RETRY
    lost_send = clock.t
    assert a.try_acquire_or_renew() is False
    assert a.rounds == {"renew": 1, "read": 2}  # the renewal, then a read round
    clock.t = lost_send + DEADLINE - 0.5  # past the step-down point of the renewal before (RETRY earlier)
    assert a.is_leader and a.term is not None
    clock.t = lost_send + DEADLINE
    assert not a.is_leader
    assert changes == [("serve-a", True)] and lease(api)["spec"]["leaseTransitions"] == 0


@pytest.mark.parametrize("resend, sent", [(False, 1), (True, 2)])
def test_the_leases_own_client_never_re_sends_a_timed_out_write(api, resend, sent):
    """urllib3 (the client's `retries`) sends a timed-out write once more under the same timeout, so
    one call took twice its deadline and the copy met 409: the Lease's client (`resend=False`, as
    open_elector builds it) sends it once; the default client, for the other callers, twice."""
    from kubernetes.client import CoordinationV1Api

    from opsctl.errors import OpsctlError

    kube = Kube(KubernetesSettings(host=api.url, namespace=NS), resend=resend)
    leases = CoordinationV1Api(kube.client)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "opsctl-serve", "namespace": NS}, "spec": {"holderIdentity": "serve-a"}}
    created = kube.call("create Lease", leases.create_namespaced_lease, NS, body)
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    fault = api.inject(verb="update", resource="leases", delay=1.5, times=2)
    with pytest.raises(OpsctlError, match="timed out"):  # a PUT: urllib3 re-sends PUT, never POST
        kube.call("renew Lease", leases.replace_namespaced_lease, "opsctl-serve", NS, body, _deadline=0.6)
    assert fault.fired == sent
