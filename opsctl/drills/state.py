"""A drill run's persisted state: <state_dir>/drills/<run-id>/state.json.

It is written atomically (statefile: temp file, fsync, rename) after every change a cleanup would
need: a fault injected or removed, the split changed, a page opened, a rollback done. A running
drill holds an exclusive lock on `running.lock` for its whole life; the kernel drops it when the
process dies, even on kill -9, so `opsctl drill cleanup` can tell an interrupted drill from a live
one and finish its rollbacks from this file.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import socket
import time
from pathlib import Path
from typing import Iterator

from opsctl.errors import ConflictError, NoDataError, UsageError
from opsctl.statefile import read_json, write_json_atomic

STATE_FILE = "state.json"
LOCK_FILE = "running.lock"
STATE_VERSION = 1
FINAL_PHASES = ("done",)
RUN_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z-[a-z0-9-]+-[0-9a-f]{4}$")


def new_run_id(scenario_name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", scenario_name.lower()).strip("-")[:40] or "drill"
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{slug}-{secrets.token_hex(2)}"


class RunState:
    """The state of one run, held as plain data (`data`) and saved with `save()`."""

    def __init__(self, run_dir: Path, data: dict):
        self.dir = Path(run_dir)
        self.data = data
        self._lock_fd: int | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, *, scenario, mode: str, config_path: str) -> "RunState":
        root = Path(root)
        for _ in range(5):
            run_id = new_run_id(scenario.name)
            run_dir = root / run_id
            try:
                run_dir.mkdir(parents=True)
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover - five random collisions in one second
            raise ConflictError(f"could not create a run directory under {root}")
        state = cls(run_dir, {
            "version": STATE_VERSION,
            "run_id": run_id,
            "mode": mode,
            "scenario": {"path": scenario.path, "name": scenario.name, "title": scenario.title,
                         "digest": scenario.digest},
            "config_path": config_path,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": time.time(),
            "finished_at": None,
            "phase": "preflight",
            "incident": f"DRILL-{run_id}",
            "sim": None,
            "faults": [],
            "split": {"original": None, "written": None},
            "pages": [],
            "tickets": [],
            "rollbacks": [],
            "outcome": None,
            "abort_reason": None,
            "timeline": [],
        })
        state.acquire()
        state.save()
        return state

    @classmethod
    def load(cls, run_dir: Path) -> "RunState":
        run_dir = Path(run_dir)
        data = read_json(run_dir / STATE_FILE, None)
        if data is None:
            raise NoDataError(f"{run_dir}: no drill state ({STATE_FILE}) here")
        if data.get("version") != STATE_VERSION:
            raise UsageError(f"{run_dir / STATE_FILE}: state version {data.get('version')!r} is not one this opsctl reads")
        return cls(run_dir, data)

    def save(self) -> None:
        write_json_atomic(self.dir / STATE_FILE, self.data)

    # -- the running lock -------------------------------------------------------------------------

    def acquire(self) -> None:
        """Hold the run's lock until the process exits (or `release`). ConflictError if another holds it."""
        fd = os.open(self.dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConflictError(
                f"drill {self.run_id} is still running (pid {self.data.get('pid')} on {self.data.get('host')})",
                hint="stop it with Ctrl-C (its rollbacks run on the way out), or wait for it to finish",
            ) from None
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def is_running(self) -> bool:
        """True when some process holds the run's lock (a drill in progress)."""
        if self._lock_fd is not None:
            return True
        path = self.dir / LOCK_FILE
        if not path.exists():
            return False
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    # -- accessors ------------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def mode(self) -> str:
        return self.data["mode"]

    @property
    def phase(self) -> str:
        return self.data["phase"]

    @property
    def finished(self) -> bool:
        return self.data["phase"] in FINAL_PHASES

    @property
    def incident(self) -> str:
        return self.data["incident"]

    def set_phase(self, phase: str) -> None:
        self.data["phase"] = phase
        self.save()

    def active_faults(self) -> list[dict]:
        return [f for f in self.data["faults"] if f.get("removed_at") is None]

    def open_pages(self) -> list[str]:
        return [p["dedup_key"] for p in self.data["pages"] if not p.get("resolved")]

    def report_path(self, ext: str) -> Path:
        return self.dir / f"report.{ext}"

    def summary(self) -> dict:
        d = self.data
        return {"run_id": d["run_id"], "scenario": d["scenario"]["name"], "title": d["scenario"]["title"],
                "mode": d["mode"], "phase": d["phase"], "outcome": d["outcome"],
                "running": self.is_running(), "abort_reason": d["abort_reason"],
                "started_at": d["started_at"], "dir": str(self.dir)}


def iter_runs(root: Path) -> Iterator[RunState]:
    root = Path(root)
    if not root.is_dir():
        return
    for run_dir in sorted(root.iterdir(), reverse=True):  # run ids start with the time: newest first
        if run_dir.is_dir() and RUN_ID.match(run_dir.name) and (run_dir / STATE_FILE).exists():
            try:
                yield RunState.load(run_dir)
            except (NoDataError, UsageError):
                continue


def find_run(root: Path, run_id: str | None) -> RunState:
    """A run by id (or a unique prefix of it), or the newest one for None / 'latest'."""
    runs = list(iter_runs(root))
    if not runs:
        raise NoDataError(f"no drill runs under {root}", hint="run one: opsctl drill run chaos/vendor-outage.yaml")
    if run_id in (None, "latest"):
        return runs[0]
    matches = [r for r in runs if r.run_id == run_id] or [r for r in runs if r.run_id.startswith(run_id)]
    if not matches:
        raise NoDataError(f"no drill run {run_id!r} under {root}", hint="`opsctl drill list --runs` lists them")
    if len(matches) > 1:
        raise UsageError(f"run id {run_id!r} is ambiguous: {', '.join(r.run_id for r in matches[:5])}")
    return matches[0]


def run_rows(root: Path) -> list[dict]:
    """`drill list --runs`: each run's summary (newest first), its start as RFC 3339, a run that
    stopped unfinished named interrupted."""
    from opsctl.clock import format_rfc3339

    rows = []
    for state in iter_runs(root):
        s = state.summary()
        s["started_at"] = format_rfc3339(s["started_at"])
        if not state.finished and not s["running"]:
            s["outcome"] = "interrupted (run `opsctl drill cleanup`)"
        rows.append(s)
    return rows
