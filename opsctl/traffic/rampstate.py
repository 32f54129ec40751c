"""A ramp's persisted state and the one-ramp-at-a-time lock (light: `traffic status` reads them).

The state file `<state_dir>/traffic/ramp.json` is written atomically. The lock `ramp.lock` is held
with flock for the ramp's lifetime, so the kernel releases it when the process dies, and names the
holder's pid and host; `running_ramp()` also checks that pid's liveness on this host.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opsctl.errors import ConflictError
from opsctl.statefile import read_json, write_json_atomic
from opsctl.traffic.split import Split

if TYPE_CHECKING:
    from opsctl.config import Config


def state_path(cfg: "Config") -> Path:
    return cfg.state_path / "traffic" / "ramp.json"


def lock_path(cfg: "Config") -> Path:
    return cfg.state_path / "traffic" / "ramp.lock"


# ---------------------------------------------------------------------------------------------
# The one-ramp-at-a-time lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RampLock:
    """flock on ramp.lock for the ramp's lifetime; the file names the holder."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> "RampLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = holder_info(self.path)
            who = f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')}" if holder else "another process"
            raise ConflictError(
                f"another ramp is running ({who})",
                hint="wait for it to finish, or stop it (Ctrl-C or kill PID) and then run"
                     " `opsctl traffic ramp --resume` or `--abort`",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode())
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing releases the flock
            self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def holder_info(path: Path) -> dict | None:
    try:
        text = path.read_text()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def running_ramp(cfg: "Config") -> dict | None:
    """The live ramp's lock info, or None. A held flock whose holder is dead on this host is not live."""
    path = lock_path(cfg)
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            info = holder_info(path) or {}
            if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int) and not _alive(info["pid"]):
                return None
            return info or {"pid": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# State


@dataclass
class RampState:
    data: dict
    path: Path

    @classmethod
    def load(cls, cfg: "Config") -> "RampState | None":
        path = state_path(cfg)
        data = read_json(path, None)
        return None if data is None else cls(data, path)

    def save(self) -> None:
        self.data["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_json_atomic(self.path, self.data)

    def split(self, key: str, backends) -> Split:
        return Split.from_dict(self.data[key], backends, f"{self.path} {key}")

    def steps(self, backends) -> list[Split]:
        return [Split.from_dict(s, backends, f"{self.path} step {i + 1}") for i, s in enumerate(self.data["steps"])]

    @property
    def status(self) -> str:
        return self.data.get("status", "running")

    def summary(self) -> dict:
        keys = ("id", "action", "status", "done", "pending", "interval", "step", "incident", "reason", "actor",
                "started_at", "updated_at", "message", "pid", "host")
        out = {k: self.data.get(k) for k in keys}
        out["total"] = len(self.data.get("steps", []))
        out["start"], out["target"] = self.data.get("start"), self.data.get("target")
        return out
