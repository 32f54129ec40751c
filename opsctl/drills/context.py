"""What one drill run's parts share: its inputs (the scenario, the config and its SLOs, the
environment with its clock, the run state) and its progress (the timeline, the event queue on
that clock, a stop request).

The engine (engine.py) creates one `DrillRun` and hands it to each part: preflight and steady state
(preflight.py), the run loop and method (loop.py), the simulated responders (responders.py), and
observation and judgement (observe.py). The parts never import one another: the engine wires them.
What a phase finds is not kept here: each returns it as a typed result (lifecycle.py: `Facts`,
`Steady`, `Signals`, `Judgement`, `Rollback`), which the lifecycle hands on and the report reads.
The method's observations live with the part that makes them (`observe.Observer`).
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import TYPE_CHECKING, Callable

from opsctl.drills.lifecycle import Aborted, Refused  # noqa: F401 (their home is the lifecycle)
from opsctl.drills.prepared import Prepared
from opsctl.drills.scenario import Scenario, resolve_slo
from opsctl.drills.text import offset_text

if TYPE_CHECKING:
    from opsctl.drills.env.base import DrillEnvironment
    from opsctl.drills.state import RunState


class DrillRun:
    env: Prepared[DrillEnvironment] = Prepared("the drill's environment is not open yet")
    state: Prepared[RunState] = Prepared("the drill's run state is not created yet")

    def __init__(self, scenario: Scenario, user_cfg, *, live: bool = False,
                 progress: Callable[[str], None] | None = None):
        self.scenario = scenario
        self.user_cfg = user_cfg
        self.mode = "live" if live else "embedded"
        self.progress = progress or (lambda line: None)
        self.stop_reason: str | None = None  # set by a signal handler; the loop turns it into Aborted
        self.late_signals: list[str] = []
        self.phase = "preflight"
        self.timeline: list[dict] = []
        self.t0: float | None = None  # the first fault's onset (the method's start without one): offsets count from it
        self.queue: list = []
        self._seq = itertools.count()
        self._env: DrillEnvironment | None = None  # both set by the engine before any part runs
        self._state: RunState | None = None
        self.slos: list = []
        self.page_key: str | None = None

    @property
    def env_open(self) -> bool:
        return self._env is not None

    # -- time and the event queue ---------------------------------------------------------------

    def now(self) -> float:
        return self.env.clock.now()

    def schedule(self, at: float, label: str, action: Callable[[], None]) -> None:
        heapq.heappush(self.queue, (at, next(self._seq), label, action))

    def should_stop(self) -> bool:
        return self.stop_reason is not None

    def check_stop_requested(self) -> None:
        if self.stop_reason is not None:
            raise Aborted(self.stop_reason)

    def mark_t0(self, at: float) -> bool:
        """Deadlines count from here: the first injected fault, or the method's start without one.
        True when this call set it."""
        if self.t0 is not None:
            return False
        self.t0 = at
        self.state.data["t0"] = at
        return True

    # -- the timeline and the records -------------------------------------------------------------

    def say(self, kind: str, message: str) -> None:
        at = self.now() if self._env is not None else time.time()
        self.timeline.append({"at": at, "phase": self.phase, "kind": kind, "message": message})
        self.progress(self.line(at, kind, message))
        if self._state is not None:
            self._state.data["timeline"] = self.timeline
            if self.mode == "embedded" and self._env is not None:
                self._state.data["sim"] = {"start": getattr(self._env, "start"), "now": at}  # the embedded one's own

    def line(self, at: float, kind: str, message: str) -> str:
        clock = time.strftime("%H:%M:%S", time.gmtime(at))
        offset = "" if self.t0 is None else f" {offset_text(at - self.t0)}"
        label = "sim" if self.mode == "embedded" else "live"
        return f"[{label} {clock}{offset}] {self.phase:<12} {kind:<10} {message}"

    def audit(self, event: str, **fields) -> None:
        """The audit log is the record of everything that changed: drills included, marked as such."""
        from opsctl.drills.rollback import audit_drill

        audit_drill(self.env.cfg, self.state, event, self.now(), **fields)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.state.set_phase(phase)

    def slo_name(self, name: str) -> str:
        return resolve_slo(name, [s.name for s in self.slos], self.user_cfg.service) or name

    def save_split(self, split) -> None:
        """The split the drill wrote: rollbacks restore the original over it."""
        self.state.data["split"]["written"] = split.to_dict(list(self.env.cfg.backends))
        self.state.save()
        self.env.split_changed(split)

