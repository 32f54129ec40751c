"""opsctl.quality.push.embedded: probe figures into the gauges table of the embedded store file."""

from __future__ import annotations

import json
import sqlite3

from opsctl.quality.push.base import Sample
from opsctl.quality.push.embedded import EmbeddedSink


def rows(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT name, labels, ts, value FROM gauges ORDER BY name, labels, ts").fetchall()
    finally:
        conn.close()


def test_samples_are_written_at_the_whole_second_and_a_second_push_at_that_second_replaces_them(tmp_path):
    path = tmp_path / "state" / "metrics.sqlite"  # the state dir need not exist yet
    sink = EmbeddedSink(path)
    assert sink.description == f"embedded store {path} (gauges table)"
    sink.push([Sample("opsctl_probe_exact_match_ratio", 0.5, {"reference": "golden", "backend": "internal"}),
               Sample("opsctl_probe_cases", 12)], at=1000.9)
    sink.push([Sample("opsctl_probe_cases", 13)], at=1000.2)  # same whole second: replaced
    sink.push([Sample("opsctl_probe_cases", 14)], at=1060)
    labels = json.dumps({"backend": "internal", "reference": "golden"}, separators=(",", ":"))
    assert rows(path) == [
        ("opsctl_probe_cases", "{}", 1000, 13.0),
        ("opsctl_probe_cases", "{}", 1060, 14.0),
        ("opsctl_probe_exact_match_ratio", labels, 1000, 0.5),
    ]


def test_the_gauges_sit_beside_the_metrics_of_an_existing_store(tmp_path):
    path = tmp_path / "metrics.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE steps (backend TEXT, ts INTEGER)")
    conn.execute("INSERT INTO steps VALUES ('internal', 10)")
    conn.commit()
    conn.close()
    EmbeddedSink(path).push([Sample("g", 1.5, {})], at=20)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT * FROM steps").fetchall() == [("internal", 10)]
    finally:
        conn.close()
    assert rows(path) == [("g", "{}", 20, 1.5)]
