"""The record of actions (`ActionLog`): every action the policy engine took and how it ended, one
SQLite `actions` row each, kept by the replica that acted (`automation/automation.sqlite` under the
state dir for serve, `automation.sqlite` in a drill's run dir).

An audit, append-only, never read by the automation to decide anything: what the automation acts
on is the incident (opsctl/incident/, docs/decisions/0215-responses-on-the-incident.md). The
`episode` column holds the key of the incident's response the action belongs to (the per-policy
episode's key before it moved onto the incident: the same derivation, so old rows group alike).
"""

from __future__ import annotations

import sqlite3
import threading
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


def connect(path: Path) -> sqlite3.Connection:
    """A connection for one thread: WAL, a busy timeout, autocommit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=10.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.row_factory = sqlite3.Row
    return conn


class Database:
    """One SQLite file, one connection per thread, writes of this process serialised on a lock."""

    def __init__(self, path: Path, schema: str):
        self.path = Path(path)
        self._local = threading.local()
        self.write_lock = threading.RLock()
        with self.write_lock:
            self.conn.executescript(schema)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    def write(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        """One write statement in its own (autocommit) transaction."""
        with self.write_lock:
            return self.conn.execute(sql, args)


class ActionLog:
    """The `actions` table of one SQLite file (one connection per thread, writes serialised)."""

    def __init__(self, path: Path):
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
