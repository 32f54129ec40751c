"""opsctl.automation.queue: a bounded all-or-none queue with per-partition order on worker threads."""

from __future__ import annotations

import threading
import zlib

import pytest

from opsctl.automation.queue import WorkQueue
from tests.conftest import wait_until


class Recorder:
    """A handler that records what each worker thread handled, optionally held until released."""

    def __init__(self, hold: bool = False):
        self.lock = threading.Lock()
        self.handled: list[tuple[str, str]] = []  # (thread name, key)
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        self.started = threading.Semaphore(0)

    def __call__(self, key: str) -> None:
        self.started.release()
        assert self.gate.wait(10), "the test never released the held worker"
        with self.lock:
            self.handled.append((threading.current_thread().name, key))

    def keys(self) -> list[str]:
        with self.lock:
            return [k for _, k in self.handled]


def test_sizes_below_one_are_refused():
    with pytest.raises(ValueError):
        WorkQueue(0, 1, lambda key: None)
    with pytest.raises(ValueError):
        WorkQueue(1, 0, lambda key: None)


def test_every_offered_key_is_handled_once_and_a_duplicate_key_is_queued_once():
    rec = Recorder()
    q = WorkQueue(10, 2, rec, name="t")
    q.start()
    try:
        assert q.offer([("a", "k1"), ("b", "k2"), ("a", "k1")])
        wait_until(lambda: len(rec.keys()) == 2, what="both keys handled")
        wait_until(lambda: q.depth == 0 and q.busy == 0, what="the queue to drain")
    finally:
        q.stop()
    assert sorted(rec.keys()) == ["k1", "k2"]


def test_an_offer_that_does_not_fit_takes_none_of_its_items():
    rec = Recorder(hold=True)
    q = WorkQueue(3, 1, rec, name="t")
    q.start()
    try:
        assert q.offer([("p", "k1")])
        assert rec.started.acquire(timeout=10)  # k1 is being handled (still counted until done)
        assert q.offer([("p", "k2"), ("p", "k3")])
        assert q.depth == 3 and q.room() == 0 and q.busy == 1
        assert not q.offer([("p", "k4")])  # one more than capacity
        assert q.depth == 3
        rec.gate.set()
        wait_until(lambda: q.depth == 0, what="the queue to drain")
        assert q.room() == 3
    finally:
        rec.gate.set()
        q.stop()
    assert rec.keys() == ["k1", "k2", "k3"]
    assert "k4" not in rec.keys()


def test_all_or_none_counts_only_keys_not_already_queued():
    rec = Recorder(hold=True)
    q = WorkQueue(2, 1, rec, name="t")
    q.start()
    try:
        assert q.offer([("p", "k1"), ("p", "k2")])
        # k1 and k2 are queued already: only k3 is new, and 2 + 1 > 2
        assert not q.offer([("p", "k1"), ("p", "k3")])
        assert q.offer([("p", "k1"), ("p", "k2")])  # nothing new: fits
        assert q.depth == 2
    finally:
        rec.gate.set()
        q.stop()
    assert rec.keys() == ["k1", "k2"]


def test_one_partition_is_handled_in_arrival_order_by_one_worker():
    workers = 4
    rec = Recorder()
    q = WorkQueue(1000, workers, rec, name="w")
    partitions = ["databricks", "internal", "spare", "openai"]
    items = [(p, f"{p}-{i}") for i in range(50) for p in partitions]
    q.start()
    try:
        for item in items:
            assert q.offer([item])
        wait_until(lambda: len(rec.keys()) == len(items), what="every item handled")
    finally:
        q.stop()
    for p in partitions:
        handled = [(thread, key) for thread, key in rec.handled if key.startswith(f"{p}-")]
        assert [key for _, key in handled] == [f"{p}-{i}" for i in range(50)]
        expected_worker = f"w-{zlib.crc32(p.encode()) % workers}"  # the documented partitioning
        assert {thread for thread, _ in handled} == {expected_worker}


def test_a_failing_handler_does_not_kill_its_worker():
    handled = []

    def handle(key):
        if key == "bad":
            raise RuntimeError("boom")
        handled.append(key)

    q = WorkQueue(10, 1, handle, name="t")
    q.start()
    try:
        assert q.offer([("p", "bad")])
        assert q.offer([("p", "good")])
        wait_until(lambda: handled == ["good"], what="the item after the failing one")
        assert q.depth == 0
    finally:
        q.stop()


def test_stop_finishes_what_is_queued_and_then_refuses_offers():
    rec = Recorder(hold=True)
    q = WorkQueue(10, 1, rec, name="t")
    q.start()
    assert q.offer([("p", "k1"), ("p", "k2"), ("p", "k3")])
    assert rec.started.acquire(timeout=10)
    stopper = threading.Thread(target=q.stop)
    stopper.start()
    # k2 is queued already: offering it again adds nothing, and is refused once the queue is stopping
    wait_until(lambda: not q.offer([("p", "k2")]), what="offers refused once stopping")
    rec.gate.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert rec.keys() == ["k1", "k2", "k3"]
    assert all(not t.is_alive() for t in q._threads)
