"""A stored episode that does not read blocks a second episode for its policy and target, and is
never silent (found in session 7's review of #26 item 1).

Before, a malformed entry in `serve-episodes` was kept, logged once and never acted on, and a new
alert of its policy and target opened a second episode beside it: a second failover, page and
ticket for one incident, while the first episode (the one holding the moved traffic) would never
be restored. Now the alert opens nothing: the refusal is recorded (action "episode", refused), the
on-call engineer is paged with the entry to repair or delete, and the event is retried until the
entry reads again (it then joins that episode) or is removed (a new episode opens)."""

from __future__ import annotations

import sqlite3

import pytest

from opsctl.automation.actions import DryRunExecutor
from opsctl.automation.episode_record import EpisodeBlocked
from opsctl.automation.episodes import EpisodeStore
from opsctl.automation.policy import ActionFailed, AlertEvent
from opsctl.automation.policy_engine import PolicyEngine
from opsctl.automation.shared import SharedEpisodeStore
from opsctl.automation.shared_access import EPISODES
from opsctl.clock import SimClock
from opsctl.fencing import Term
from opsctl.state.local import LocalStateStore

T1 = "2026-11-29T12:00:00.500000000Z"
T2 = "2026-11-29T12:05:00.000000000Z"
POLICY = "failover-on-availability-page"  # the shipped policy an availability page of databricks matches


def replica(tmp_path, clock, name="serve-a") -> SharedEpisodeStore:
    return SharedEpisodeStore(LocalStateStore(tmp_path / "state"), local_path=tmp_path / f"{name}.sqlite",
                              clock=clock.now, owner=f"{name}:7", term=lambda: Term(name, 3))


def engine(store, clock, taken: list) -> PolicyEngine:
    from opsctl.config import BUILTIN_CONFIG, load_config_file

    cfg = load_config_file(BUILTIN_CONFIG)
    return PolicyEngine(cfg.automation, cfg.backends, store, DryRunExecutor(), tickets=cfg.runbooks.tickets,
                        clock=clock.now, on_action=taken.append)


def alert(key: str, fingerprint: str, starts_at: str) -> AlertEvent:
    labels = {"alertname": "SloBurnRatePage", "severity": "page", "backend": "databricks", "service": "llm-inference",
              "category": "availability", "slo": "llm-inference-databricks-availability"}
    return AlertEvent(key=key, status="firing", labels=labels,
                      annotations={"summary": "databricks: 5xx", "cause": "server_error"},
                      starts_at=starts_at, fingerprint=fingerprint, group_key="{}:{}", received_at=1000.0)


def failed_over(tmp_path, clock) -> tuple[LocalStateStore, str]:
    """One replica took the first alert: its episode failed over (dry run), paged and filed the ticket."""
    taken: list = []
    engine(replica(tmp_path, clock), clock, taken).handle_alert(alert("e1", "fp1", T1))
    assert [t.action for t in taken] == ["failover", "page", "ticket", "note"]
    docs = LocalStateStore(tmp_path / "state")
    (ident,) = docs.get(EPISODES).data["episodes"]
    return docs, ident


def corrupt(docs: LocalStateStore, ident: str, **fields) -> dict:
    data = docs.get(EPISODES).data
    data["episodes"][ident].update(fields)
    docs.put(EPISODES, data, version=docs.get(EPISODES).version)
    return data


def test_a_second_alert_opens_no_second_episode_beside_an_unreadable_one(tmp_path):
    clock = SimClock(1000)
    docs, ident = failed_over(tmp_path, clock)
    corrupt(docs, ident, opened_at="yesterday")
    before = docs.get(EPISODES)

    other = replica(tmp_path, clock, "serve-b")  # another replica, reading the document afresh
    with pytest.raises(EpisodeBlocked) as raised:
        other.begin_firing(POLICY, "fp2", "databricks", T2, failover=True)
    error = raised.value
    assert error.ident == ident and error.exit_code == 3
    assert error.message == (f"{EPISODES}: episode {ident} of this policy and target does not read"
                             " (opened_at: expected a number, got str); no second episode is opened beside it")
    assert error.hint == (f"repair or delete episode {ident} in {EPISODES}; until then the alert is retried"
                          " and not acted on")
    after = docs.get(EPISODES)
    assert after.version == before.version and after.data == before.data  # nothing written, not even the alert


