"""Gauges in the embedded store file: a table of its own, beside (not inside) the steps table.

Figures that are not the proxy's client-side counters (e.g. the consistency probe's exact-match
rate) are written here so they are kept with the rest of the embedded metrics. One row per gauge,
label set and instant; labels are stored as canonical JSON.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping


@dataclass(frozen=True)
class GaugeValue:
    name: str
    labels: dict[str, str]
    ts: int
    value: float


class GaugeStore:
    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        self.description = f"gauges in the embedded store {path}"

    @classmethod
    def open(cls, path: Path) -> "GaugeStore":
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS gauges (name TEXT NOT NULL, labels TEXT NOT NULL, ts INTEGER NOT NULL,"
            " value REAL NOT NULL, PRIMARY KEY (name, labels, ts)) WITHOUT ROWID"
        )
        return cls(conn, path)

    def close(self) -> None:
        self.conn.close()

    def write(self, samples: Iterable[tuple[str, Mapping[str, str], float]], ts: int) -> int:
        """Write every sample at instant `ts` (one transaction); a rewrite of the same instant replaces it."""
        rows = [(name, _canonical(labels), int(ts), float(value)) for name, labels, value in samples]
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany(
                "INSERT INTO gauges (name, labels, ts, value) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (name, labels, ts) DO UPDATE SET value = excluded.value",
                rows,
            )
        return len(rows)

    def latest(self, name: str) -> list[GaugeValue]:
        """The newest value of each label set of gauge `name`."""
        rows = self.conn.execute(
            "SELECT g.labels, g.ts, g.value FROM gauges g JOIN"
            " (SELECT labels, MAX(ts) AS ts FROM gauges WHERE name = ? GROUP BY labels) m"
            " ON g.labels = m.labels AND g.ts = m.ts WHERE g.name = ? ORDER BY g.labels",
            (name, name),
        ).fetchall()
        return [GaugeValue(name, json.loads(labels), ts, value) for labels, ts, value in rows]

    def names(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT name FROM gauges ORDER BY name")]


def _canonical(labels: Mapping[str, str]) -> str:
    return json.dumps({str(k): str(v) for k, v in labels.items()}, sort_keys=True, separators=(",", ":"))
