"""`failover.saved_split` answers typed (`SavedSplit`): the split to restore and where it was found,
the change record's open failover or, for an incident older than the record, this host's audit log."""

from __future__ import annotations

import pytest

from opsctl.audit import AuditLog
from opsctl.errors import NoDataError
from opsctl.traffic.failover import SavedSplit, saved_split
from opsctl.traffic.record import parse
from opsctl.traffic.split import Split

BACKENDS = ["internal", "databricks"]


def test_the_record_s_open_failover_is_the_saved_split(tmp_path):
    record = parse({"changes": [], "failovers": {"INC-9": {"saved": {"weights": {"internal": 30, "databricks": 70}},
                                                            "opened_at": "2026-12-02T01:00:00Z", "actor": "alice"}}},
                   "test")
    found = saved_split(record, AuditLog(tmp_path / "audit.jsonl"), "INC-9", BACKENDS)
    assert isinstance(found, SavedSplit)
    assert found.split == Split.of({"internal": 30, "databricks": 70})
    assert (found.source, found.time, found.audit_entry) == ("record", "2026-12-02T01:00:00Z", None)
    assert found.failover is record.failovers["INC-9"] and found.failover.actor == "alice"


def test_an_incident_older_than_the_record_is_found_in_the_audit_log(tmp_path):
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.append({"kind": "traffic", "action": "failover", "outcome": "applied", "incident": "INC-1",
                  "before": {"weights": {"internal": 20, "databricks": 80}}}, now=1_700_000_000)
    found = saved_split(None, audit, "INC-1", BACKENDS)
    assert found.split == Split.of({"internal": 20, "databricks": 80})
    assert (found.source, found.time, found.failover) == ("audit", "2023-11-14T22:13:20.000Z", None)
    assert found.audit_entry is not None and found.audit_entry["incident"] == "INC-1"
    with pytest.raises(NoDataError):
        saved_split(None, audit, "INC-2", BACKENDS)
