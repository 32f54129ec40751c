"""Fixtures for the metrics tests, on top of tests/conftest.py: the CLI with a temp config, and the
embedded store's rows read straight from SQLite (not through the code under test)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Result, run_opsctl


@pytest.fixture
def cli(config_file: Path):
    """Run the real `opsctl --config <temp config> ARGS...` through its entry point, in-process."""

    def run(*args) -> Result:
        return run_opsctl("--config", str(config_file), *map(str, args))

    return run


@pytest.fixture
def store_path(config_file: Path) -> Path:
    return config_file.parent / "state" / "metrics.sqlite"


def parse_json(result: Result):
    return json.loads(result.stdout)


def _store_rows(path: Path) -> list[tuple]:
    """Every row of the embedded store (increments and running totals), in a stable order."""
    if not path.exists():
        return []
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT * FROM steps ORDER BY backend, ts").fetchall()
    finally:
        conn.close()


def _store_columns(path: Path, backend: str) -> dict[int, dict[str, float]]:
    """ts -> {column: increment} for one backend."""
    from opsctl.metrics import schema

    conn = sqlite3.connect(str(path))
    try:
        cols = ", ".join(schema.VALUE_COLUMNS)
        rows = conn.execute(f"SELECT ts, {cols} FROM steps WHERE backend = ? ORDER BY ts", (backend,)).fetchall()
    finally:
        conn.close()
    return {row[0]: dict(zip(schema.VALUE_COLUMNS, row[1:])) for row in rows}


@pytest.fixture
def store_rows():
    return _store_rows


@pytest.fixture
def store_columns():
    return _store_columns
