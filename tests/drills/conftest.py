"""Drill test environment: the repository's default config with its state in a temp dir, helpers
to run drills through the real CLI and to read a run's report, state, ledgers and store."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.inprocess import invoke
from tests.conftest import REPO

CHAOS = REPO / "chaos"
SHIPPED = sorted(p.stem for p in CHAOS.glob("*.yaml"))
# Shipped scenarios whose honest expectations today's automation cannot meet yet, with the item that
# makes them pass: their tests are xfail(strict=True), so they show up green (XPASS fails) at merge.
AWAITING: dict[str, str] = {}


def shipped_params(names=None):
    """pytest params of the shipped scenarios (or `names`), those AWAITING an item xfail(strict=True)."""
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=AWAITING[n])) if n in AWAITING else n
            for n in (SHIPPED if names is None else names)]


class DrillEnv:
    """A working directory with a config like the embedded default (state under it)."""

    def __init__(self, root: Path, config_text: str | None = None):
        self.root = root
        self.state = root / ".opsctl"
        text = config_text or (REPO / "opsctl.yaml").read_text()
        text = text.replace("  dir: slos\n", f"  dir: {REPO / 'slos'}\n").replace(
            "  scenarios: chaos ", f"  scenarios: {CHAOS} ").replace("  dir: runbooks ", f"  dir: {REPO / 'runbooks'} ")
        self.config = root / "opsctl.yaml"
        self.config.write_text(text)

    def run(self, *args: str, env: dict | None = None):
        """`opsctl --config <root>/opsctl.yaml ARGS` in this process (tests/cli/inprocess.py), from root."""
        previous = os.getcwd()
        os.chdir(self.root)
        try:
            return invoke("--config", str(self.config), *args, env=env)
        finally:
            os.chdir(previous)

    def popen(self, *args: str) -> subprocess.Popen:
        """A drill in its own process: for what only a process shows (a signal mid-drill, a live run
        a test watches from outside, a process that dies)."""
        full_env = {k: v for k, v in os.environ.items() if k != "OPSCTL_CONFIG"}
        full_env["PYTHONPATH"] = str(REPO)
        return subprocess.Popen([sys.executable, "-m", "opsctl", "--config", str(self.config), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=self.root)

    def scenario(self, name: str, edit=None) -> Path:
        """A shipped scenario, optionally edited (a function of the parsed YAML), written under root."""
        data = yaml.safe_load((CHAOS / f"{name}.yaml").read_text())
        if edit is not None:
            edit(data)
        path = self.root / f"{name}-test.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def write_scenario(self, name: str, data: dict) -> Path:
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    # -- reading a run ------------------------------------------------------------------------------

    def runs(self) -> list[Path]:
        root = self.state / "drills"
        return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True) \
            if root.is_dir() else []

    def run_dir(self) -> Path:
        [run] = self.runs()
        return run

    def report(self, run: Path | None = None) -> dict:
        return json.loads(((run or self.run_dir()) / "report.json").read_text())

    def state_of(self, run: Path | None = None) -> dict:
        return json.loads(((run or self.run_dir()) / "state.json").read_text())

    def wait_state(self, predicate, timeout: float = 60.0, what: str = "state"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            runs = self.runs()
            if runs:
                try:
                    state = self.state_of(runs[0])
                except (FileNotFoundError, json.JSONDecodeError):
                    state = None
                if state is not None and predicate(state):
                    return state
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def ledger(run: Path) -> dict:
    return json.loads((run / "paging" / "ledger.json").read_text())


def tickets(run: Path) -> list[dict]:
    path = run / "tickets" / "ledger.json"
    return json.loads(path.read_text())["tickets"] if path.exists() else []


def split_file(run: Path) -> dict | None:
    path = run / "traffic" / "split.json"
    return json.loads(path.read_text()) if path.exists() else None


def audit(run: Path) -> list[dict]:
    path = run / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def store_rows(run: Path, backend: str, start: float, end: float) -> list[dict]:
    """Raw per-step counts from the drill's store, read with sqlite3 (not through opsctl)."""
    conn = sqlite3.connect(run / "metrics.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM steps WHERE backend = ? AND ts > ? AND ts <= ? ORDER BY ts",
                            (backend, int(start), int(end))).fetchall()
        return [dict(r) for r in rows]
    finally:
        conn.close()


@pytest.fixture
def drill_env(tmp_path) -> DrillEnv:
    return DrillEnv(tmp_path)
