"""The local pager ledger: PagerDuty's dedup semantics, timelines in simulated time, atomic writes."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from opsctl.clock import SimClock, parse_rfc3339
from opsctl.errors import NoDataError
from opsctl.paging.base import PageEvent
from opsctl.paging.local import LocalPager
from opsctl.paging.registry import open_pager, page_records
from tests.fakes.fixtures import load, write_config

T0 = parse_rfc3339("2026-11-26T15:00:00Z")


@pytest.fixture
def cfg(tmp_path):
    return load(write_config(tmp_path, "paging: {provider: local}\n"))


def event(**kw):
    return PageEvent(summary="databricks error ratio 12%", source="opsctl", **kw)


def test_a_repeated_page_joins_the_open_incident_and_a_page_after_resolve_opens_a_new_one(cfg):
    pager = open_pager(cfg, clock=SimClock(T0))
    first = pager.trigger(event())
    again = pager.trigger(event())
    assert again.incident_id == first.incident_id
    assert again.detail == "deduplicated into the open incident"
    pager.resolve(first.dedup_key)
    after = pager.trigger(event())
    assert after.incident_id != first.incident_id
    assert after.dedup_key == first.dedup_key


def test_a_drill_timeline_in_simulated_time_gives_the_acknowledge_and_escalation_times(cfg):
    clock = SimClock(T0)
    pager = open_pager(cfg, clock=clock)
    key = pager.trigger(event(drill=True)).dedup_key
    clock.advance(300)
    pager.escalate(key)
    clock.advance(120)
    pager.inner.acknowledge(key, by="secondary on-call (local)")
    clock.advance(600)
    pager.resolve(key)

    got = pager.get_incident(key).to_dict()

    assert got["title"].startswith("[DRILL] ")
    assert got["created_at"] == "2026-11-26T15:00:00Z"
    assert got["seconds_to_first_escalation"] == 300
    assert got["seconds_to_acknowledge"] == 420
    assert got["seconds_to_resolve"] == 1020
    responders = {r["name"]: r for r in got["responders"]}
    assert responders["primary on-call (local)"]["seconds_to_notify"] == 0
    assert responders["primary on-call (local)"]["acknowledged_at"] is None
    assert responders["secondary on-call (local)"]["seconds_to_notify"] == 300
    assert responders["secondary on-call (local)"]["seconds_to_acknowledge"] == 420


def test_acknowledging_an_unknown_key_is_no_data(cfg):
    with pytest.raises(NoDataError) as err:
        open_pager(cfg).acknowledge("opsctl-nope")
    assert err.value.exit_code == 3


def test_a_dry_run_writes_nothing_and_shows_the_ledger_record(cfg):
    result = open_pager(cfg, dry_run=True).trigger(event())
    assert result.dry_run and result.requests[0]["incident"]["dedup_key"] == result.dedup_key
    assert not (cfg.state_path / "paging" / "ledger.json").exists()
    assert page_records(cfg).list() == []


def test_pages_are_recorded_for_page_status(cfg):
    pager = open_pager(cfg, clock=SimClock(T0))
    key = pager.trigger(event()).dedup_key
    pager.acknowledge(key)
    [rec] = page_records(cfg).list()
    assert (rec["dedup_key"], rec["last_action"], rec["summary"]) == (key, "acknowledge", "databricks error ratio 12%")


def _trigger_many(path: str, worker: int, n: int):
    pager = LocalPager(path, service="svc", oncall=("a",))
    for i in range(n):
        pager.trigger(PageEvent(summary=f"worker {worker} page {i}", source="test"))


def test_concurrent_processes_never_lose_or_duplicate_an_incident(tmp_path):
    path = str(tmp_path / "ledger.json")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_trigger_many, args=(path, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs)
    data = json.loads((tmp_path / "ledger.json").read_text())
    ids = [i["id"] for i in data["incidents"]]
    assert len(ids) == 60 and len(set(ids)) == 60
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_unknown_pager_name_is_an_error_not_a_fallback(cfg):
    from opsctl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown pager 'opsgenie' \(known: local, pagerduty\)"):
        open_pager(cfg, provider="opsgenie")


def test_the_ledger_is_written_compact_and_reads_back_whole(tmp_path):
    """One line, keys sorted, no indentation (JSON's C encoder: an indented ledger took the
    pure-Python encoder on every page event, issue 22); the incidents read back as written."""
    pager = LocalPager(tmp_path / "ledger.json", service="svc", oncall=("a", "b"), clock=SimClock(1000))
    pager.trigger(PageEvent(summary="page 1", source="test", dedup_key="k1"))
    pager.resolve("k1")
    pager.trigger(PageEvent(summary="page 2", source="test", dedup_key="k2"))
    text = (tmp_path / "ledger.json").read_text()
    assert text.count("\n") == 1 and text.endswith("\n") and "  " not in text
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"
    assert [(i["dedup_key"], i["status"]) for i in data["incidents"]] == [("k1", "resolved"), ("k2", "triggered")]
    assert [i.status for i in pager.incidents()] == ["resolved", "triggered"]
