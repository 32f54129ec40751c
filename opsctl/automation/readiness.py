"""`opsctl serve`'s readiness, as last checked by a thread of its own (/readyz never waits): `Readiness`."""

from __future__ import annotations

import threading
import time
from typing import Callable

READY_EVERY = 1.0  # seconds between background readiness checks
READY_STALE = 30.0  # a check that has not completed for this long makes the replica not ready


class Readiness:
    """The last known answer of `check()` (the service's readiness: started, shared state reachable,
    queue not full), refreshed by a thread of its own, so /readyz answers at once whatever the API
    server's latency. A check that has not completed for `stale` seconds counts as not ready."""

    def __init__(self, check: Callable[[], tuple[bool, str]], *, every: float = READY_EVERY,
                 stale: float = READY_STALE, clock: Callable[[], float] = time.monotonic):
        self.check, self.every, self.stale, self.clock = check, every, stale, clock
        self._lock = threading.Lock()
        self._result: tuple[bool, str] = (False, "starting")
        self._at: float | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="opsctl-readiness", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def refresh_soon(self) -> None:
        self._wake.set()

    def refresh(self) -> None:
        try:
            result = self.check()
        except Exception as exc:  # noqa: BLE001 - readiness reports it; the next round tries again
            result = (False, f"readiness check failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        with self._lock:
            self._result, self._at = result, self.clock()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            self.refresh()
            self._wake.wait(self.every)

    def current(self) -> tuple[bool, str, float | None]:
        """(ready, reason, seconds since the last completed check or None)."""
        with self._lock:
            (ok, why), at = self._result, self._at
        if at is None:
            return False, why, None
        age = self.clock() - at
        if age > self.stale:
            return False, f"the shared state check has not completed for {age:.0f}s (last: {why})", age
        return ok, why, age

    @property
    def reachable(self) -> float:
        ok, _why, _age = self.current()
        return 1.0 if ok else 0.0
