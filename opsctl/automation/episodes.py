"""Durable policy state: which alerts fire, each policy's open episode per target, and what was done.

An *episode* is one incident as a policy sees it, per target (the backend it fails over from): it
opens with the first matching alert that fires, holds the incident it paged, the ticket it filed
and whether it moved traffic, waits out the hold-down once every matching alert resolved, and
closes when traffic is restored (or when there was nothing to restore). At most one episode per
policy and target is open (a partial unique index), so two replicas sharing the state cannot open
two. While a worker acts on an episode it holds the episode's lease; another worker (or replica)
that meets a held lease retries its event a moment later.

Alert state is kept per policy and fingerprint with the alert's startsAt, so a late or replayed
event from an earlier firing never reopens or resolves a later one.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Callable

from opsctl.automation.action_record import _ACTION_COLUMNS, ActionRecord
from opsctl.automation.episode_protocol import FiringStart, episode_key, mark_failover_started
from opsctl.automation.episode_record import Episode, EpisodeBlocked
from opsctl.automation.stored_entry import MalformedEpisode
from opsctl.automation.idempotency import Database, default_owner
from opsctl.errors import NoDataError

log = logging.getLogger("opsctl.automation")

SCHEMA = """
CREATE TABLE IF NOT EXISTS alert_state (
    policy TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    target TEXT NOT NULL,
    starts_at TEXT NOT NULL,           -- canonical RFC 3339, nanoseconds: sorts as text
    status TEXT NOT NULL,              -- firing | resolved
    updated_at REAL NOT NULL,
    PRIMARY KEY (policy, fingerprint)
);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    policy TEXT NOT NULL,
    target TEXT NOT NULL,
    key TEXT,                          -- from the opening alert (policy, target, fingerprint, startsAt)
    state TEXT NOT NULL,               -- open | restore_pending | restoring | closed
    opened_at REAL NOT NULL,
    incident TEXT,                     -- what page() returned: dedup key or incident id
    ticket TEXT,
    failover TEXT,                     -- outcome status of the failover, NULL before one was tried
    owned INTEGER NOT NULL DEFAULT 0,  -- 1 when this automation moved the traffic (so it may restore)
    saved TEXT,                        -- JSON: what the failover returned (the split before and after)
    restore_due REAL,
    restore_refusals INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL,
    closed_at REAL,
    closed_because TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS one_open_episode ON episodes (policy, target) WHERE state != 'closed';
