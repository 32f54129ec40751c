"""opsctl.automation.episode_record: the episode as a typed, versioned record (issue 26 item 1),
read from the SQLite row and from the shared `serve-episodes` document and written back as the
code before the record stored it.

The fixtures are the real output of the code before the record (dict episodes, 7e02828): one
lifecycle (`lifecycle` below, the same calls) run through SharedEpisodeStore on the local state
backend and through the SQLite EpisodeStore, with what each stored captured verbatim. Only the
thread part of a lease's owner varies between runs: `<thread>` stands for it."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading

import pytest

from opsctl.automation.episode_record import ActionEntry, Episode
from opsctl.automation.episodes_document import AlertState, EpisodesDocument, Intent
from opsctl.automation.stored_entry import MalformedEpisode
from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episodes import EpisodeStore
from opsctl.automation.shared import SharedEpisodeStore
from opsctl.automation.shared_access import EPISODES
from opsctl.clock import SimClock
from opsctl.errors import NoDataError
from opsctl.fencing import Term
from opsctl.state.base import encode
from opsctl.state.local import LocalStateStore

T1 = "2026-11-29T12:00:00.500000000Z"
T2 = "2026-11-29T12:05:00.000000000Z"
START = 1764417600.25

# serve-episodes.json as the code before the record wrote it after `lifecycle` (the local state
# backend's file: its version, then the document as the state store encodes it).
OLD_FILE = '{"version":14,"data":{"alerts":{"availability/fp1":{"policy":"availability","starts_at":"2026-11-29T12:00:00.500000000Z","status":"resolved","target":"databricks","updated_at":1764417630.25},"latency/fp2":{"policy":"latency","starts_at":"2026-11-29T12:05:00.000000000Z","status":"firing","target":"internal","updated_at":1764417707.25},"latency/fp3":{"policy":"latency","starts_at":"2026-11-29T12:05:00.000000000Z","status":"firing","target":"internal","updated_at":1764417707.25}},"episodes":{"0a186928916bf0e05ffd":{"actions":[{"action":"failover","at":1764417600.25,"by":"serve-a:7","detail":"0/100","status":"applied"},{"action":"page","at":1764417600.25,"by":"serve-a:7","detail":"inc-1","status":"applied"},{"action":"restore","at":1764417697.25,"by":"serve-a:7","detail":"80/20","status":"applied"}],"closed_at":1764417697.25,"closed_because":"restore applied: 80/20","failover":"applied","incident":"inc-1","key":"0a186928916bf0e05ffd","lease_until":null,"opened_at":1764417600.25,"owned":true,"owner":null,"policy":"availability","restore_due":null,"restore_refusals":1,"saved":{"after":{"databricks":0,"internal":100},"before":{"databricks":80,"internal":20}},"state":"closed","target":"databricks","ticket":null},"ce89e6b423362eb11132":{"failover":null,"incident":null,"key":"ce89e6b423362eb11132","lease_until":1764418007.25,"opened_at":1764417707.25,"owned":false,"owner":"serve-a:7:<thread>","policy":"latency","restore_refusals":0,"saved":{},"state":"open","target":"internal","ticket":"TCK-7"}},"intents":{"page:opsctl-automation-availability-databricks-x":{"action":"page","at":1764417600.25,"by":"serve-a:7","detail":"failed over","term":"serve-a@3"}},"term":"serve-a@3"}}\n'  # noqa: E501

# The `episodes` rows the code before the record left after `lifecycle` (SELECT * ... ORDER BY id).
OLD_ROWS = [
    {"id": 1, "policy": "availability", "target": "databricks", "key": "0a186928916bf0e05ffd", "state": "closed",
     "opened_at": 1764417600.25, "incident": "inc-1", "ticket": None, "failover": "applied", "owned": 1,
     "saved": '{"after": {"databricks": 0, "internal": 100}, "before": {"databricks": 80, "internal": 20}}',
     "restore_due": None, "restore_refusals": 1, "owner": None, "lease_until": None, "closed_at": 1764417697.25,
     "closed_because": "restore applied: 80/20"},
    {"id": 2, "policy": "latency", "target": "internal", "key": "ce89e6b423362eb11132", "state": "open",
     "opened_at": 1764417707.25, "incident": None, "ticket": "TCK-7", "failover": None, "owned": 0, "saved": "{}",
     "restore_due": None, "restore_refusals": 0, "owner": "serve-b:9:<thread>", "lease_until": 1764418007.25,
     "closed_at": None, "closed_because": None},
]


def act(store, ident, action, status, detail, at):
    store.record_action(ActionRecord(policy="availability", action=action, status=status, detail=detail,
                                     dry_run=False, started_at=at - 0.5, finished_at=at, event_key="k-" + action,
                                     episode=ident, received_at=at - 1))


def lifecycle(store, clock):
    """The calls the fixtures were captured from (the engine's, in its order), on either store."""
    # Episode 1 fires, fails over and pages, resolves, is refused one restore, restores and closes.
    start = store.begin_firing("availability", "fp1", "databricks", T1, failover=True)
    act(store, start.episode.id, "failover", "applied", "0/100", clock.now())
    if hasattr(store, "record_intent"):
        store.record_intent("page", "opsctl-automation-availability-databricks-x", "failed over")
    act(store, start.episode.id, "page", "applied", "inc-1", clock.now())
    store.save(start.episode.changed(
        failover="applied", owned=True, incident="inc-1",
        saved={"before": {"databricks": 80, "internal": 20}, "after": {"databricks": 0, "internal": 100}}))
    clock.advance(30)
    store.begin_resolved("availability", "fp1", "databricks", T1, restores=True, hold_down=60,
                         because=lambda e: "resolved")
    clock.advance(61)
    due = store.claim_due_restore()
    store.end_restore(due, closed_because=None, retry_at=clock.now() + 5)
    clock.advance(6)
    due = store.claim_due_restore()
    act(store, due.id, "restore", "applied", "80/20", clock.now())
    store.end_restore(due, closed_because="restore applied: 80/20")
    # Episode 2 on another target: no failover, a ticket; a second alert joins it; left open and held.
    clock.advance(10)
    start2 = store.begin_firing("latency", "fp2", "internal", T2)
    store.save(start2.episode.changed(ticket="TCK-7"))
    store.begin_firing("latency", "fp3", "internal", T2)


def old_data() -> dict:
    return json.loads(OLD_FILE.replace("<thread>", str(threading.get_ident())))["data"]


def shared_store(tmp_path, clock) -> tuple[SharedEpisodeStore, LocalStateStore]:
    docs = LocalStateStore(tmp_path / "state")
    return SharedEpisodeStore(docs, local_path=tmp_path / "a.sqlite", clock=clock.now, owner="serve-a:7",
                              term=lambda: Term("serve-a", 3)), docs


# -- the shared document ---------------------------------------------------------------------------------


def test_a_document_the_dict_code_wrote_reads_back_typed_and_re_encodes_to_the_same_bytes():
    data = json.loads(OLD_FILE)["data"]
    doc = EpisodesDocument.parse(data)
    assert doc.problems == () and doc.term == "serve-a@3" and doc.version == 1
    closed, held = doc.episodes["0a186928916bf0e05ffd"], doc.episodes["ce89e6b423362eb11132"]
    assert (closed.policy, closed.target, closed.state, closed.failover, closed.owned, closed.incident) == (
        "availability", "databricks", "closed", "applied", True, "inc-1")
    assert closed.saved == {"before": {"databricks": 80, "internal": 20}, "after": {"databricks": 0, "internal": 100}}
    assert (closed.restore_refusals, closed.closed_at, closed.closed_because) == (1, 1764417697.25,
                                                                                 "restore applied: 80/20")
    assert closed.actions == (ActionEntry(at=START, action="failover", status="applied", by="serve-a:7", detail="0/100"),
                              ActionEntry(at=START, action="page", status="applied", by="serve-a:7", detail="inc-1"),
                              ActionEntry(at=1764417697.25, action="restore", status="applied", by="serve-a:7",
                                          detail="80/20"))
    assert (held.state, held.ticket, held.owner, held.lease_until, held.actions) == (
        "open", "TCK-7", "serve-a:7:<thread>", 1764418007.25, ())
    assert held.unset == {"restore_due", "closed_at", "closed_because", "actions"}  # never written for it
    assert doc.alerts["latency/fp3"] == AlertState(policy="latency", target="internal", starts_at=T2, status="firing",
                                                   updated_at=1764417707.25)
    assert doc.intents == {"page:opsctl-automation-availability-databricks-x": Intent(
        action="page", term="serve-a@3", at=START, by="serve-a:7", detail="failed over")}

    assert encode(EPISODES, doc.encode()) == encode(EPISODES, data)
    # Each entry rebuilt from its record (not the object it was read as) is the same too.
    assert {i: e.stored() for i, e in doc.episodes.items()} == data["episodes"]
    assert {k: a.stored() for k, a in doc.alerts.items()} == data["alerts"]
    assert {k: i.stored() for k, i in doc.intents.items()} == data["intents"]


def test_the_typed_store_writes_the_document_the_dict_code_wrote(tmp_path):
    clock = SimClock(START)
    store, _ = shared_store(tmp_path, clock)
    lifecycle(store, clock)
    written = (tmp_path / "state" / f"{EPISODES}.json").read_text()
    assert written == OLD_FILE.replace("<thread>", str(threading.get_ident()))


def test_an_older_entry_without_a_key_is_named_by_its_id_and_written_back_without_one(tmp_path):
    data = old_data()
    entry = data["episodes"]["ce89e6b423362eb11132"]
    del entry["key"]
    doc = EpisodesDocument.parse(data)
    assert doc.episodes["ce89e6b423362eb11132"].key == "ce89e6b423362eb11132"
    assert doc.encode()["episodes"]["ce89e6b423362eb11132"] == entry
    assert "key" not in doc.episodes["ce89e6b423362eb11132"].stored()


def test_what_a_newer_writer_added_is_kept_and_its_version_written_back():
    data = old_data()
    data["episodes"]["ce89e6b423362eb11132"].update(version=2, escalation={"level": 2})
    data["shards"] = 4
    doc = EpisodesDocument.parse(data)
    episode = doc.episodes["ce89e6b423362eb11132"]
    assert (episode.version, episode.extra, doc.extra) == (2, {"escalation": {"level": 2}}, {"shards": 4})
    changed = doc.draft()
    changed.episodes[episode.id] = episode.changed(ticket="TCK-8")  # rebuilt from the record, not reused
    assert changed.encode()["episodes"][episode.id] == {**data["episodes"][episode.id], "ticket": "TCK-8"}
    assert changed.encode()["shards"] == 4


@pytest.mark.parametrize("field, value, problem", [
    ("state", "halfway", "state: expected one of open, restore_pending, restoring, closed, got 'halfway'"),
    ("opened_at", "yesterday", "opened_at: expected a number, got str"),
    ("owned", 1, "owned: expected true or false, got int"),
    ("saved", [80, 20], "saved: expected an object, got list"),
    ("actions", [{"at": 1.0}], "actions[0]: action, status, by, detail: required, missing"),
    ("policy", None, "policy: expected a string, got NoneType"),
])
def test_a_malformed_stored_episode_is_rejected_in_one_line_and_the_rest_of_the_document_is_kept(
        tmp_path, caplog, field, value, problem):
    clock = SimClock(START)
    store, docs = shared_store(tmp_path, clock)
    lifecycle(store, clock)
    bad_id = "0a186928916bf0e05ffd"
    data = docs.get(EPISODES).data
    data["episodes"][bad_id][field] = value
    docs.put(EPISODES, data, version=docs.get(EPISODES).version)
    bad_entry = json.dumps(data["episodes"][bad_id], sort_keys=True)

    reader, _ = shared_store(tmp_path, clock)  # another replica: reads the document afresh
    with caplog.at_level(logging.WARNING, logger="opsctl.automation"):
        with pytest.raises(MalformedEpisode) as raised:
            reader.get(bad_id)
        assert [e.id for e in reader.episodes()] == ["ce89e6b423362eb11132"]  # the others read on
    error = raised.value
    assert str(error) == f"{EPISODES}: episode {bad_id}: {problem}" and "\n" not in str(error)
    assert isinstance(error, NoDataError) and error.exit_code == 3
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [f"{EPISODES}: episode {bad_id}: {problem} (kept as stored, not acted on)"]  # once

    # A write goes on around it: a new episode opens, the bad entry stays as it was, nothing else moves.
    clock.advance(5)
    start = reader.begin_firing("availability", "fp9", "internal", T2, failover=True)
    assert start is not None and start.episode.id not in (bad_id, "ce89e6b423362eb11132")
    after = docs.get(EPISODES).data
    assert json.dumps(after["episodes"][bad_id], sort_keys=True) == bad_entry
    assert after["episodes"]["ce89e6b423362eb11132"] == data["episodes"]["ce89e6b423362eb11132"]
    assert set(after["alerts"]) == set(data["alerts"]) | {"availability/fp9"}
    assert after["intents"] == data["intents"] and after["term"] == "serve-a@3"


def test_a_document_whose_episodes_are_not_an_object_is_refused_and_never_written_over(tmp_path):
    clock = SimClock(START)
    store, docs = shared_store(tmp_path, clock)
    docs.put(EPISODES, {"alerts": {}, "episodes": ["not", "an", "object"]}, version=None)
    with pytest.raises(MalformedEpisode) as raised:
        store.begin_firing("availability", "fp1", "databricks", T1)
    assert str(raised.value) == f"{EPISODES}: episodes: expected an object, got list"
    assert docs.get(EPISODES).data["episodes"] == ["not", "an", "object"]


# -- the SQLite row --------------------------------------------------------------------------------------


def insert(path, rows):
    conn = sqlite3.connect(path)
    with conn:
        for row in rows:
            conn.execute(f"INSERT INTO episodes ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                         tuple(row.values()))
    conn.close()


def stored_rows(path) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM episodes ORDER BY id")]
    finally:
        conn.close()


def test_rows_the_dict_code_wrote_read_back_typed_and_re_encode_to_the_same_values(tmp_path):
    path = tmp_path / "serve.sqlite"
    store = EpisodeStore(path, clock=SimClock(START).now, owner="serve-b:9")
    insert(path, OLD_ROWS)
    closed, held = store.episodes()
    assert (closed.id, closed.key, closed.state, closed.failover, closed.owned, closed.incident) == (
        1, "0a186928916bf0e05ffd", "closed", "applied", True, "inc-1")
    assert closed.saved == {"before": {"databricks": 80, "internal": 20}, "after": {"databricks": 0, "internal": 100}}
    assert (held.id, held.state, held.ticket, held.owned, held.saved, held.owner) == (
        2, "open", "TCK-7", False, {}, "serve-b:9:<thread>")
    assert [{"id": e.id, **e.columns()} for e in (closed, held)] == OLD_ROWS
    assert store.episodes(open_only=True) == [held]


def test_the_typed_store_writes_the_rows_the_dict_code_wrote(tmp_path):
    clock = SimClock(START)
    store = EpisodeStore(tmp_path / "serve.sqlite", clock=clock.now, owner="serve-b:9")
    lifecycle(store, clock)
    me = str(threading.get_ident())
    assert stored_rows(tmp_path / "serve.sqlite") == [
        {k: (v.replace("<thread>", me) if isinstance(v, str) else v) for k, v in row.items()} for row in OLD_ROWS]


def test_a_row_from_before_keys_and_saves_re_encodes_with_its_nulls(tmp_path):
    path = tmp_path / "serve.sqlite"
    store = EpisodeStore(path, clock=SimClock(START).now, owner="serve-b:9")
    row = {**OLD_ROWS[1], "key": None, "saved": None}
    insert(path, [row])
    (episode,) = store.episodes()
    assert (episode.key, episode.saved) == ("2", {})  # named by its id, nothing saved
    assert {"id": episode.id, **episode.columns()} == row


def test_a_malformed_row_is_left_out_in_one_line_and_the_others_read_on(tmp_path, caplog):
    path = tmp_path / "serve.sqlite"
    store = EpisodeStore(path, clock=SimClock(START).now, owner="serve-b:9")
    insert(path, [{**OLD_ROWS[0], "saved": "{not json"}, OLD_ROWS[1]])
    with caplog.at_level(logging.WARNING, logger="opsctl.automation"):
        assert [e.id for e in store.episodes()] == [2]
    assert [r.getMessage() for r in caplog.records] == [
        "episodes: episode 1: saved: not JSON (Expecting property name enclosed in double quotes: line 1 column 2"
        " (char 1)) (left out)"]
    with pytest.raises(MalformedEpisode) as raised:
        store.get(1)
    assert str(raised.value).startswith("episode 1: saved: not JSON") and "\n" not in str(raised.value)
    assert raised.value.exit_code == 3
    assert stored_rows(path)[0]["saved"] == "{not json"  # nothing rewritten


def test_an_episode_is_frozen_and_a_change_is_a_new_record():
    episode = Episode(id="e1", policy="p", target="databricks", state="open", opened_at=1.0,
                      unset=frozenset(("incident", "ticket")))
    with pytest.raises(AttributeError):
        episode.incident = "inc-1"  # type: ignore[misc]
    changed = episode.changed(incident="inc-1")
    assert (episode.incident, changed.incident) == (None, "inc-1")
    with pytest.raises(TypeError):
        episode.changed(incidnet="inc-1")
    assert changed.unset == {"ticket"} and "incident" in changed.stored() and "ticket" not in changed.stored()
