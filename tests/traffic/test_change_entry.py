"""The change record's entries are typed (`ChangeEntry`) where the record is read, and written back
as they were: a record written before the entries were typed reads, and encodes to the same bytes."""

from __future__ import annotations

import json

# Written by opsctl/traffic/record.py as it was before ChangeEntry (entry_of + with_change + encode):
# a person's set, then a leader's failover with an override, a capacity shortfall and a drill's audit
# fields.
BEFORE_TYPED = (
    '{"changes":[{"action":"set","actor":"alice@laptop","after":{"shadow":{},"weights":{"databricks":70,'
    '"internal":30}},"before":{"shadow":{},"weights":{"databricks":80,"internal":20}},"emergency":false,'
    '"id":"chg-82bda9134a84","incident":null,"operation":"set-20261201T090000Z-a1b2c3","outcome":"applied",'
    '"overrides":[],"reason":"load test","time":"2025-12-01T09:00:00.123Z","ts":1764579600.123},'
    '{"action":"failover","actor":"opsctl-serve@pod-1","after":{"shadow":{},"weights":{"databricks":10,'
    '"internal":90}},"before":{"shadow":{},"weights":{"databricks":70,"internal":30}},"drill":true,'
    '"drill_run":"run-7","emergency":true,"id":"chg-8d5ad40fd2a5","incident":"INC-42",'
    '"operation":"failover-20261201T091500Z-d4e5f6","outcome":"applied","overrides":["freeze"],'
    '"reason":"opsctl serve, policy vendor-5xx: databricks burning","shortfall":{"internal":{"asked":100,'
    '"capacity_share":90,"moved_to":90,"not_moved":10}},"term":"serve-b@3","time":"2025-12-01T09:15:00.500Z",'
    '"ts":1764580500.5}],"failovers":{"INC-42":{"actor":"opsctl-serve@pod-1","after":{"shadow":{},'
    '"weights":{"databricks":10,"internal":90}},"opened_at":"2025-12-01T09:15:00.500Z","opened_ts":1764580500.5,'
    '"operation":"failover-20261201T091500Z-d4e5f6","saved":{"shadow":{},"weights":{"databricks":70,'
    '"internal":30}}}},"operations":{"failover-20261201T091500Z-d4e5f6":1764580500.5,'
    '"set-20261201T090000Z-a1b2c3":1764579600.123},"term":"serve-b@3"}'
)


def test_a_record_written_before_the_entries_were_typed_reads_into_change_entries():
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import find_change, newest_first, parse

    record = parse(BEFORE_TYPED, "fixture")
    failover, set_ = newest_first(record)
    assert isinstance(failover, ChangeEntry) and isinstance(set_, ChangeEntry)
    assert (set_.version, set_.id, set_.action, set_.actor, set_.reason, set_.ts) == (
        1, "chg-82bda9134a84", "set", "alice@laptop", "load test", 1764579600.123)
    assert set_.incident is None and set_.term is None and set_.shortfall == {} and set_.extra == {}
    assert set_.before == {"shadow": {}, "weights": {"databricks": 80, "internal": 20}}
    assert (failover.operation, failover.incident, failover.emergency, failover.overrides, failover.term) == (
        "failover-20261201T091500Z-d4e5f6", "INC-42", True, ("freeze",), "serve-b@3")
    assert failover.shortfall["internal"]["not_moved"] == 10
    assert failover.extra == {"drill": True, "drill_run": "run-7"}
    assert find_change(record, operation="failover-20261201T091500Z-d4e5f6", action="failover") is failover
    assert find_change(record, change_id="chg-82bda9134a84") is set_
    assert find_change(record, operation="failover-20261201T091500Z-d4e5f6", action="restore") is None


def test_the_typed_record_encodes_to_the_same_bytes_it_was_read_from():
    from opsctl.traffic.record import encode, parse

    assert encode(parse(BEFORE_TYPED, "fixture")) == BEFORE_TYPED


def test_an_entry_keeps_what_it_does_not_know_and_a_later_version_keeps_its_number():
    from opsctl.traffic.change_entry import ChangeEntry

    older = {"id": "chg-1", "action": "set", "ts": 1000, "reason": None, "overrides": "rate", "note": "by hand"}
    entry = ChangeEntry.parse(older)
    assert entry.version == 1 and entry.ts == 1000 and entry.operation == ""
    assert entry.extra == {"reason": None, "overrides": "rate", "note": "by hand"}
    written = entry.to_dict()
    assert "version" not in written
    assert {k: written[k] for k in older} == older  # each key it had, with the value it had
    assert json.dumps(written["ts"]) == "1000"
    later = ChangeEntry.parse({"version": 2, "id": "chg-2", "action": "set"})
    assert later.version == 2 and later.to_dict()["version"] == 2


def test_an_entry_that_is_not_an_object_is_dropped_not_fatal():
    from opsctl.traffic.record import newest_first, parse

    record = parse({"changes": ["garbage", {"id": "chg-1", "action": "set"}], "operations": {}}, "fixture")
    assert [e.id for e in newest_first(record)] == ["chg-1"]


def test_an_entrys_splits_read_back_typed_and_a_malformed_one_is_none():
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import parse
    from opsctl.traffic.split import Split

    failover = parse(BEFORE_TYPED, "test").changes[1]
    assert failover.before_split == Split.of({"databricks": 70, "internal": 30})
    assert failover.after_split == Split.of({"databricks": 10, "internal": 90})
    unset = ChangeEntry.parse({"before": None, "after": {"weights": {"internal": "lots"}}})
    assert unset.before_split is None and unset.after_split is None  # shown as "unset" / "-", never a traceback
