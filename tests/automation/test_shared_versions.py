"""resourceVersions are opaque (issue 22 item 5): the episodes store keeps the answer to the request
it sent last, never the one whose version looks larger. The loopback API server hands out one
increasing counter, which hides the difference; its `versions` hook hands out versions that
decrease, or are not numbers at all, as a real API server may. Requests are counted, never timed.

Before this change `shared._remember` compared versions as integers: with decreasing versions it
kept the document it had before its own write, and with non-numeric ones it kept whichever answer
came back last; either way its next write started from a stale version and met a 409 (a re-read
and a second PUT)."""

from __future__ import annotations

import threading

from opsctl.automation.shared import SharedEpisodeStore
from opsctl.automation.shared_access import EPISODES
from opsctl.clock import SimClock
from opsctl.fencing import Term
from tests.automation.test_shared_trigger_path import DOC, STARTS, kube_store, on_episodes, seeded


def leader(api, tmp_path, clock) -> SharedEpisodeStore:
    return SharedEpisodeStore(kube_store(api), local_path=tmp_path / "a.sqlite", clock=clock.now,
                              owner="serve-a:1", term=lambda: Term("serve-a", 3))


def test_with_decreasing_versions_each_write_starts_from_its_own_last_write(kube_api, tmp_path):
    kube_api.versions = lambda n: str(10**9 - n)  # every write's version is a smaller number
    seeded(kube_api)
    a = leader(kube_api, tmp_path, SimClock(1000))
    assert a.claim_due_restore() is None  # the read the writes start from
    before = len(kube_api.requests)

    start = a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    assert start is not None
    a.record_intent("page", "opsctl-automation-availability-databricks", "failed over")
    a.record_intent("ticket", "opsctl-automation-availability-databricks", "failed over")

    # One PUT per write, none refused (before: PUT, then PUT 409, GET, PUT for each later write).
    assert on_episodes(kube_api, before) == ["PUT", "PUT", "PUT"]
    stored = kube_store(kube_api).get(EPISODES).data
    assert sorted(stored["intents"]) == ["page:opsctl-automation-availability-databricks",
                                         "ticket:opsctl-automation-availability-databricks"]


def test_a_read_sent_before_a_write_and_answered_after_it_is_not_kept(kube_api, tmp_path):
    kube_api.versions = lambda n: f"rv-{n:x}"  # opaque: not numbers
    seeded(kube_api)
    a = leader(kube_api, tmp_path, SimClock(1000))
    assert a.claim_due_restore() is None  # known: the seeded version
    # The next read of the document is answered only once released, with what it read when it came.
    kube_api.inject(verb="get", resource="configmaps", name=DOC, hold=True, when="after", times=1)
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(len(a.episodes())))
    reader.start()
    for _ in range(500):
        if kube_api.held():
            break
        threading.Event().wait(0.01)
    assert kube_api.held() == 1  # the read is in flight, holding the seeded version

    start = a.begin_firing("availability", "f1", "databricks", STARTS, failover=True)  # sent after it
    assert start is not None
    kube_api.release()
    reader.join(10)
    assert seen == [0]  # the read answered the document as it was before the write
    before = len(kube_api.requests)

    a.record_intent("page", "opsctl-automation-availability-databricks", "failed over")
    # The write starts from this replica's own last write, not from the read answered after it
    # (before: PUT 409 from the read's version, then GET, PUT).
    assert on_episodes(kube_api, before) == ["PUT"]
    stored = kube_store(kube_api).get(EPISODES).data
    assert stored["episodes"][start.episode.id]["failover"] == "started"
    assert list(stored["intents"]) == ["page:opsctl-automation-availability-databricks"]
