"""The live environment: the configured Prometheus, pager, ticket channel and actuator, wall-clock time.

Faults are real (an Istio fault on a backend's route, or the internal Deployment scaled down) and
only in the namespaces listed in drills.live.fault_namespaces. Pages, tickets and audit entries are
the real ones, each marked as a drill.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from opsctl.clock import WallClock
from opsctl.drills.env.base import DrillActors, with_drill_freeze

SLEEP_SLICE = 0.25  # seconds: how promptly a stop request (Ctrl-C) is noticed while waiting


class LiveEnvironment(DrillActors):
    mode = "live"

    def __init__(self, user_cfg, scenario, run_id: str, run_dir: Path):
        self.scenario = scenario
        self.run_id = run_id
        self.run_dir = Path(run_dir)
        self.clock: WallClock = WallClock()
        self.tick = scenario.live.poll_interval
        now = self.clock.now()
        self.cfg = with_drill_freeze(user_cfg, scenario, now, now + scenario.max_duration + 3600)
        self.world = None
        self._source = None
        self._pager = None
        self._traffic = None
        self._desks: dict = {}

    def prepare(self, progress: Callable[[str], None]) -> dict:
        source = self.source()
        progress(f"live: metrics from {source.description}; pager {self.cfg.paging.provider};"
                 f" actuator {self.cfg.traffic.actuator}")
        return {"source": source.description, "pager": self.cfg.paging.provider,
                "actuator": self.cfg.traffic.actuator}

    def reopen(self) -> None:
        pass

    def source(self):
        if self._source is None:
            from opsctl.metrics.base import open_source

            source = open_source(self.cfg)
            source.check()
            self._source = source
        return self._source

    def vendor_ledger(self, vendor: str):
        channel = getattr(self.tickets(vendor), "channel", None)
        return channel if getattr(channel, "name", None) == "local" else None

    def injector(self, name: str):
        from opsctl.drills.faults.registry import injector

        return injector(name, self.cfg, self.run_id)

    def advance(self, to: float, should_stop: Callable[[], bool]) -> None:
        while not should_stop():
            left = to - self.clock.now()
            if left <= 0:
                return
            time.sleep(min(SLEEP_SLICE, left))

    def split_changed(self, split) -> None:
        pass  # the real grammar service reads the split itself

    def close(self) -> None:
        pass
