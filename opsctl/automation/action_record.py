"""The record of one action the policy engine took (`ActionRecord`): the SQLite `actions` row each
replica keeps (action_log.py).
"""

from __future__ import annotations

import sqlite3

from opsctl.model import Model

DETAIL_STORED = 2000  # characters of an action's detail the local record keeps

# The actions table's columns as written, in order (`at` is when the action finished).
_ACTION_COLUMNS = ("at", "event_key", "policy", "episode", "action", "status", "detail", "dry_run", "received_at",
                   "started_at", "finished_at")


class ActionRecord(Model):
    """One action the policy engine took (page, failover, ticket, note, restore) and how it ended,
    written by `ActionLog.record` (the SQLite `actions` row). `episode` is the key of the incident's
    response it belongs to.

    Version 1 is the format every opsctl so far wrote: the row has no version column, so what is
    stored does not change; `from_row` reads a stored row back into the same record."""

    policy: str
    action: str  # page | failover | ticket | note | restore
    status: str  # applied | noop | refused | skipped | failed | dry_run
    detail: str
    dry_run: bool
    started_at: float
    finished_at: float
    event_key: str | None = None  # the delivery that caused it (None: a restore's sweep)
    episode: int | str | None = None
    received_at: float | None = None  # when that delivery arrived
    version: int = 1

    def row(self) -> tuple[object, ...]:
        """The `actions` row's values, in `_ACTION_COLUMNS` order (the detail bounded)."""
        return (self.finished_at, self.event_key, self.policy, self.episode, self.action, self.status,
                self.detail[:DETAIL_STORED], int(self.dry_run), self.received_at, self.started_at, self.finished_at)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "ActionRecord":
        return cls(policy=row["policy"], action=row["action"], status=row["status"], detail=row["detail"],
                   dry_run=bool(row["dry_run"]), started_at=row["started_at"], finished_at=row["finished_at"],
                   event_key=row["event_key"], episode=row["episode"], received_at=row["received_at"])


__all__ = ["DETAIL_STORED", "ActionRecord"]
