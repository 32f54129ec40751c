"""A bounded work queue with a few worker threads, so a webhook is answered before anything is done.

The server answers a delivery as soon as its events are recorded and queued (202), well inside
the 5 seconds senders wait; workers act afterwards. When the queue cannot take all of a delivery's
events, `offer` takes none of them and the server answers 503, so the sender retries later (both
Alertmanager and PagerDuty retry on 5xx).

Items carry a partition (the backend an alert is about): one partition always goes to the same
worker, so events about one backend are handled in arrival order, while another backend's events
proceed in parallel.
"""

from __future__ import annotations

import collections
import logging
import threading
import zlib
from typing import Callable

log = logging.getLogger("opsctl.automation")


class WorkQueue:
    def __init__(self, capacity: int, workers: int, handle: Callable[[str], None], *, name: str = "opsctl-worker"):
        if capacity < 1 or workers < 1:
            raise ValueError("capacity and workers must be at least 1")
        self.capacity = capacity
        self.handle = handle
        self._lock = threading.Lock()
        self._ready = [threading.Condition(self._lock) for _ in range(workers)]
        self._queues: list[collections.deque[str]] = [collections.deque() for _ in range(workers)]
        self._queued: set[str] = set()
        self._busy = 0
        self._stopping = False
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(workers)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Finish what is queued (bounded by `timeout`), then stop the workers."""
        with self._lock:
            self._stopping = True
            for cond in self._ready:
                cond.notify_all()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout)

    @property
    def depth(self) -> int:
        with self._lock:
            return len(self._queued)

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def room(self) -> int:
        with self._lock:
            return self.capacity - len(self._queued)

    def offer(self, items: list[tuple[str, str]]) -> bool:
        """Queue (partition, key) items, all or none. Keys already queued are not queued twice."""
        with self._lock:
            if self._stopping:
                return False
            fresh = [(p, k) for p, k in dict((k, (p, k)) for p, k in items).values() if k not in self._queued]
            if len(self._queued) + len(fresh) > self.capacity:
                return False
            for partition, key in fresh:
                i = zlib.crc32(partition.encode()) % len(self._queues)
                self._queues[i].append(key)
                self._queued.add(key)
                self._ready[i].notify()
            return True

    def _run(self, i: int) -> None:
        queue, ready = self._queues[i], self._ready[i]
        while True:
            with self._lock:
                while not queue and not self._stopping:
                    ready.wait()
                if not queue:
                    return  # stopping and drained
                key = queue.popleft()
                self._busy += 1
            try:
                self.handle(key)
            except Exception:  # a worker never dies of one bad event
                log.exception("worker: handling %s failed", key[:12])
            finally:
                with self._lock:
                    self._busy -= 1
                    self._queued.discard(key)
