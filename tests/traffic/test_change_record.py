"""The change record around its entries is typed (`ChangeRecord`, its open failovers `OpenFailover`)
where the record is read, and written back as it was: records captured from the code before the
change (change_records.json) read into the model and encode to the same bytes; each malformed part
reads as it did before (the whole record no data, a part of another type empty)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CAPTURED = json.loads(Path(__file__).with_name("change_records.json").read_text())


def test_a_configmap_annotation_written_before_the_model_reads_typed_and_encodes_to_the_same_bytes():
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import ChangeRecord, OpenFailover, encode, parse

    raw = CAPTURED["configmap_annotation"]
    record = parse(raw, "fixture")
    assert isinstance(record, ChangeRecord) and record.version == 1 and record.term == "serve-b@3"
    assert all(isinstance(e, ChangeEntry) for e in record.changes) and len(record.changes) == 3
    assert [e.action for e in record.changes] == ["set", "failover", "set"]
    [(incident, opened)] = record.failovers.items()
    assert incident == "INC-42" and isinstance(opened, OpenFailover)
    assert opened.saved == {"shadow": {}, "weights": {"databricks": 70, "internal": 30}}
    assert opened.after == {"shadow": {}, "weights": {"databricks": 0, "internal": 100}}
    assert (opened.operation, opened.actor, opened.extra) == ("failover-20251201T091500Z-d4e5f6", "alice@laptop", {})
    assert opened.opened_ts == record.changes[1].ts and opened.opened_at == record.changes[1].time
    assert set(record.operations) == {e.operation for e in record.changes}
    assert record.extra == {}
    assert encode(record) == raw


def test_a_split_file_written_before_the_model_writes_back_the_same_bytes():
    from opsctl.traffic.record import FILE_KEY, parse

    text = CAPTURED["split_file"]
    body = json.loads(text)
    record = parse(body[FILE_KEY], "split.json")
    assert record.failovers["INC-42"].saved_split is not None
    assert record.failovers["INC-42"].saved_split.weight("internal") == 30
    # what the file actuator writes: its body with the record's stored form, through write_json_atomic's format
    written = json.dumps({**body, FILE_KEY: record.stored()}, indent=2, sort_keys=True, default=str) + "\n"
    assert written == text


def test_a_record_changes_and_closes_its_failover_as_a_new_record_leaving_the_one_read_alone():
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.record import parse

    record = parse(CAPTURED["configmap_annotation"], "fixture")
    before = record.encode()
    back = ChangeEntry.parse({"id": "chg-b", "operation": "restore-1", "action": "restore", "incident": "INC-42",
                              "ts": 1795000100.0, "time": "t", "before": record.failovers["INC-42"].after,
                              "after": {"shadow": {}, "weights": {"internal": 30, "databricks": 70}}})
    after = record.with_change(back, history=50, window=3600, now=1795000100.0).with_term("serve-c@4")
    assert after.failovers == {} and after.changes[-1] is back and after.term == "serve-c@4"
    assert after.operations["restore-1"] == 1795000100.0
    assert record.encode() == before and "INC-42" in record.failovers


@pytest.mark.parametrize("raw, message", [
    ("{not json", "fixture: the change record is not JSON"),
    ("[1, 2]", "fixture: the change record is not a JSON object"),
    (7, "fixture: the change record is not a JSON object"),
])
def test_a_record_that_is_not_a_json_object_is_no_data_in_one_line(raw, message):
    from opsctl.errors import NoDataError
    from opsctl.traffic.record import parse

    with pytest.raises(NoDataError) as caught:
        parse(raw, "fixture")
    assert caught.value.message.startswith(message) and "\n" not in caught.value.message
    assert caught.value.exit_code == 3


def test_each_part_of_another_type_reads_as_empty_and_a_bad_failover_or_operation_is_left_out():
    from opsctl.traffic.record import parse

    assert parse(None, "fixture") == parse("{}", "fixture")
    odd = parse({"changes": {"a": 1}, "operations": [1], "failovers": "INC-1", "term": 3}, "fixture")
    assert (odd.changes, odd.operations, odd.failovers, odd.term) == ((), {}, {}, None)
    mixed = parse({"changes": [], "operations": {"op-1": 10.5, "op-2": "soon", "op-3": 7},
                   "failovers": {"INC-1": "garbage", "INC-2": {"saved": "not a split", "opened_ts": 5}}}, "fixture")
    assert mixed.operations == {"op-1": 10.5, "op-3": 7}  # what the rate window counted before, too
    assert list(mixed.failovers) == ["INC-2"]
    assert mixed.failovers["INC-2"].saved is None and mixed.failovers["INC-2"].extra == {"saved": "not a split"}
    assert mixed.failovers["INC-2"].saved_split is None


def test_a_later_version_and_keys_a_newer_writer_added_are_kept():
    from opsctl.traffic.record import parse

    later = parse({"version": 2, "changes": [], "operations": {}, "failovers": {"I": {"version": 3, "note": "x"}},
                   "owner": "someone"}, "fixture")
    assert later.version == 2 and later.extra == {"owner": "someone"}
    assert later.failovers["I"].version == 3 and later.failovers["I"].extra == {"note": "x"}
    stored = later.stored()
    assert (stored["version"], stored["owner"], stored["failovers"]["I"]["version"]) == (2, "someone", 3)
    assert "version" not in parse("{}", "fixture").stored()
