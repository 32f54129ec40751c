"""opsctl.automation.delivery_record: the delivery as a typed, versioned record (issue 26 item 1),
read from the shared pieces and the SQLite `events` rows and written back as the code before the
record stored it.

The fixtures (tests/automation/delivery_records.json) are the real output of the code before the
record (dict entries, 696bbb1): the lifecycle of tests/automation/delivery_lifecycle.py run
through SharedDeliveryLog on the loopback API server (each piece's ConfigMap text) and through the
SQLite DeliveryLog (its rows); test_delivery_pins.py checks the new code stores the same."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from opsctl.automation import delivery_record
from opsctl.automation.delivery_pieces import piece_name, piece_of
from opsctl.automation.delivery_record import Delivery, Entries, MalformedDelivery
from opsctl.automation.delivery_store import SharedDeliveryLog
from opsctl.automation.idempotency import DeliveryLog, NewEvent
from opsctl.clock import SimClock
from opsctl.errors import NoDataError
from opsctl.state.base import encode
from opsctl.state.local import LocalStateStore
from tests.automation.delivery_lifecycle import (
    BUSY, CLAIMED, FAILED, HELD, ORPHAN, PENDING, QUIET, RELEASED, RETRIED, RUNNING, START,
)

FIXTURES = json.loads((Path(__file__).parent / "delivery_records.json").read_text())
RECORDED = START + 1  # when the alerts were recorded (the orphan: START)
ACTED = START + 3.75  # when the leader finished and deferred them
CLAIMED_RESULT = {"actions": [["availability", "failover", "applied"], ["availability", "page", "applied"]]}

# What the lifecycle left, per event, written out by hand: (state, attempts, owner, term, lease_until,
# not_before, done_at, result, payload kept).
SHARED = [
    (QUIET, ("done", 0, None, None, None, 0, RECORDED, {"actions": [], "policies": []}, False)),
    (PENDING, ("pending", 0, None, None, None, 0, None, None, True)),
    (CLAIMED, ("done", 1, "serve-a:1", "serve-a@3", None, 0, ACTED, CLAIMED_RESULT, False)),
    (FAILED, ("failed", 1, "serve-a:1", "serve-a@3", None, 0, ACTED,
              {"attempts": 1, "error": "ActionFailed: pager answered 500"}, False)),
    (RETRIED, ("pending", 1, "serve-a:1", "serve-a@3", None, ACTED + 2, None,
               {"attempts": 1, "error": "ActionFailed: timed out"}, True)),
    (BUSY, ("pending", 0, "serve-a:1", "serve-a@3", None, ACTED + 0.1, None, {"busy": True}, True)),
    (RELEASED, ("pending", 0, None, "serve-a@3", None, 0, None, None, True)),
    (HELD, ("running", 1, "serve-a:1", "serve-a@3", RECORDED + 300, 0, None, None, True)),
    (RUNNING, ("running", 1, "serve-a:1", "serve-a@3", RECORDED + 0.5 + 300, 0, None, None, True)),
    (ORPHAN, ("pending", 1, "serve-b:1", "serve-b@2", None, 0, None, None, True)),
]


def pieces() -> dict[str, dict]:
    return {name: json.loads(text) for name, text in FIXTURES["pieces"].items()}


def fields(d: Delivery) -> tuple:
    return (d.state, d.attempts, d.owner, d.term, d.lease_until, d.not_before, d.done_at, d.result,
            d.payload is not None)


# -- the shared pieces ------------------------------------------------------------------------------------


def test_pieces_the_dict_code_wrote_read_back_typed_and_re_encode_to_the_same_bytes():
    read = {}
    for name, text in FIXTURES["pieces"].items():
        data = json.loads(text)
        entries = Entries(dict(data["events"]))
        typed = entries.items()
        assert [k for k, _ in typed] == list(data["events"])  # every entry reads
        read.update(typed)
        # Each entry rebuilt from its record (not the object it was read as) is the same text.
        assert encode(name, {"events": {k: d.stored() for k, d in typed}}) == text
    assert set(read) == {e.key for e, _ in SHARED}
    for event, expected in SHARED:
        d = read[event.key]
        assert (d.key, d.source, d.partition) == (event.key, event.source, event.partition)
        assert d.received_at == (START if event is ORPHAN else RECORDED) and d.version == 1 and d.extra == {}
        assert fields(d) == expected, event.payload.get("fingerprint")
        if d.payload is not None:
            assert d.payload == event.payload
    assert read[QUIET.key].unset == {"owner", "lease_until", "term", "payload"}  # never written for it
    assert read[PENDING.key].unset == {"owner", "lease_until", "term", "done_at", "result"}
    assert read[CLAIMED.key].unset == {"payload"}  # dropped once finished


def test_what_a_newer_writer_added_is_kept_and_its_version_written_back(tmp_path):
    store = LocalStateStore(tmp_path / "state")
    name = piece_name(piece_of(PENDING.key))
    data = pieces()[name]
    data["events"][PENDING.key].update(version=2, priority="high")
    data["shards"] = 16
    store.put(name, data, version=None)
    d = Entries(dict(data["events"])).get(PENDING.key)
    assert d is not None and (d.version, d.extra) == (2, {"priority": "high"})
    log = SharedDeliveryLog(store, clock=SimClock(ACTED).now, owner="serve-a:1", term=lambda: "serve-a@4")
    claimed = log.claim(PENDING.key)  # the entry is changed: rebuilt from its record
    assert claimed is not None and claimed.payload == PENDING.payload and claimed.attempts == 1
    after = store.get(name).data
    assert after["events"][PENDING.key] == {**data["events"][PENDING.key], "state": "running", "attempts": 1,
                                            "owner": "serve-a:1", "lease_until": ACTED + 300, "term": "serve-a@4"}
    assert after["shards"] == 16


def test_a_write_puts_back_every_entry_it_did_not_change_as_the_object_it_was(tmp_path):
    store = LocalStateStore(tmp_path / "state")
    name = piece_name(piece_of(RETRIED.key))
    store.put(name, pieces()[name], version=None)
    log = SharedDeliveryLog(store, clock=SimClock(ACTED + 5).now, owner="serve-a:1", term=lambda: "serve-a@3")
    assert log.claim(RETRIED.key) is not None  # read, then written from what it read
    index = piece_of(RETRIED.key)
    before = dict(log.pieces._known[index].data["events"])
    log.finish(RETRIED.key, {"actions": []})  # written from the version it knows: no read
    events = log.pieces._known[index].data["events"]
    others = [k for k in before if k != RETRIED.key]
    assert others and all(events[k] is before[k] for k in others)
    assert events[RETRIED.key] is not before[RETRIED.key] and before[RETRIED.key]["state"] == "running"


@pytest.mark.parametrize("value, problem", [
    ({"state": "halfway"}, "state: expected one of pending, running, done, failed, got 'halfway'"),
    ({"attempts": "one"}, "attempts: expected an integer, got str"),
    ({"received_at": True}, "received_at: expected a number, got bool"),
    ({"payload": ["a"]}, "payload: expected an object or null, got list"),
    ({"source": None}, "source: expected a string, got NoneType"),
    ("not an entry", "expected an object, got str"),
])
def test_a_malformed_stored_entry_is_one_line_logged_once_never_acted_on_and_never_written_over(
        tmp_path, caplog, value, problem):
    delivery_record._logged.clear()
    store = LocalStateStore(tmp_path / "state")
    name = piece_name(piece_of(RETRIED.key))
    data = pieces()[name]
    bad, good = RETRIED.key, next(k for k in data["events"] if k != RETRIED.key)
    data["events"][bad] = value if isinstance(value, str) else {**data["events"][bad], **value}
    store.put(name, data, version=None)
    bad_entry = json.dumps(data["events"][bad], sort_keys=True)
    clock = SimClock(ACTED + 5)
    log = SharedDeliveryLog(store, clock=clock.now, owner="serve-a:1", term=lambda: "serve-a@3")
    line = f"{name}: delivery {bad[:16]}: {problem}"
    with caplog.at_level(logging.WARNING, logger="opsctl.automation"):
        with pytest.raises(MalformedDelivery) as raised:
            log.state(bad)
        assert log.claim(bad) is None  # never acted on
        for _ in range(3):  # the sweep every second: the others read on
            assert bad not in [k for k, _ in log.due(older_than=0, limit=100)]
        assert log.counts() == {"running": 1, "done": 1} and log.state(good) is not None
        # A write goes on around it: a new event in the same piece, the bad entry kept as stored.
        new = next(e for e in (NewEvent(f"k{i}", "alertmanager", "databricks", {}) for i in range(100))
                   if piece_of(e.key) == piece_of(bad))
        assert log.admit([new]) == [new]
    assert str(raised.value) == line and "\n" not in str(raised.value)
    assert isinstance(raised.value, NoDataError) and raised.value.exit_code == 3
    assert [r.getMessage() for r in caplog.records] == [f"{line} (kept as stored, not acted on)"]  # once
    after = store.get(name).data["events"]
    assert json.dumps(after[bad], sort_keys=True) == bad_entry and new.key in after


def test_a_piece_whose_events_are_not_an_object_is_refused_in_one_line_and_never_written_over(tmp_path):
    store = LocalStateStore(tmp_path / "state")
    name = piece_name(piece_of(PENDING.key))
    store.put(name, {"events": ["not", "an", "object"]}, version=None)
    log = SharedDeliveryLog(store, clock=SimClock(ACTED).now, owner="serve-a:1")
    with pytest.raises(MalformedDelivery) as raised:
        log.admit([PENDING])
    assert str(raised.value) == f"{name}: events: expected an object, got list"
    with pytest.raises(MalformedDelivery):
        log.due(older_than=0, limit=10)
    assert store.get(name).data == {"events": ["not", "an", "object"]}


def test_a_delivery_is_frozen_and_a_change_is_a_new_record():
    d = Delivery.new("k", source="alertmanager", partition="p", state="pending", attempts=0, received_at=1.0,
                     not_before=0, payload={"a": 1})
    assert d.unset == {"owner", "lease_until", "term", "done_at", "result"}
    with pytest.raises(AttributeError):
        d.state = "running"  # type: ignore[misc]
    done = d.changed(state="done", done_at=2.0, result={}, forget=("payload",))
    assert (d.state, d.payload, done.state, done.payload) == ("pending", {"a": 1}, "done", None)
    assert done.stored() == {"source": "alertmanager", "partition": "p", "state": "done", "attempts": 0,
                             "received_at": 1.0, "not_before": 0, "done_at": 2.0, "result": {}}
    with pytest.raises(TypeError):
        d.changed(stat="done")


# -- the SQLite rows ----------------------------------------------------------------------------------------


LOCAL = [  # what the lifecycle left in the SQLite log, by hand: (state, attempts, owner, result)
    (QUIET, ("done", 0, None, {"actions": [], "policies": []})),
    (PENDING, ("pending", 0, None, None)),
    (RELEASED, ("pending", 0, None, None)),
    (CLAIMED, ("done", 1, "serve-a:1", CLAIMED_RESULT)),
    (FAILED, ("failed", 1, "serve-a:1", {"attempts": 1, "error": "ActionFailed: pager answered 500"})),
    (RETRIED, ("pending", 1, "serve-a:1", {"error": "ActionFailed: timed out", "attempts": 1})),
    (BUSY, ("pending", 0, "serve-a:1", {"busy": True})),
    (HELD, ("running", 1, "serve-a:1", None)),
    (RUNNING, ("running", 1, "serve-a:1", None)),
    (ORPHAN, ("pending", 1, "serve-b:1", None)),
]


def insert(path: Path, rows: list[dict]) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for row in rows:
            conn.execute(f"INSERT INTO events ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                         tuple(row.values()))
    conn.close()


def test_rows_the_dict_code_wrote_read_back_typed_and_re_encode_to_the_same_values(tmp_path):
    log = DeliveryLog(tmp_path / "serve.sqlite", clock=SimClock(ACTED).now, owner="serve-a:1")
    insert(tmp_path / "serve.sqlite", FIXTURES["rows"])
    for row in FIXTURES["rows"]:
        d = log.state(row["key"])
        assert d is not None and {"key": d.key, **d.columns()} == row  # the same values, the same JSON text
    for event, (state, attempts, owner, result) in LOCAL:
        d = log.state(event.key)
        assert (d.state, d.attempts, d.owner, d.result, d.payload) == (state, attempts, owner, result, event.payload)
        assert (d.source, d.partition, d.term, d.version) == (event.source, event.partition, None, 1)
    assert log.state(RETRIED.key).columns()["result"] == '{"error": "ActionFailed: timed out", "attempts": 1}'
    assert log.state(HELD.key).lease_until == ACTED - 2.25 + 300 and log.state(BUSY.key).not_before == ACTED + 0.1


def test_a_malformed_row_is_one_line_logged_once_never_claimed_and_never_written_over(tmp_path, caplog):
    delivery_record._logged.clear()
    path = tmp_path / "serve.sqlite"
    log = DeliveryLog(path, clock=SimClock(ACTED + 10).now, owner="serve-a:1")
    rows = {r["key"]: r for r in FIXTURES["rows"]}
    bad = {**rows[PENDING.key], "payload": "{not json"}
    insert(path, [bad, rows[BUSY.key]])
    line = f"delivery {PENDING.key[:16]}: payload: not JSON (Expecting property name enclosed in double quotes:" \
           " line 1 column 2 (char 1))"
    with caplog.at_level(logging.WARNING, logger="opsctl.automation"):
        assert log.claim(PENDING.key) is None and log.claim(PENDING.key) is None
        claimed = log.claim(BUSY.key)  # the others are claimed as before
    assert claimed is not None and claimed.payload == BUSY.payload and claimed.attempts == 1
    assert [r.getMessage() for r in caplog.records] == [f"events: {line} (kept as stored, not acted on)"]
    with pytest.raises(MalformedDelivery) as raised:
        log.state(PENDING.key)
    assert str(raised.value) == line and raised.value.exit_code == 3
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    assert dict(conn.execute("SELECT * FROM events WHERE key = ?", (PENDING.key,)).fetchone()) == bad
    conn.close()