CREATE INDEX IF NOT EXISTS episodes_due ON episodes (state, restore_due);
CREATE TABLE IF NOT EXISTS actions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    event_key TEXT,
    policy TEXT NOT NULL,
    episode INTEGER,
    action TEXT NOT NULL,              -- page | failover | ticket | note | restore
    status TEXT NOT NULL,              -- applied | noop | refused | skipped | failed | dry_run
    detail TEXT NOT NULL,
    dry_run INTEGER NOT NULL,
    received_at REAL,                  -- when the delivery that caused it arrived
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS actions_by_policy ON actions (policy, action);
"""


class Busy(Exception):
    """Another worker holds the episode's lease; retry the event shortly. `holder` names the lease's
    owner when the store knows it (`<replica owner>:<thread>`), so a worker can tell a sibling thread
    of its own replica (the maintenance thread finishing a restore) from another replica."""

    def __init__(self, message: str, holder: str | None = None):
        super().__init__(message)
        self.holder = holder


class EpisodeStore:
    def __init__(self, path: Path, *, clock: Callable[[], float], owner: str | None = None, lease: float = 300.0):
        self.db = Database(path, "")
        with self.db.write_lock:
            conn = self.db.conn
            old = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episodes'").fetchone()
            if old and "key" not in [r[1] for r in conn.execute("PRAGMA table_info(episodes)")]:
                conn.execute("ALTER TABLE episodes ADD COLUMN key TEXT")  # state written by an earlier version
            conn.executescript(SCHEMA)
        self.clock = clock
        self.owner = owner or default_owner()
        self.lease_seconds = lease

    # -- alerts -------------------------------------------------------------------------------

    def record_alert(self, conn: sqlite3.Connection, policy: str, fingerprint: str, target: str, starts_at: str,
                     status: str) -> str:
        """Store the alert's state; returns 'stale' when a later (or resolved) copy is already recorded."""
        row = conn.execute("SELECT starts_at, status FROM alert_state WHERE policy = ? AND fingerprint = ?",
                           (policy, fingerprint)).fetchone()
        if row is not None:
            if row["starts_at"] > starts_at:
                return "stale"
            if row["starts_at"] == starts_at and row["status"] == "resolved":
                return "stale"  # resolved is final for one firing (startsAt); a firing copy is late
        conn.execute(
            "INSERT INTO alert_state (policy, fingerprint, target, starts_at, status, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (policy, fingerprint) DO UPDATE SET target = excluded.target, starts_at = excluded.starts_at,"
            " status = excluded.status, updated_at = excluded.updated_at",
            (policy, fingerprint, target, starts_at, status, self.clock()),
        )
        return "recorded"

    def firing_count(self, conn: sqlite3.Connection, policy: str, target: str) -> int:
        count: int = conn.execute(
            "SELECT COUNT(*) FROM alert_state WHERE policy = ? AND target = ? AND status = 'firing'", (policy, target)
        ).fetchone()[0]
        return count

    # -- episodes -----------------------------------------------------------------------------

    def open_episode(self, conn: sqlite3.Connection, policy: str, target: str) -> Episode | None:
        """The open episode of `policy` and `target`; EpisodeBlocked when the row does not read (it may
        hold this incident, and the unique index keeps a second one from opening beside it)."""
        row = conn.execute("SELECT * FROM episodes WHERE policy = ? AND target = ? AND state != 'closed'",
                           (policy, target)).fetchone()
        if row is None:
            return None
        try:
            return Episode.from_row(row)
        except MalformedEpisode as exc:
            raise EpisodeBlocked("the local episodes table", str(row["id"]),
                                 exc.message.split(": ", 1)[-1]) from None

    def create_episode(self, conn: sqlite3.Connection, policy: str, target: str, key: str | None = None) -> Episode:
        cur = conn.execute("INSERT INTO episodes (policy, target, key, state, opened_at) VALUES (?, ?, ?, 'open', ?)",
                           (policy, target, key, self.clock()))
        assert cur.lastrowid is not None  # an INSERT sets it
        return self.get(cur.lastrowid, conn)

    def get(self, episode_id: int | str, conn: sqlite3.Connection | None = None) -> Episode:
        conn = conn or self.db.conn
        row = conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise NoDataError(f"episode {episode_id}: no such episode")
        return Episode.from_row(row)

    def held_here(self, holder: str | None) -> bool:
        """Never: one process keeps these episodes, and a Busy here does not name its holder."""
        return False

    def holder(self) -> None:
        """None: nothing to hand back. One process keeps these episodes: a worker's save releases
        its episode (`PolicyEngine._firing`'s finally), and a lease left by a dead process is
        released at start-up (`recover`)."""
        return None

    def let_go(self, holder: str | None = None) -> int:
        """Release the open episodes `holder` (default: this worker) holds; a restore it was running
        is pending again. Owner-checked: an episode someone else holds is left alone."""
        me = holder or self._me()
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE episodes SET owner = NULL, lease_until = NULL,"
                " state = CASE state WHEN 'restoring' THEN 'restore_pending' ELSE state END"
                " WHERE owner = ? AND state != 'closed'", (me,))
            return cur.rowcount

    def _me(self) -> str:
        """Leases belong to one thread: the restore scheduler and a worker in one process exclude each other."""
        return f"{self.owner}:{threading.get_ident()}"

    def lease(self, conn: sqlite3.Connection, episode_id: int | str) -> tuple[str, float]:
        """Take the episode's lease for this worker; returns (owner, until) as written."""
        now = self.clock()
        me = self._me()
        until = now + self.lease_seconds
        cur = conn.execute(
            "UPDATE episodes SET owner = ?, lease_until = ? WHERE id = ?"
            " AND (owner IS NULL OR owner = ? OR lease_until IS NULL OR lease_until < ?)",
            (me, until, episode_id, me, now),
        )
        if cur.rowcount != 1:
            raise Busy(f"episode {episode_id} is being acted on by another worker")
        return me, until

    def update(self, episode_id: int | str, conn: sqlite3.Connection | None = None, **fields: object) -> None:
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        sql, args = f"UPDATE episodes SET {cols} WHERE id = ?", (*fields.values(), episode_id)
        if conn is not None:
            conn.execute(sql, args)
        else:
            self.db.write(sql, args)

    def release(self, episode_id: int | str, **fields: object) -> None:
        self.update(episode_id, None, owner=None, lease_until=None, **fields)

    def close(self, conn: sqlite3.Connection, episode_id: int | str, because: str) -> None:
        self.update(episode_id, conn, state="closed", closed_at=self.clock(), closed_because=because,
                    restore_due=None, owner=None, lease_until=None)

    def other_moved(self, conn: sqlite3.Connection, episode: Episode) -> list[Episode]:
        """Open episodes on other targets that moved traffic away from their backend."""
        rows = conn.execute(
            "SELECT * FROM episodes WHERE state != 'closed' AND target != ? AND owned = 1"
            " AND failover IN ('applied', 'dry_run')", (episode.target,)
        ).fetchall()
        return [Episode.from_row(r) for r in rows]

    def recover(self, *, all_others: bool = False) -> int:
        """At start-up: episodes a dead process on this host held are released; a restore it was
        running is due again (the controller's optimistic concurrency makes a repeat harmless).
        `all_others`: every holder but this process (a new leader: the old one no longer acts)."""
        from opsctl.automation.idempotency import dead_local_owner

        with self.db.transaction() as conn:
            rows = conn.execute("SELECT id, state, owner FROM episodes WHERE owner IS NOT NULL AND state != 'closed'")
            released = 0
            for row in rows.fetchall():
                mine = (row["owner"] or "").startswith(f"{self.owner}:")
                if (all_others and not mine) or dead_local_owner(row["owner"]):
                    state = "restore_pending" if row["state"] == "restoring" else row["state"]
                    conn.execute("UPDATE episodes SET owner = NULL, lease_until = NULL, state = ? WHERE id = ?",
                                 (state, row["id"]))
                    released += 1
        return released

    def claim_due_restore(self) -> Episode | None:
        """Take one episode whose hold-down has passed (or whose restorer died) for this worker."""
        now = self.clock()
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT id FROM episodes WHERE (state = 'restore_pending' AND restore_due <= ?)"
                " OR (state = 'restoring' AND lease_until < ?) ORDER BY restore_due LIMIT 1", (now, now)
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE episodes SET state = 'restoring', owner = ?, lease_until = ? WHERE id = ?",
                         (self._me(), now + self.lease_seconds, row["id"]))
            return self.get(row["id"], conn)

    def next_restore_due(self) -> float | None:
        row = self.db.conn.execute("SELECT MIN(restore_due) FROM episodes WHERE state = 'restore_pending'").fetchone()
        due: float | None = row[0]  # NULL without a pending restore
        return due

    def episodes(self, *, open_only: bool = False) -> list[Episode]:
        """Every episode (or the open ones), oldest first; a row that does not read is left out, its
        problem logged in one line (MalformedEpisode), so one bad row never stops the others."""
        sql = "SELECT * FROM episodes" + (" WHERE state != 'closed'" if open_only else "") + " ORDER BY id"
        out = []
        for row in self.db.conn.execute(sql).fetchall():
            try:
                out.append(Episode.from_row(row))
            except MalformedEpisode as exc:
                log.warning("episodes: %s (left out)", exc.message)
        return out

    # -- what the policy engine does, each in one transaction ----------------------------------

    def begin_firing(self, policy: str, fingerprint: str, target: str, starts_at: str, *,
                     failover: bool = False) -> FiringStart | None:
        """Record a firing alert and lease its episode (opened if none is); None for a late copy.
        `failover`: the policy fails over, so the episode is marked as failing over in the same write."""
        with self.db.transaction() as conn:
            if self.record_alert(conn, policy, fingerprint, target, starts_at, "firing") == "stale":
                return None
            episode = self.open_episode(conn, policy, target) or self.create_episode(
                conn, policy, target, episode_key(policy, target, fingerprint, starts_at))
            owner, until = self.lease(conn, episode.id)
            episode = episode.changed(owner=owner, lease_until=until)
            cancelled = episode.state == "restore_pending"
            if cancelled:
                self.update(episode.id, conn, state="open", restore_due=None)
                episode = episode.changed(state="open", restore_due=None)
            resumed = False
            if failover:
                episode, resumed = mark_failover_started(episode)
            if failover and episode.failover == "started":
                self.update(episode.id, conn, failover="started")
            return FiringStart(episode, cancelled, {e.target for e in self.other_moved(conn, episode)}, resumed)

    def save(self, episode: Episode) -> None:
        """Save what was done and let go of the episode."""
        self.release(episode.id, **episode.fields())

    def begin_resolved(self, policy: str, fingerprint: str, target: str, starts_at: str, *, restores: bool,
                       hold_down: float, because: Callable[[Episode], str]) -> tuple[Episode, str] | None:
        """Record a resolved alert; when it was the episode's last firing one, the episode goes to
        `restore_pending` (restores) or is closed. Returns (episode, new state) or None."""
        with self.db.transaction() as conn:
            if self.record_alert(conn, policy, fingerprint, target, starts_at, "resolved") == "stale":
                return None
            episode = self.open_episode(conn, policy, target)
            if episode is None or episode.state != "open" or self.firing_count(conn, policy, target):
                return None
            self.lease(conn, episode.id)
            if restores and episode.may_have_moved_traffic:
                self.update(episode.id, conn, state="restore_pending", restore_due=self.clock() + hold_down,
                            owner=None, lease_until=None, restore_refusals=0)  # a new restore step
                return episode, "restore_pending"
            self.close(conn, episode.id, because(episode))
            return episode, "closed"

    def by_incident(self, keys: list[str]) -> Episode | None:
        if not keys:
            return None
        marks = ",".join("?" for _ in keys)
        row = self.db.conn.execute(f"SELECT * FROM episodes WHERE incident IN ({marks}) ORDER BY id DESC LIMIT 1",
                                   keys).fetchone()
        return Episode.from_row(row) if row else None

    def end_restore(self, episode: Episode, *, closed_because: str | None, retry_at: float | None = None) -> None:
        """Close the episode after its restore, or put it back to wait until `retry_at`."""
        with self.db.transaction() as conn:
            if closed_because is not None:
                self.close(conn, episode.id, closed_because[:500])
            else:
                self.update(episode.id, conn, state="restore_pending", owner=None, lease_until=None,
                            restore_due=retry_at, restore_refusals=episode.restore_refusals + 1)

    def close_episode(self, episode: Episode, because: str) -> None:
        with self.db.transaction() as conn:
            self.close(conn, episode.id, because)

    def check(self) -> None:
        """Raises when the state cannot be read (readiness)."""
        self.db.conn.execute("SELECT 1 FROM episodes LIMIT 1").fetchall()

    # -- the record of actions ----------------------------------------------------------------

    def record_action(self, record: ActionRecord) -> None:
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


__all__ = ["Busy", "EpisodeStore"]
