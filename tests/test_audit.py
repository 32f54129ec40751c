"""opsctl.audit: the append-only audit log (redaction, torn lines, reading backwards)."""

from __future__ import annotations

import json

from opsctl.audit import AuditLog


def test_audit_appends_lines_redacts_secrets_and_skips_a_torn_line(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append({"kind": "traffic", "n": 1, "headers": {"Authorization": "Bearer abc", "x": 1}})
    with open(log.path, "ab") as fh:
        fh.write(b'{"kind": "traffic", "n": 2, "trunc')  # a crash in the middle of a write
    log.append({"kind": "traffic", "n": 3, "api_token": "xyz"})
    entries = list(log.newest_first())
    assert [e["n"] for e in entries] == [3, 1]
    assert entries[1]["headers"] == {"Authorization": "[redacted]", "x": 1}
    assert entries[0]["api_token"] == "[redacted]"
    assert "abc" not in log.path.read_text() and "xyz" not in log.path.read_text()
    assert len(log.path.read_text().splitlines()) == 3
    assert json.loads(log.path.read_text().splitlines()[0])["time"].endswith("Z")


def test_audit_reads_backwards_across_chunks(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl")
    for i in range(300):
        log.append({"kind": "traffic", "n": i, "pad": "x" * 50}, now=1000.0 + i)
    newest = list(log.newest_first(chunk=257))
    assert [e["n"] for e in newest] == list(range(299, -1, -1))
    recent = log.find(lambda e: True, since=1000.0 + 290)
    assert [e["n"] for e in recent] == list(range(299, 289, -1))
