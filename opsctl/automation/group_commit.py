"""The group commit of the shared delivery log (delivery_store.py): deliveries recorded at once share
writes. A `Waiter` is one delivery's events for one piece; while a write of that piece is in flight
the others queue, and the next write records them all (one compare-and-swap for many deliveries).
"""

from __future__ import annotations

from opsctl.automation.idempotency import NewEvent

# Seconds at most that a write recording only alerts no policy matches waits while actionable work is
# in progress on this replica (an actionable admit, or the work queue holding an event: `acting`).
# On a busy process and API server those writes are what the trigger's own write, its episode path
# and its failover queue behind. The quiet deliveries are recorded on a lane of their own
# (server.py), so their wait never holds a thread an actionable delivery needs; they answer 202 once
# recorded, at worst this much later (in team mode, past it while the urgent work has still not
# acted, they are answered and written later: quiet_writes.py), and they ride along with an
# actionable write of their piece if one comes first.
HOLD_OFF = 1.0


class Waiter:
    """One delivery's events for one piece, waiting for the group commit that records them."""

    def __init__(self, events: list[NewEvent], now: float, claim: bool = False, hold: bool = True):
        self.events, self.now, self.claim = events, now, claim
        self.hold = hold  # False: held back already (quiet_writes.py), never held again
        self.added: list[NewEvent] = []
        self.refused = 0
        self.error: BaseException | None = None
        self.done = False
