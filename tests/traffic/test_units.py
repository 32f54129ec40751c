"""Pure pieces: split arithmetic, ramp steps, failover plans, the change record."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.traffic.failover import failover_plan, failover_trim
from opsctl.traffic.split import Split, fill_remainder, largest_remainder, parse_assignments, ramp_steps

BACKENDS = ["internal", "databricks", "spare"]


@pytest.mark.parametrize("shares, expected", [
    ({"a": 33.4, "b": 33.3, "c": 33.3}, {"a": 34, "b": 33, "c": 33}),
    ({"a": 50.0, "b": 50.0}, {"a": 50, "b": 50}),
    ({"a": 66.666, "b": 33.334}, {"a": 67, "b": 33}),
    ({"b": 50.5, "a": 49.5}, {"a": 50, "b": 50}),  # equal remainders: name order decides
])
def test_largest_remainder_keeps_the_sum_at_100(shares, expected):
    assert largest_remainder(shares) == expected


def test_zero_weights_and_shadows_do_not_make_splits_differ():
    assert Split.of({"internal": 0, "databricks": 100}, {"internal": 0}) == Split.of({"databricks": 100})


def test_fill_remainder_shares_the_rest_in_proportion_to_current_weights():
    current = Split.of({"internal": 20, "databricks": 60, "spare": 20})
    # 40 left for databricks and spare, 60:20 -> 30 and 10.
    assert fill_remainder({"internal": 60}, current, BACKENDS) == {"internal": 60, "databricks": 30, "spare": 10}
    empty = Split.of({"internal": 100})
    assert fill_remainder({"internal": 40}, empty, BACKENDS) == {"internal": 40, "databricks": 30, "spare": 30}
    with pytest.raises(UsageError):
        fill_remainder({"internal": 60, "spare": 50}, current, BACKENDS)


def test_ramp_steps_never_move_a_backend_more_than_the_step_and_end_at_the_target():
    start = Split.of({"internal": 80, "databricks": 20})
    target = Split.of({"internal": 25, "databricks": 75})
    steps = ramp_steps(start, target, 10)
    assert steps[-1] == target and len(steps) == 6  # 55 points at most 10 each
    previous = start
    for s in steps:
        assert sum(s.weights.values()) == 100
        assert abs(s.weight("internal") - previous.weight("internal")) <= 10
        previous = s
    assert ramp_steps(start, start, 10) == []


def test_ramp_steps_move_shadow_too():
    start = Split.of({"internal": 20, "databricks": 80})
    target = Split.of({"internal": 20, "databricks": 80}, {"internal": 20})
    assert [s.shadow_of("internal") for s in ramp_steps(start, target, 10)] == [10, 20]


def test_three_backend_failover_spreads_in_proportion_and_capacity_trim_gives_the_rest_back():
    before = Split.of({"internal": 20, "databricks": 50, "spare": 30}, {"internal": 5})
    plan = failover_plan("databricks", ["internal", "spare"])(before)
    # 50 points in proportion 20:30 -> 20 and 30; shadow stops.
    assert plan == Split.of({"internal": 40, "spare": 60})
    trimmed = failover_trim("databricks")(before, plan, {"internal": 25})
    assert trimmed == Split.of({"internal": 25, "databricks": 15, "spare": 60})
    never_less = failover_trim("databricks")(before, plan, {"internal": 10})
    assert never_less.weight("internal") == 20, "a failover never takes traffic away from a receiver"


def test_parse_assignments_reports_syntax_errors_with_the_flag():
    assert parse_assignments(["internal=30", "databricks=70%"], "--to") == {"internal": 30, "databricks": 70}
    with pytest.raises(UsageError, match="--to: 'internal=x'"):
        parse_assignments(["internal=x"], "--to")
    with pytest.raises(UsageError, match="given twice"):
        parse_assignments(["a=1", "a=2"], "--to")


# -- the change record stored with the split ---------------------------------------------------


def _entry(n: int, action: str = "set", incident=None, before=None, after=None, ts=None, reason=""):
    from opsctl.traffic.change_entry import ChangeEntry

    split = {"weights": {"databricks": 100 - n % 100, "internal": n % 100}, "shadow": {}}
    return ChangeEntry.parse({"id": f"chg-{n}", "operation": f"op-{n}", "action": action, "incident": incident,
                              "ts": ts if ts is not None else float(n), "time": str(n), "actor": "a", "reason": reason,
                              "before": before, "after": after or split})


def test_the_record_keeps_history_entries_and_only_the_rate_windows_operations():
    from opsctl.traffic import record

    rec = record.empty()
    for n in range(1, 31):
        rec = rec.with_change(_entry(n), history=10, window=5, now=float(n))
    assert [c.id for c in rec.changes] == [f"chg-{n}" for n in range(21, 31)]
    assert sorted(rec.operations) == sorted(f"op-{n}" for n in range(25, 31))  # ts >= now - window
    assert record.operations_since(rec, 28.0, exclude="op-30") == {"op-28": 28.0, "op-29": 29.0}


def test_the_record_opens_a_failover_once_and_closes_it_when_a_restore_reaches_the_saved_split():
    from opsctl.traffic import record

    normal = {"weights": {"databricks": 80, "internal": 20}, "shadow": {}}
    half = {"weights": {"databricks": 50, "internal": 50}, "shadow": {}}
    away = {"weights": {"internal": 100}, "shadow": {}}
    rec = record.empty().with_change(_entry(1, "failover", "I-1", normal, half), history=50, window=60, now=1)
    rec = rec.with_change(_entry(2, "failover", "I-1", half, away), history=50, window=60, now=2)
    assert rec.failovers["I-1"].saved == normal and rec.failovers["I-1"].after == away
    assert (rec.failovers["I-1"].opened_ts, rec.failovers["I-1"].operation) == (1.0, "op-1")  # opened by the first
    rec = rec.with_change(_entry(3, "restore", "I-1", away, half), history=50, window=60, now=3)
    assert "I-1" in rec.failovers, "half way back is still open"
    rec = rec.with_change(_entry(4, "restore", "I-1", half, {"weights": {"databricks": 80, "internal": 20,
                                                                        "spare": 0}}), history=50, window=60, now=4)
    assert rec.failovers == {}


def test_the_record_stays_within_its_byte_bound_and_open_failover_cap():
    from opsctl.traffic import record

    rec = record.empty()
    for n in range(1, 400):
        entry = _entry(n, "failover", f"I-{n}", {"weights": {"databricks": 100}, "shadow": {}}, reason="x" * 300)
        rec = rec.with_change(entry, history=200, window=10, now=float(n))
    assert len(record.encode(rec).encode()) <= record.MAX_BYTES
    assert len(rec.failovers) == record.MAX_FAILOVERS and "I-399" in rec.failovers
