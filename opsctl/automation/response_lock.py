"""One response (a policy and its target) acted on by one thread of one process at a time.

Within a process: a re-entrant lock per policy and target. In local mode several `opsctl serve`
processes on one host may share one state directory with no leader to choose between them (a
restart overlapping the old process, an Alertmanager retry landing on a second one), so there the
lock is also an exclusive `flock` on a file per policy and target: a process that takes an alert
of a response another process is failing over waits for that failover, then finds it done, instead
of "resuming" a failover whose owner is still making it (the failover's operation id keeps the split
right either way; this keeps the second page, note and attempt away). A dead process's `flock` goes
with it; a process stopped while holding one is waited for at most `WAIT` seconds, then taken as
gone. Team mode passes no directory: only the leader acts there, every write fenced by its term."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)

WAIT = 60.0  # at most this long for another process's hold (an action's own time bound is shorter)
POLL = 0.05


class _Hold:
    """The lock of one response in this process; the file lock taken by its outermost holder."""

    def __init__(self, path: Path | None) -> None:
        self.lock = threading.RLock()
        self.path = path
        self.depth = 0
        self.fd: int | None = None


class ResponseLocks:
    def __init__(self, directory: Path | None = None, *, wait: float = WAIT) -> None:
        self.directory = directory
        self.wait = wait
        self._holds: dict[tuple[str, str], _Hold] = {}
        self._guard = threading.Lock()

    def _hold(self, policy: str, target: str) -> _Hold:
        with self._guard:
            hold = self._holds.get((policy, target))
            if hold is None:
                path = None
                if self.directory is not None:
                    digest = hashlib.sha256(f"{policy}\0{target}".encode()).hexdigest()[:16]
                    path = self.directory / f"response-{digest}.lock"
                hold = self._holds[(policy, target)] = _Hold(path)
            return hold

    @contextlib.contextmanager
    def hold(self, policy: str, target: str) -> Iterator[None]:
        hold = self._hold(policy, target)
        with hold.lock:
            if hold.depth == 0 and hold.path is not None:
                hold.fd = self._file_lock(hold.path, f"{policy} on {target}")
            hold.depth += 1
            try:
                yield
            finally:
                hold.depth -= 1
                if hold.depth == 0 and hold.fd is not None:
                    fcntl.flock(hold.fd, fcntl.LOCK_UN)
                    os.close(hold.fd)
                    hold.fd = None

    def _file_lock(self, path: Path, what: str) -> int | None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        for _ in range(max(1, int(self.wait / POLL))):  # bounded: a stopped holder is not waited for forever
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                time.sleep(POLL)
        log.warning("the response of %s is held by another process past %g s: acting without its lock", what,
                    self.wait)
        os.close(fd)
        return None


__all__ = ["ResponseLocks"]
