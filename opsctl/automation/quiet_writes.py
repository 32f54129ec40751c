"""Quiet deliveries held back while an urgent event acts (team mode, issue 22 items 3 and 9).

A delivery no policy matches (quiet: recorded for dedupe and the record, never acted on) waits at
most `hold_off` (group_commit.HOLD_OFF) for the urgent work of this replica to end, as it always
did; at full speed the trigger has acted by then and the quiet write goes as before. When the urgent
work has not ended by then (a slow API server: at 5 s a call the trigger's admit alone outlasts the
second), the delivery is answered 202 and its events are kept here (the next ones, while some are
held and the work goes on, at once), and written when

    - no urgent work is in progress here any more (every actionable event queued or in hand has
      taken its first action, e.g. its failover is written, or ended), or
    - `bound` seconds (HOLD_BOUND) passed since it was held, whatever goes on, or
    - the service stops (written before the Lease is given up).

so the trigger's claim, episode and failover do not share the API server with them, nor meet them
in the compare-and-swap of a delivery piece (a quiet write of the trigger's piece in flight made
the worker's claim a 409, a re-read and a second write: 15 s at 5 s a call). Nothing is lost:
what was held is written, all of a piece's share in one write (delivery_store.admit_held), the
pieces in parallel; a write that fails (the API server away, a piece full) is tried again every
RETRY seconds. `waiting()` (`/metrics`: opsctl_serve_quiet_held) counts the deliveries answered
and not recorded yet. A quiet delivery repeated while held is held again and recorded once (the
write skips keys already recorded).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from opsctl.automation.delivery_pieces import SHARDS, piece_of
from opsctl.automation.group_commit import HOLD_OFF
from opsctl.automation.idempotency import NewEvent

if TYPE_CHECKING:
    from opsctl.automation.delivery_store import SharedDeliveryLog
    from opsctl.automation.metrics import ServeMetrics

log = logging.getLogger("opsctl.automation")

HOLD_BOUND = 30.0  # seconds a held quiet delivery waits at most for the urgent work to end
RETRY = 1.0  # seconds between tries of a held write that failed


@dataclass
class _Held:
    events: list[NewEvent]
    received_at: float
    since: float  # monotonic: when it was held
    not_before: float = 0.0  # monotonic: a failed write is tried again from then


class QuietWrites:
    """Quiet deliveries held back while `urgent()` (this replica's actionable work that has not
    taken its first action yet); written by a thread of its own once it is not, or after `bound`."""

    def __init__(self, deliveries: "SharedDeliveryLog", urgent: Callable[[], bool], *,
                 hold_off: float = HOLD_OFF, bound: float = HOLD_BOUND,
                 recorded: Callable[[int], None] = lambda new: None):
        self.deliveries = deliveries
        self.urgent = urgent
        self.hold_off = hold_off
        self.bound = bound
        self.recorded = recorded  # told how many new events each write recorded (events_total no_policy)
        self._held: list[_Held] = []
        self._writing = 0  # deliveries taken from _held, their write not answered yet
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(SHARDS, thread_name_prefix="opsctl-quiet-write")

    # -- the recorders' side --------------------------------------------------------------------

    def hold(self, events: list[NewEvent], received_at: float) -> bool:
        """A delivery of only quiet events: wait up to hold_off while urgent work is in progress
        here. True: it is held (answer 202 now; it is written later); False: record it now."""
        deadline = time.monotonic() + self.hold_off
        with self._cond:
            while not self._stopping and self.urgent():
                # Deliveries held already: the urgent work outlasted hold_off before, so this one is
                # held at once (its recorder thread is not kept for another hold_off).
                left = deadline - time.monotonic() if not self._held else 0
                if left <= 0:
                    self._held.append(_Held(list(events), received_at, time.monotonic()))
                    self._start()
                    self._cond.notify_all()
                    return True
                self._cond.wait(min(left, 0.05))
        return False

    def nudge(self) -> None:
        """Urgent work took its first action or ended here: look again at once."""
        with self._cond:
            self._cond.notify_all()

    def waiting(self) -> int:
        """Deliveries answered 202 and held back, not recorded yet."""
        with self._cond:
            return len(self._held) + self._writing

    def watch(self, metrics: "ServeMetrics") -> None:
        """Show how many are held on /metrics."""
        metrics.watch("opsctl_serve_quiet_held", "Deliveries no policy matches, answered and held back"
                      " while an urgent event acts here, not recorded yet.", self.waiting)

    # -- lifecycle --------------------------------------------------------------------------------

    def _start(self) -> None:  # under self._cond
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="opsctl-quiet", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is held now (bounded by `timeout`), then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            self._pool.shutdown(wait=False)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    if self._stopping or not self.urgent():
                        due = [h for h in self._held if h.not_before <= now or self._stopping]
                    else:
                        due = [h for h in self._held if h.since + self.bound <= now and h.not_before <= now]
                    if due or (self._stopping and not self._held):
                        break
                    self._cond.wait(0.25)
                if not due:
                    return  # stopping, nothing held
                self._held = [h for h in self._held if h not in due]
                self._writing += len(due)
            failed = self._write(due)
            with self._cond:
                self._writing -= len(due)
                retry_at = time.monotonic() + RETRY
                for h in failed:
                    h.not_before = retry_at
                self._held = failed + self._held
                if self._stopping and failed:
                    log.warning("stopping: %d quiet deliveries held back could not be recorded", len(failed))
                    self._held = []
                    return

    def _write(self, due: list[_Held]) -> list[_Held]:
        """Write the held deliveries, each piece's share in one write, the pieces in parallel; the
        deliveries a write failed for are returned (tried again)."""
        by_piece: dict[int, list[tuple[_Held, list[NewEvent]]]] = {}
        for h in due:
            parts: dict[int, list[NewEvent]] = {}
            for ev in h.events:
                parts.setdefault(piece_of(ev.key), []).append(ev)
            for index, evs in parts.items():
                by_piece.setdefault(index, []).append((h, evs))

        def write(index: int) -> list[_Held]:
            items = by_piece[index]
            try:
                new, refused = self.deliveries.admit_held(index, [(evs, h.received_at) for h, evs in items])
            except Exception as exc:  # the API server away, a write that gave up: tried again
                log.warning("quiet deliveries held back: %s: %s (tried again)", type(exc).__name__,
                            str(exc).splitlines()[0][:200] if str(exc) else "")
                return [h for h, _ in items]
            if new:
                self.recorded(len(new))
            return [h for h, _ in items] if refused else []

        failed: dict[int, _Held] = {}
        for lost in self._pool.map(write, sorted(by_piece)):
            for h in lost:
                failed[id(h)] = h
        # A delivery whose share of one piece failed is tried again whole: what was recorded is skipped.
        return list(failed.values())


__all__ = ["HOLD_BOUND", "QuietWrites"]
