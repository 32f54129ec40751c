"""The record of one action the policy engine took (`ActionRecord`): the SQLite `actions` row each
replica keeps (episodes.py's schema) and the short entry its episode keeps in the shared document.
"""

from __future__ import annotations

import sqlite3

from opsctl.automation.episode_record import ActionEntry
from opsctl.model import Model

DETAIL_STORED = 2000  # characters of an action's detail the local record keeps
DETAIL_SHARED = 160  # characters of it an episode's entry in the shared document keeps

# The actions table's columns as written, in order (`at` is when the action finished).
_ACTION_COLUMNS = ("at", "event_key", "policy", "episode", "action", "status", "detail", "dry_run", "received_at",
                   "started_at", "finished_at")


class ActionRecord(Model):
    """One action the policy engine took (page, failover, ticket, note, restore) and how it ended,
    written by `EpisodeStore.record_action` (the SQLite `actions` row) and, by the shared store, also
    as a short entry on its episode in `serve-episodes` (`episode_entry`).

    Version 1 is the format every opsctl so far wrote: the row has no version column and the
    episode entry no version key, so what is stored does not change; `from_row` reads a stored row
    back into the same record."""

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

    def episode_entry(self, by: str) -> ActionEntry:
        """The entry its episode keeps in the shared document: when, what, how it ended, who."""
        return ActionEntry(at=self.finished_at, action=self.action, status=self.status, by=by,
                           detail=self.detail[:DETAIL_SHARED])


__all__ = ["DETAIL_SHARED", "DETAIL_STORED", "ActionRecord"]
