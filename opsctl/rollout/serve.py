"""The rollout inside `opsctl serve`: a thread that ticks the rollout controller while this replica
leads, under the leader's term (every state write and every traffic change carries it and is refused
once a newer term is recorded). A new leader reads the state document and goes on from the step
recorded there; a step its predecessor applied but did not record is found applied (same operation
id, the split already there) and is not changed twice.

With nothing to drive (no rollout document, or a finished one) the runner backs off: after such a
read it skips 1, then 2, 4, 8 and at most MAX_BACKOFF_TICKS - 1 ticks before reading again (at
most one read a minute at 5 s ticks, not twelve); a rollout started from a laptop is found within
MAX_BACKOFF_TICKS ticks, and from then on the document is read every tick. Losing the lead resets
the backoff, so a new leader reads at once."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from opsctl.errors import OpsctlError

log = logging.getLogger("opsctl.automation")
TICK_SECONDS = 5.0  # between ticks; a tick does at most one thing
MAX_BACKOFF_TICKS = 12  # with nothing to drive: one read in at most this many ticks


class RolloutRunner:
    def __init__(self, cfg, *, acting: Callable[[], bool], term: Callable[[], object], every: float = TICK_SECONDS,
                 clock=None):
        self.cfg, self.acting, self.term, self.every = cfg, acting, term, every
        self.clock = clock  # the wall clock unless given (a test's SimClock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="opsctl-rollout", daemon=True)
        self.ticks = 0  # ticks that did something (for tests and logs)
        self._controller = None
        self._backoff = 0  # ticks between reads while there is nothing to drive (0: every tick)
        self._skip = 0  # ticks still to skip before the next read

    def controller(self):
        if self._controller is None:
            from opsctl.clock import WallClock
            from opsctl.rollout.analyses import Evidence
            from opsctl.rollout.controller import RolloutController
            from opsctl.rollout.document import RolloutStore
            from opsctl.state import open_state_store
            from opsctl.traffic.service import TrafficService

            store = open_state_store(self.cfg)
            clock = self.clock or WallClock()
            self._controller = RolloutController(
                self.cfg, RolloutStore(store, term=self.term), TrafficService(self.cfg, clock=clock), clock=clock,
                evidence=lambda at, plan: Evidence(self.cfg, plan, at), term=self.term,
                progress=lambda text: log.info("%s", text))
        return self._controller

    def start(self) -> "RolloutRunner":
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def tick(self) -> str:
        if not self.acting() or self.term() is None:
            self._backoff = self._skip = 0
            return "not leading"
        if self._skip > 0:  # nothing to drive at the last read: no read this tick
            self._skip -= 1
            return "idle"
        controller = self.controller()
        what = controller.tick()
        if controller.nothing_to_drive:
            self._backoff = min(max(1, 2 * self._backoff), MAX_BACKOFF_TICKS)
            self._skip = self._backoff - 1
        else:
            self._backoff = self._skip = 0
        if what not in ("idle", "waiting", "held"):
            self.ticks += 1
        return what

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                while self.tick() not in ("idle", "waiting", "held", "not leading") and not self._stop.is_set():
                    pass  # several things due (an intent, then a measurement): done one after another
            except OpsctlError as exc:  # fenced, the store away, a guard: logged; the next tick re-reads
                log.warning("rollout tick: %s", str(exc).splitlines()[0][:300])
            except Exception:
                log.exception("rollout tick failed")


def start_in_serve(service) -> "RolloutRunner | None":
    """Called where serve starts its background tasks: only with shared state (a rollout in the
    cluster) or one replica; acts only while `service.acting()`, under `service.term`."""
    return RolloutRunner(service.cfg, acting=service.acting, term=service.term).start()
