"""Append-only audit log: one JSON object per line, every attempt (applied, refused, failed).

Each entry is appended with one write under an exclusive lock (`flock`) and fsynced before the call
returns, so concurrent opsctl processes never interleave lines and an acknowledged entry survives a
crash. A line torn by a crash mid-write is skipped by readers and fenced off by the next append.
Values under secret-looking keys are redacted: the log never holds credentials.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

_SECRET_WORDS = ("token", "password", "secret", "authorization", "api_key", "apikey", "routing_key", "credential")
REDACTED = "[redacted]"


def current_actor() -> str:
    """Who is acting: $OPSCTL_ACTOR (automation sets it), else user@host."""
    explicit = os.environ.get("OPSCTL_ACTOR", "").strip()
    if explicit:
        return explicit
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def timestamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def scrub(value: Any) -> Any:
    """Redact values under keys that name a secret, at any depth."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if any(w in str(k).lower() for w in _SECRET_WORDS) and v is not None else scrub(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


class AuditLog:
    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, entry: dict, *, now: float | None = None) -> dict:
        """Add `time`/`ts` when missing, redact, append one line and fsync. Returns what was written."""
        ts = time.time() if now is None else now
        record = {"time": timestamp(ts), "ts": round(ts, 3), **scrub(entry)}
        line = (json.dumps(record, sort_keys=False, default=str, separators=(",", ":")) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and self._last_byte() != b"\n":
                line = b"\n" + line  # fence off a line torn by a crash
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        return record

    def _last_byte(self) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1)

    def newest_first(self, chunk: int = 65536) -> Iterator[dict]:
        """Entries from the end of the file backwards, without reading what is not needed."""
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return
        with fh:
            fh.seek(0, os.SEEK_END)
            position = fh.tell()
            rest = b""
            while position > 0:
                size = min(chunk, position)
                position -= size
                fh.seek(position)
                data = fh.read(size) + rest
                lines = data.split(b"\n")
                rest = lines[0]
                for raw in reversed(lines[1:]):
                    entry = _parse(raw)
                    if entry is not None:
                        yield entry
            entry = _parse(rest)
            if entry is not None:
                yield entry

    def find(self, predicate: Callable[[dict], bool], *, since: float | None = None, limit: int | None = None) -> list[dict]:
        """Matching entries, newest first, down to `since`.

        Concurrent writers may append a few seconds out of order, so the scan stops only a minute
        past `since`.
        """
        found = []
        for entry in self.newest_first():
            if since is not None and entry.get("ts", 0) < since:
                if entry.get("ts", 0) < since - 60:
                    break
                continue
            if predicate(entry):
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
        return found


def _parse(raw: bytes) -> dict | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None  # a line torn by a crash
    return entry if isinstance(entry, dict) else None
