"""The record of actions (`ActionLog`): every action the policy engine took and how it ended, one
SQLite `actions` row each, kept by the replica that acted (`automation/automation.sqlite` under the
state dir for serve, `automation.sqlite` in a drill's run dir).

An audit, append-only, never read by the automation to decide anything: what the automation acts
on is the incident (opsctl/incident/, docs/decisions/0215-responses-on-the-incident.md). The
`episode` column holds the key of the incident's response the action belongs to (the per-policy
episode's key before it moved onto the incident: the same derivation, so old rows group alike).
"""

from __future__ import annotations

from pathlib import Path

from opsctl.automation.action_record import _ACTION_COLUMNS, ActionRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    event_key TEXT,
    policy TEXT NOT NULL,
    episode,                           -- the incident response's key (no affinity: stored as given)
    action TEXT NOT NULL,              -- page | failover | ticket | note | restore | ...
    status TEXT NOT NULL,              -- applied | noop | refused | skipped | failed | dry_run
    detail TEXT NOT NULL,
    dry_run INTEGER NOT NULL,
    received_at REAL,                  -- when the delivery that caused it arrived
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_by_policy ON actions (policy, action);
"""


class ActionLog:
    """The `actions` table of one SQLite file (one connection per thread, writes serialised)."""

    def __init__(self, path: Path):
        from opsctl.automation.idempotency import Database

        self.db = Database(Path(path), SCHEMA)

    def record(self, record: ActionRecord) -> None:
        self.db.write(f"INSERT INTO actions ({', '.join(_ACTION_COLUMNS)})"
                      f" VALUES ({', '.join('?' for _ in _ACTION_COLUMNS)})", record.row())

    def actions(self, *, policy: str | None = None, action: str | None = None) -> list[ActionRecord]:
        """The record of actions, oldest first, read back typed."""
        sql = "SELECT * FROM actions WHERE 1 = 1"
        args: list[str] = []
        if policy:
            sql, args = sql + " AND policy = ?", [*args, policy]
        if action:
            sql, args = sql + " AND action = ?", [*args, action]
        return [ActionRecord.from_row(r) for r in self.db.conn.execute(sql + " ORDER BY id", args).fetchall()]


__all__ = ["ActionLog"]
