"""What every phase of a chain drill shares (runner.py runs them): the drill's fields, its
timeline and progress lines, Ctrl-C and the stop check, the waits between polls, the split its
actuator holds, and the limits the chain shortens a scenario to (plan.py shows them)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.drills.lifecycle import Aborted
from opsctl.drills.prepared import Prepared

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.drills.chain.bridge import WebhookRecorder
    from opsctl.drills.chain.exporter import ProxyExporter
    from opsctl.drills.chain.collector import Collector
    from opsctl.drills.chain.kubeapi import SimulatedDeployment
    from opsctl.drills.chain.pdsink import PagerDutySink
    from opsctl.drills.chain.setup import Shortened
    from opsctl.drills.report_burn import Budget, Prediction
    from opsctl.drills.state import RunState
    from opsctl.slo.model import SloDefinition

POLL = 1.0  # seconds between asking every component what happened
DEFAULT_TIMEOUT = 240  # seconds from the fault for every hop to happen
DEFAULT_HISTORY = 6 * 3600  # seconds of backfilled baseline: every page window (1h, 6h) has data
ACK_CAP = 20  # seconds: the simulated on-call's acknowledgement, at most (the scenario's, shortened)
PAUSE_CAP = 10  # seconds: a method step's pause before the first fault, at most (after it: whole)
SETTLE_GRACE = 20  # seconds after the latest fault's predicted page before the chain may settle
STEADY_TIMEOUT = 90  # seconds for Prometheus to scrape and evaluate the rules once


class _Stop(Aborted):
    """A stop condition, a signal or a steady state not met mid-chain: the drill aborts."""



class ChainProgress:
    """The fields of a chain drill and what every phase does with them; the phases are the
    classes above it (startup.py, polling.py, analysis.py), the lifecycle's World is runner.py."""

    exporter: Prepared[ProxyExporter] = Prepared("the drill's exporter is not started yet")
    sink: Prepared[PagerDutySink] = Prepared("the drill's PagerDuty endpoint is not started yet")
    state: Prepared[RunState] = Prepared("the drill's run state is not created yet")

    mode = "chain"

    def __init__(self, scenario, user_cfg, *, routing: Path | None, timeout: int | None = DEFAULT_TIMEOUT,
                 history: int = DEFAULT_HISTORY, progress: Callable[[str], None] | None = None):
        self.scenario = scenario
        self.user_cfg = user_cfg
        self.routing_path = Path(routing) if routing is not None else None
        self.timeout = timeout
        self.history = history
        self.progress = progress or (lambda line: None)
        self.timeline: list[dict] = []
        self.phase = "preflight"
        self.t0: float | None = None
        self.method_started: float | None = None  # the method's start: what the audit log holds since counts
        self.stop_reason: str | None = None
        self.processes: list = []
        self.servers: list = []
        # set as the drill reaches them (the properties below say when one is read before)
        self._exporter: ProxyExporter | None = None
        self._sink: PagerDutySink | None = None
        self.pods: SimulatedDeployment | None = None  # the simulated internal Deployment's API (setup)
        self._state: RunState | None = None
        self.collector: Collector | None = None  # made once the first fault is on
        self.checks: list = []  # the preflight checks that ran (a live chain drill's)
        self.facts: dict = {}
        self.rollbacks: list[dict] = []
        self.prediction: Prediction | None = None
        self.group_wait = 0.0  # the drill's Alertmanager routes' longest group_wait (0: not known)
        self.routing: dict | None = None  # the drill's Alertmanager config, once written (setup)
        self.serve_receivers: frozenset = frozenset()  # its receivers whose webhook is serve's
        self.attribution: list[dict] = []
        self.budget: Budget | None = None
        self.fault_records: list[dict] = []
        self.fault_pages: list[float | None] = []  # each fault's predicted page, s after the first (analysis.py)


    # set by the phases (run, _prepare, startup): read only after them
    slos: list[SloDefinition]
    dir: Path
    binaries: dict[str, str]
    routing_raw: dict
    cfg: Config
    cfg_path: Path
    urls: dict[str, str]
    shortened: Shortened
    bridge: WebhookRecorder

    # -- progress and signals --------------------------------------------------------------------

    def _say(self, kind: str, message: str, at: float | None = None) -> None:
        at = time.time() if at is None else at
        self.timeline.append({"at": at, "phase": self.phase, "kind": kind, "message": message})
        offset = "" if self.t0 is None else f" {at - self.t0:+7.1f}s"
        self.progress(f"[chain {time.strftime('%H:%M:%S', time.gmtime(at))}{offset}] {self.phase:<10} {kind:<12} {message}")
        if self._state is not None:
            self._state.data["timeline"] = self.timeline

    def _signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):
            if self.stop_reason is None:
                self.stop_reason = f"interrupted by {signal.Signals(signum).name}"

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for s, h in previous.items():
                signal.signal(s, h)
        return restore

    def _check_stop(self) -> None:
        if self.stop_reason:
            raise _Stop(self.stop_reason)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.state.set_phase(phase)


    def _routing(self) -> Path:
        if self.routing_path is None:  # a live chain drill routes through the user's own Alertmanager
            raise RuntimeError("a local chain drill needs an Alertmanager routing file")
        return self.routing_path

    def _split(self) -> dict[str, float]:
        from opsctl.traffic.registry import open_actuator

        stored = open_actuator(self.cfg).read()
        weights = dict(stored.split.weights) if stored.split else dict(self.cfg.traffic.default_split)
        return {b: float(weights.get(b, 0)) for b in self.cfg.backends}

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._check_stop()
            time.sleep(min(0.25, max(0.0, end - time.monotonic())))

