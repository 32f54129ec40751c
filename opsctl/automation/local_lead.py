"""Which local `opsctl serve` acts on a state dir: the one holding `automation/serve.lock` (`LocalLead`).

Local state is one host's files, written by compare-and-swap (the incident, the split): two serves
sharing a state dir would both admit an alert and both act. The first to take the lock (`flock`,
released by the kernel when its process dies) acts; another one follows, answers a matching alert
503 so the sender resends, and takes the lock as soon as the holder is gone (tried every second).
The elector of team mode is leader.py; this one has no term (a local writer is never fenced).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path
from typing import Callable

log = logging.getLogger("opsctl.automation")

RETRY = 1.0  # seconds between a follower's tries of the lock


class LocalLead:
    def __init__(self, path: Path, *, on_change: Callable[[bool], None] | None = None, retry: float = RETRY):
        self.path = Path(path)
        self.on_change = on_change
        self.retry = retry
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.holder = ""

    @property
    def is_leader(self) -> bool:
        return self._fd is not None

    def _try(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            try:
                self.holder = self.path.read_text().strip()[:200]
            except OSError:
                self.holder = ""
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._fd = fd
        self.holder = f"pid {os.getpid()}"
        return True

    def start(self) -> None:
        """Take the lock now if it is free, else follow and keep trying in the background."""
        if self._try():
            if self.on_change is not None:
                self.on_change(True)
            return
        log.warning("another opsctl serve (%s) acts on this state dir: following until it is gone", self.holder or "?")
        self._thread = threading.Thread(target=self._follow, name="opsctl-local-lead", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.wait(self.retry):
            if self._try():
                log.warning("this opsctl serve acts on the state dir now")
                if self.on_change is not None:
                    self.on_change(True)
                return

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._fd is not None and release:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


__all__ = ["LocalLead"]
