"""The embedded store: 10-second client-side aggregates per backend in SQLite, in the state dir.

Each row holds one backend's increments for one step (ts is the step's end) plus running totals
(`c_*`), so `increase(x[w])` at instant t is two indexed lookups: total(t) - total(t - w).
Queries evaluate at the 10-second grid: t is rounded down to a step boundary.

A store written before a column joined the schema (e.g. `suggestions`) is migrated when opened:
the column and its running total are added with 0 in every existing row, which is what those
rows hold (the proxy did not count it then), so totals stay consistent without a rewrite.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from opsctl.errors import NoDataError, UsageError
from opsctl.metrics import schema
from opsctl.metrics.promql import RangeQuery, format_selector, parse_range_query

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_COLS = schema.VALUE_COLUMNS
_CUM = tuple(f"c_{c}" for c in _COLS)


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the schema's columns an older store lacks (0 in existing rows), in one transaction."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(steps)")}
    missing = [c for c in _COLS + _CUM if c not in present]
    if not missing:
        return
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        present = {row[1] for row in conn.execute("PRAGMA table_info(steps)")}  # another process may have won
        for column in missing:
            if column not in present:
                conn.execute(f"ALTER TABLE steps ADD COLUMN {column} REAL NOT NULL DEFAULT 0")



@functools.lru_cache(maxsize=1024)
def _range_query(expr: str) -> tuple[RangeQuery, str]:
    """The parsed query and its selector as text (a cheap key), once per expression: a guard asks
    the same few expressions on every change, and hashing and comparing the typed Selector cost more
    than the lookups (issue 22: most of a failover's budget guard). Parsing is pure, so nothing
    here can go stale; data is always read afresh."""
    query = parse_range_query(expr)
    return query, format_selector(query.selector)

class EmbeddedStore:
    def __init__(self, conn: sqlite3.Connection, path: Path, labels: Mapping[str, str] | None = None):
        self.conn = conn
        self.path = path
        # Labels every series of the store carries: a store holds one service's proxy, so its
        # series carry that service's label (Config.service_labels), as the proxy's own do.
        self.labels = dict(labels or {})
        self.description = f"embedded store {path}"

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, create: bool, labels: Mapping[str, str] | None = None) -> "EmbeddedStore":
        path = Path(path)
        if not create and not path.exists():
            raise NoDataError(
                f"no embedded metrics at {path}",
                hint="load some with `opsctl sim generate` or `opsctl metrics ingest FILE`",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        cols = ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in _COLS + _CUM)
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS steps (backend TEXT NOT NULL, ts INTEGER NOT NULL, {cols},"
            " PRIMARY KEY (backend, ts)) WITHOUT ROWID"
        )
        _migrate(conn)
        return cls(conn, path, labels)

    def close(self) -> None:
        self.conn.close()

    # -- writing ----------------------------------------------------------------------------

    def write_steps(
        self,
        backend: str,
        timestamps: Sequence[int],
        values: Mapping[str, Sequence[float]],
        *,
        mode: str = "add",
    ) -> int:
        """Write one backend's steps. mode 'add' adds to what a step holds, 'replace' overwrites it.

        Timestamps must be on the 10-second grid. Running totals are rebuilt afterwards.
        """
        unknown = set(values) - set(_COLS)
        if unknown:
            raise UsageError(f"unknown embedded-store columns: {', '.join(sorted(unknown))}")
        if mode not in ("add", "replace"):
            raise ValueError(mode)
        if not len(timestamps):
            return 0
        cols = [c for c in _COLS if c in values]
        columns = [values[c] for c in cols]
        rows = ([backend, int(ts)] + [float(col[i]) for col in columns] for i, ts in enumerate(timestamps))
        placeholders = ", ".join("?" for _ in range(len(cols) + 2))
        if mode == "add":
            update = ", ".join(f"{c} = {c} + excluded.{c}" for c in cols)
        else:
            update = ", ".join(f"{c} = excluded.{c}" for c in _COLS)
        sql = (
            f"INSERT INTO steps (backend, ts, {', '.join(cols)}) VALUES ({placeholders})"
            f" ON CONFLICT (backend, ts) DO UPDATE SET {update}"
        )
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(sql, rows)
            self._rebuild_totals(backend, int(min(timestamps)))
        return len(timestamps)

    def append_steps(self, backend: str, timestamps: ArrayLike, values: Mapping[str, ArrayLike]) -> int:
        """Write steps that all come after the backend's newest one, running totals computed in one
        numpy pass: several times faster than `write_steps` for bulk loads (a drill's baseline, or
        its steps as simulated time moves on). Anything else falls back to `write_steps`."""
        import numpy as np

        unknown = set(values) - set(_COLS)
        if unknown:
            raise UsageError(f"unknown embedded-store columns: {', '.join(sorted(unknown))}")
        ts = np.asarray(timestamps, dtype=np.int64)
        if not ts.size:
            return 0
        newest = self.conn.execute("SELECT MAX(ts) FROM steps WHERE backend = ?", (backend,)).fetchone()[0]
        if (newest is not None and int(ts[0]) <= newest) or bool(np.any(np.diff(ts) <= 0)) or bool(ts[0] % schema.STEP_SECONDS):
            return self.write_steps(backend, ts.tolist(), {c: np.asarray(v, dtype=np.float64).tolist()
                                                           for c, v in values.items()}, mode="add")
        previous = self.totals(backend, int(ts[0]) - 1)
        increments = np.column_stack([np.asarray(values[c], dtype=np.float64) if c in values else np.zeros(ts.size)
                                      for c in _COLS])
        totals = np.cumsum(increments, axis=0) + np.array([previous[c] for c in _COLS])
        rows = [(backend, t, *r) for t, r in zip(ts.tolist(), np.hstack([increments, totals]).tolist())]
        placeholders = ", ".join("?" for _ in range(len(_COLS) + len(_CUM) + 2))
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(
                f"INSERT INTO steps (backend, ts, {', '.join(_COLS + _CUM)}) VALUES ({placeholders})", rows)
        return int(ts.size)

    def _rebuild_totals(self, backend: str, since: int) -> None:
        prev = self.conn.execute(
            f"SELECT {', '.join(_CUM)} FROM steps WHERE backend = ? AND ts < ? ORDER BY ts DESC LIMIT 1",
            (backend, since),
        ).fetchone() or (0.0,) * len(_CUM)
        window = ", ".join(
            f"{p} + SUM({c}) OVER (ORDER BY ts ROWS UNBOUNDED PRECEDING) AS {k}"
            for c, k, p in zip(_COLS, _CUM, prev)
        )
        assign = ", ".join(f"{k} = w.{k}" for k in _CUM)
        self.conn.execute(
            f"UPDATE steps SET {assign} FROM (SELECT ts, {window} FROM steps WHERE backend = ? AND ts >= ?) AS w"
            " WHERE steps.backend = ? AND steps.ts = w.ts",
            (backend, since, backend),
        )

    def delete_range(self, start: int, end: int, backends: Iterable[str] | None = None) -> None:
        """Remove steps in [start, end] (e.g. before re-simulating a period) and fix the totals."""
        targets = list(backends) if backends is not None else self.backends()
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            for backend in targets:
                self.conn.execute("DELETE FROM steps WHERE backend = ? AND ts >= ? AND ts <= ?", (backend, start, end))
                self._rebuild_totals(backend, start)

    # -- reading ----------------------------------------------------------------------------

    def backends(self) -> list[str]:
        # A skip-scan over the (backend, ts) primary key: one index seek per backend, where
        # DISTINCT would read every row (~50 ms for 28 days of two backends).
        rows = self.conn.execute(
            "WITH RECURSIVE b(name) AS (SELECT MIN(backend) FROM steps"
            " UNION ALL SELECT (SELECT MIN(backend) FROM steps WHERE backend > b.name) FROM b WHERE b.name IS NOT NULL)"
            " SELECT name FROM b WHERE name IS NOT NULL"
        )
        return [r[0] for r in rows]

    def time_range(self) -> tuple[int, int] | None:
        # One aggregate per query, so SQLite answers each from the index instead of scanning.
        firsts, lasts = [], []
        for b in self.backends():
            firsts.append(self.conn.execute("SELECT MIN(ts) FROM steps WHERE backend = ?", (b,)).fetchone()[0])
            lasts.append(self.conn.execute("SELECT MAX(ts) FROM steps WHERE backend = ?", (b,)).fetchone()[0])
        if not firsts:
            return None
        return int(min(firsts)), int(max(lasts))

    def check(self) -> None:
        if self.time_range() is None:
            raise self._empty()

    def _empty(self) -> NoDataError:
        return NoDataError(
            f"the embedded store {self.path} is empty",
            hint="load some with `opsctl sim generate` or `opsctl metrics ingest FILE`",
        )

    def default_time(self, now: float | None = None) -> float:
        """The instant every report and guard reads when none is given: now, on the 10 s grid, or the
        newest step before now when the store's data ends earlier (a store loaded from a past file).
        Data ahead of now (`sim generate --ahead`) is never the instant (docs/decisions/0402). `now`:
        the caller's clock when it is simulated (a rehearsal's guards decide at the simulated instant,
        docs/decisions/0512), else the wall clock."""
        from opsctl.clock import wall_now

        if self.time_range() is None:
            raise self._empty()
        now = float(int(wall_now() if now is None else now) // schema.STEP_SECONDS * schema.STEP_SECONDS)
        newest = self.newest_sample(now)
        return now if newest is None else min(newest, now)

    def totals(self, backend: str, at: int) -> dict[str, float]:
        """Running totals of every column through instant `at` (0 before the first step)."""
        row = self.conn.execute(
            f"SELECT {', '.join(_CUM)} FROM steps WHERE backend = ? AND ts <= ? ORDER BY ts DESC LIMIT 1",
            (backend, at),
        ).fetchone()
        return dict(zip(_COLS, row or (0.0,) * len(_COLS)))

    def has_steps(self, backend: str, start: int, end: int) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM steps WHERE backend = ? AND ts > ? AND ts <= ? LIMIT 1", (backend, start, end)
        ).fetchone() is not None

    def newest_sample(self, at: float) -> float | None:
        """The newest step at or before `at`, over every backend (None when there is none)."""
        newest = [self.conn.execute("SELECT MAX(ts) FROM steps WHERE backend = ? AND ts <= ?", (b, int(at))).fetchone()[0]
                  for b in self.backends()]
        newest = [n for n in newest if n is not None]
        return float(max(newest)) if newest else None

    def data_start(self, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
        """Per selector, the start of the first step within (at - span, at] of a backend it
        matches (a step covers the 10 s before its timestamp), or None when it matches nothing."""
        from opsctl.metrics.promql import parse_selector

        at = int(at) // schema.STEP_SECONDS * schema.STEP_SECONDS
        firsts = {}
        for backend in self.backends():
            row = self.conn.execute("SELECT MIN(ts) FROM steps WHERE backend = ? AND ts > ? AND ts <= ?",
                                    (backend, at - span, at)).fetchone()
            if row and row[0] is not None:
                firsts[backend] = int(row[0]) - schema.STEP_SECONDS
        out: list[float | None] = []
        for text in selectors:
            selector = parse_selector(text)
            series = schema.series_columns(selector.metric) or {}
            starts = [first for backend, first in firsts.items()
                      if any(selector.label_matches({**self.labels, **dict(own), "backend": backend}) for own in series)]
            out.append(float(min(starts)) if starts else None)
        return out

    def query_many(self, exprs: Sequence[str], at: float) -> list[float | None]:
        at = int(at) // schema.STEP_SECONDS * schema.STEP_SECONDS
        backends = self.backends()
        cache: dict[tuple[str, int], dict[str, float]] = {}

        def totals(backend: str, when: int) -> dict[str, float]:
            key = (backend, when)
            if key not in cache:
                cache[key] = self.totals(backend, when)
            return cache[key]

        # A report asks the same selectors over eight windows: match each selector's labels once
        # (RE2 per series) and look each window's data up once, not once per query.
        matched_columns: dict = {}
        present: dict[tuple[str, int], bool] = {}

        def columns(selector, key: str) -> list[tuple[str, str]]:
            if key not in matched_columns:  # equal selectors (by text) share the match
                series = schema.series_columns(selector.metric) or {}
                matched_columns[key] = [(backend, column) for backend in backends
                                        for own_labels, column in series.items()
                                        if selector.label_matches({**self.labels, **dict(own_labels), "backend": backend})]
            return matched_columns[key]

        def has_steps(backend: str, window: int) -> bool:
            if (backend, window) not in present:
                present[backend, window] = self.has_steps(backend, at - window, at)
            return present[backend, window]

        results: list[float | None] = []
        for expr in exprs:
            query, key = _range_query(expr)
            total, matched = 0.0, False
            for backend, column in columns(query.selector, key):
                if has_steps(backend, query.window):
                    matched = True
                    total += totals(backend, at)[column] - totals(backend, at - query.window)[column]
            if not matched:
                results.append(None)
            else:
                results.append(total / query.window if query.function == "rate" else total)
        return results
