"""What the service asks of a delivery log (`delivery_protocol.Deliveries`), answered by both logs:
the SQLite `DeliveryLog` and the shared `SharedDeliveryLog`; and what a sweep of the shared log's
pieces reads (only the pending and running entries it can act on or count as waiting are typed)."""

from __future__ import annotations

import inspect
import json

import pytest

from opsctl.automation.delivery_pieces import SHARDS, piece_name, piece_of
from opsctl.automation.delivery_protocol import Deliveries
from opsctl.automation.delivery_store import SharedDeliveryLog
from opsctl.automation.idempotency import DeliveryLog, NewEvent
from opsctl.clock import SimClock
from opsctl.state.local import LocalStateStore


def test_both_logs_answer_every_question_of_the_deliveries_protocol_with_its_parameters():
    """service.py asks the log it has (`Deliveries`), never probes it with getattr: the waiting
    count a sweep made (`waiting(swept=True)`) is on the protocol."""
    asked = {n for n, v in vars(Deliveries).items() if callable(v) and not n.startswith("_")}
    assert {"due", "waiting", "claim", "finish", "retry_later", "admit", "unseen", "release", "recover", "prune",
            "check", "state", "counts", "seen"} <= asked
    assert "swept" in inspect.signature(Deliveries.waiting).parameters
    for log_class in (DeliveryLog, SharedDeliveryLog):
        for name in asked:
            want = list(inspect.signature(getattr(Deliveries, name)).parameters)
            got = list(inspect.signature(getattr(log_class, name)).parameters)
            # (the shared admit may take more, keyword-only with a default: the admit recorded claimed)
            assert got[:len(want)] == want, (log_class, name)


class CountingStore(LocalStateStore):
    """The local backend of the StateStore protocol, counting the documents read."""

    reads = 0

    def get(self, name):
        self.reads += 1
        return super().get(name)


def waiting_and_due(log, clock) -> None:
    """Three events: two handed back after a failed try (waiting), one never tried (not)."""
    log.admit([NewEvent(k, "alertmanager", k, {"labels": {}}) for k in ("k1", "k2", "k3")])
    for key in ("k1", "k2"):
        assert log.claim(key) is not None
        log.retry_later(key, 2.0, {"error": "ActionFailed"})


@pytest.mark.parametrize("kind", ["local", "shared"])
def test_waiting_after_a_sweep_is_the_count_of_now_on_both_logs(tmp_path, kind):
    clock = SimClock(1000)
    if kind == "local":
        log: Deliveries = DeliveryLog(tmp_path / "d.sqlite", clock=clock.now, owner="serve-a:1")
    else:
        log = SharedDeliveryLog(LocalStateStore(tmp_path / "shared"), clock=clock.now, owner="serve-a:1")
    waiting_and_due(log, clock)
    assert log.waiting(swept=False) == 2
    assert [k for k, _ in log.due(older_than=0, limit=10)] == ["k3"]
    assert log.waiting(swept=True) == 2
    clock.advance(3)
    assert sorted(k for k, _ in log.due(older_than=0, limit=10)) == ["k1", "k2", "k3"]
    assert log.claim("k1") is not None
    log.finish("k1", {"actions": []})
    assert log.due(older_than=0, limit=10) and log.waiting(swept=True) == 1


def test_the_shared_log_answers_waiting_after_a_sweep_from_the_sweeps_own_read(tmp_path):
    """The sweep read every piece: `waiting(swept=True)` reads none again; unswept, it reads all."""
    clock = SimClock(1000)
    store = CountingStore(tmp_path / "shared")
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    waiting_and_due(log, clock)
    log.due(older_than=0, limit=10)
    before = store.reads
    assert log.waiting(swept=True) == 2
    assert store.reads == before
    assert log.waiting() == 2
    assert store.reads == before + SHARDS


def test_a_sweep_types_only_the_pending_and_running_entries_and_finds_the_same(tmp_path, caplog):
    """A piece another replica wrote is read afresh by the sweep: its finished entries (most of a
    piece) are not typed, the ones it acts on or counts are; a malformed open entry is still
    reported and never due, and `counts` still reads every entry."""
    clock = SimClock(1000)
    store = LocalStateStore(tmp_path / "shared")
    a = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1")
    quiet = [f"quiet-{i}" for i in range(40)]
    a.admit([NewEvent(k, "alertmanager", "p", {"labels": {}}, False) for k in quiet])
    a.admit([NewEvent(k, "alertmanager", "p", {"labels": {"n": k}}) for k in ("open-1", "open-2")])
    index = piece_of("open-1")
    doc = store.get(piece_name(index))
    data = json.loads(json.dumps(doc.data))
    data["events"]["bad-open"] = {"source": "alertmanager", "partition": "p", "state": "pending", "received_at": "x"}
    data["events"]["bad-shape"] = ["not", "an", "object"]
    store.put(piece_name(index), data, version=doc.version)
    clock.advance(1)

    b = SharedDeliveryLog(store, clock=clock.now, owner="serve-b:1")
    with caplog.at_level("WARNING", logger="opsctl.automation"):
        due = [k for k, _ in b.due(older_than=0, limit=100)]
    assert sorted(due) == ["open-1", "open-2"]
    assert b.waiting(swept=True) == 0
    typed = {k for i in range(SHARDS) for k in b.pieces._typed.get(i, {})}
    assert typed == {"open-1", "open-2"}, "only the open entries a sweep reads are typed"
    assert "bad-open: received_at: expected a number" in caplog.text
    assert "bad-shape: expected an object" in caplog.text
    assert b.counts() == {"done": 40, "pending": 2}