def test_the_engine_refuses_pages_a_human_and_retries_until_the_entry_is_repaired(tmp_path):
    clock = SimClock(1000)
    docs, ident = failed_over(tmp_path, clock)
    good = docs.get(EPISODES).data["episodes"][ident]
    corrupt(docs, ident, opened_at="yesterday")

    taken: list = []
    b = engine(replica(tmp_path, clock, "serve-b"), clock, taken)
    with pytest.raises(ActionFailed):  # retried: the service hands the event back with backoff
        b.handle_alert(alert("e2", "fp2", T2))
    assert [(t.policy, t.action, t.outcome.status) for t in taken] == [(POLICY, "episode", "refused"),
                                                                        (POLICY, "page", "dry_run")]
    refusal, page = (t.outcome.detail for t in taken)
    assert f"episode {ident} of this policy and target does not read" in refusal
    assert f"repair or delete episode {ident} in {EPISODES}" in refusal
    assert "automation BLOCKED for databricks" in page and f"stored episode {ident} does not read" in page
    # One incident per entry, whatever alert meets it (the dry-run pager answers the dedup key as the incident).
    assert taken[1].outcome.data["incident"] == f"opsctl-automation-{POLICY}-databricks-unreadable-{ident}"
    assert list(docs.get(EPISODES).data["episodes"]) == [ident]  # no second episode, no second failover

    # Someone repairs the entry: the retry joins that episode, which failed over, paged and filed
    # already: nothing is done twice.
    data = docs.get(EPISODES).data
    data["episodes"][ident]["opened_at"] = good["opened_at"]
    docs.put(EPISODES, data, version=docs.get(EPISODES).version)
    taken.clear()
    assert b.handle_alert(alert("e2", "fp2", T2)) == []
    stored = docs.get(EPISODES).data["episodes"]
    assert list(stored) == [ident] and stored[ident]["failover"] == "dry_run"


def test_once_the_entry_is_deleted_the_retry_opens_the_episode(tmp_path):
    clock = SimClock(1000)
    docs, ident = failed_over(tmp_path, clock)
    data = corrupt(docs, ident, state=["open"])  # not even its state reads: it may be open
    taken: list = []
    b = engine(replica(tmp_path, clock, "serve-b"), clock, taken)
    with pytest.raises(ActionFailed):
        b.handle_alert(alert("e2", "fp2", T2))
    assert [t.action for t in taken] == ["episode", "page"]

    del data["episodes"][ident]
    docs.put(EPISODES, data, version=docs.get(EPISODES).version)
    taken.clear()
    b.handle_alert(alert("e2", "fp2", T2))
    assert [t.action for t in taken] == ["failover", "page", "ticket", "note"]
    assert len(docs.get(EPISODES).data["episodes"]) == 1


def test_a_closed_unreadable_entry_blocks_nothing(tmp_path):
    clock = SimClock(1000)
    docs, ident = failed_over(tmp_path, clock)
    corrupt(docs, ident, state="closed", opened_at="yesterday")
    start = replica(tmp_path, clock, "serve-b").begin_firing(POLICY, "fp2", "databricks", T2, failover=True)
    assert start is not None and start.episode.id != ident
    assert set(docs.get(EPISODES).data["episodes"]) == {ident, start.episode.id}


def test_the_local_store_blocks_and_the_engine_tells_a_human_the_same_way(tmp_path):
    clock = SimClock(1000)
    store = EpisodeStore(tmp_path / "a.sqlite", clock=clock.now)
    taken: list = []
    engine(store, clock, taken).handle_alert(alert("e1", "fp1", T1))
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:
        conn.execute("UPDATE episodes SET saved = 'not json' WHERE id = 1")
    taken.clear()
    with pytest.raises(ActionFailed):
        engine(store, clock, taken).handle_alert(alert("e2", "fp2", T2))
    assert [(t.action, t.outcome.status) for t in taken] == [("episode", "refused"), ("page", "dry_run")]
    assert "repair or delete episode 1 in the local episodes table" in taken[0].outcome.detail
    with sqlite3.connect(tmp_path / "a.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 1
    assert "\n" not in taken[0].outcome.detail
