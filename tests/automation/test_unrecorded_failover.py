"""A failover whose result was never recorded: its worker wrote the split, then was fenced (a lost
Lease renewal under chaos) or died before it wrote the outcome on the incident, and the alert resolved before any
retry of the firing event. The incident's response still says `failover: started`; the resolve must not take
that for "traffic was not moved": the restore adopts the failover from the change record by its
operation id, and finds nothing to restore when the failover was never written.

In-process, on the real engine, incident file store, live executor and file actuator (the split
file the grammar service reads); the dying worker is the same calls a worker makes before it writes
the failover's outcome (docs/decisions/0215-responses-on-the-incident.md)."""

from __future__ import annotations

import time

import pytest

from tests.automation.helpers import alert, split, write_live_config

STARTS = "2026-11-29T12:00:00.5Z"
STARTS_CANONICAL = "2026-11-29T12:00:00.500000000Z"
NORMAL = {"databricks": 80, "internal": 20}
FAILED_OVER = {"databricks": 0, "internal": 100}


@pytest.fixture
def setup(tmp_path, healthy_store):
    from opsctl.automation.engine_factory import build_engine, incident_store
    from opsctl.automation.executors import LiveExecutor
    from opsctl.automation.fenced import FencedExecutor
    from opsctl.clock import SimClock
    from opsctl.config.loading import load_config_file

    cfg = load_config_file(write_live_config(tmp_path, automation_extra="hold_down: 60s\n", healthy_store=healthy_store))
    clock = SimClock(time.time())
    live = FencedExecutor(LiveExecutor(cfg))

    def replica():
        store = incident_store(cfg, clock=clock.now)  # the file store under the state dir, as serve's
        return store, build_engine(cfg, store, live, clock=clock.now)

    return tmp_path, clock, live, replica


def event(status: str):
    from opsctl.automation.policy import AlertEvent

    raw = alert(fingerprint="u1", starts_at=STARTS, status=status)
    payload = {"status": status, "labels": raw["labels"], "annotations": raw["annotations"],
               "starts_at": STARTS_CANONICAL, "fingerprint": "u1", "group_key": "{}", "generator_url": ""}
    return AlertEvent.from_payload(f"key-{status}", payload, time.time())


def dying_worker(engine, live, *, writes_split: bool):
    """What a worker does up to the write of its failover's outcome: the alert joins its incident,
    its response is taken (failover marked started) and, if `writes_split`, it fails over under the
    incident's dedup key and the response's key; then it is gone."""
    from opsctl.automation.actions import Context, FailoverRequest

    firing = event("firing")
    (admitted,) = engine.admit([firing]).items  # what the answer to Alertmanager waits for
    joined = admitted.joined
    policy = engine.by_name["availability"]
    begun = engine._begin(joined.incident, policy, firing, "databricks")
    assert begun.response.failover == "started"
    if writes_split:
        context = Context("availability", "SloBurnRatePage", {"backend": "databricks"}, "burning", "key-firing")
        outcome = live.failover(FailoverRequest(context, backend="databricks", emergency_in_freeze=False,
                                                incident=engine.page_key(), episode=begun.response.key))
        assert outcome.status == "applied"
    return begun.response


def resolve_and_restore(replica, clock):
    store, engine = replica()  # a new process: nothing of the first one but the incident on disk
    engine.handle_alert(event("resolved"))
    (incident,) = store.incidents(open_only=True)
    (response,) = incident.open_responses()
    assert response.state == "restore_pending"  # not closed as "traffic was not moved by this automation"
    clock.advance(61)  # the hold-down
    (taken,) = [t for t in engine.run_due_restores() if t.action == "restore"]
    return store, taken


def test_a_written_but_unrecorded_failover_is_restored_after_the_resolve(setup):
    directory, clock, live, replica = setup
    _, engine = replica()
    dying_worker(engine, live, writes_split=True)
    assert split(directory) == FAILED_OVER
    clock.advance(61)

    store, taken = resolve_and_restore(replica, clock)
    assert taken.outcome.status == "applied", taken.outcome.detail
    assert split(directory) == NORMAL
    (incident,) = store.incidents()
    assert incident.open_responses() == ()


def test_an_unrecorded_failover_that_never_wrote_the_split_has_nothing_to_restore(setup):
    directory, clock, live, replica = setup
    _, engine = replica()
    dying_worker(engine, live, writes_split=False)
    clock.advance(61)

    store, taken = resolve_and_restore(replica, clock)
    assert taken.outcome.status == "noop" and "never written" in taken.outcome.detail
    assert split(directory) is None  # never written: the configured default, untouched
    (incident,) = store.incidents()
    assert incident.open_responses() == ()
