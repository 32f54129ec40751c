"""The embedded environment: simulated time, a private world under the run's directory.

Everything a drill touches lives in <state_dir>/drills/<run-id>/: its metric store (seeded with a
few days of baseline traffic), pager ledger, ticket ledger and records, the traffic split file and
the audit log. The user's own store, ledgers and split are never touched. Time is a SimClock: a
drill of an hour of simulated time runs in seconds.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.clock import SimClock
from opsctl.drills.env.base import DrillActors, with_drill_freeze

if TYPE_CHECKING:
    from opsctl.drills.simworld import SimWorld
    from opsctl.metrics.embedded import EmbeddedStore


def embedded_config(cfg, run_dir: Path):
    """The user's config pointed at the run's directory, with the embedded providers."""
    traffic = dataclasses.replace(cfg.traffic, actuator="file",
                                  file=dataclasses.replace(cfg.traffic.file, path="traffic/split.json"))
    tickets = dataclasses.replace(
        cfg.tickets, provider="local",
        vendors={name: dataclasses.replace(v, provider="local") for name, v in cfg.tickets.vendors.items()})
    capacity = cfg.capacity
    if capacity is not None and capacity.source != "static":
        # No cluster here: the simulated pods are as many as the Deployment may have.
        capacity = dataclasses.replace(capacity, source="static",
                                       replicas=capacity.replicas if capacity.replicas is not None else capacity.max_replicas)
    return dataclasses.replace(
        cfg, state_dir=str(Path(run_dir).resolve()), traffic=traffic, tickets=tickets, capacity=capacity,
        metrics=dataclasses.replace(cfg.metrics, source="embedded"),
        paging=dataclasses.replace(cfg.paging, provider="local"),
    )


class EmbeddedEnvironment(DrillActors):
    mode = "embedded"

    def __init__(self, user_cfg, scenario, run_id: str, run_dir: Path, *, sim_now: float | None = None):
        self.scenario = scenario
        self.run_id = run_id
        self.run_dir = Path(run_dir)
        self.tick = user_cfg.alerting.interval_seconds
        env = scenario.embedded
        self.start = env.start // self.tick * self.tick
        self.clock: SimClock = SimClock(self.start if sim_now is None else sim_now)
        horizon = self.start + scenario.max_duration + 3600
        self.cfg = with_drill_freeze(embedded_config(user_cfg, self.run_dir), scenario, self.start, horizon)
        self._replicas = self.cfg.capacity.replicas if self.cfg.capacity is not None else None  # all pods
        self.world: SimWorld | None = None
        self._store: EmbeddedStore | None = None
        self._pager = None
        self._traffic = None
        self._desks: dict = {}

    @property
    def store_path(self) -> Path:
        return self.run_dir / "metrics.sqlite"

    def prepare(self, progress: Callable[[str], None]) -> dict:
        from opsctl.drills.simworld import SimWorld, open_drill_store
        from opsctl.traffic.registry import open_actuator

        env = self.scenario.embedded
        stored = open_actuator(self.cfg).read()
        split = dict(stored.split.weights) if stored.split else {}
        self._store = open_drill_store(self.store_path, self.cfg.service_labels)
        backends = {name: b.kind for name, b in self.cfg.backends.items()}
        self.world = SimWorld(self._store, backends, start=self.start,
                              horizon=self.start + self.scenario.max_duration + 3600, peak_rps=env.peak_rps,
                              seed=env.seed, split=split)
        steps = self.world.seed_baseline(env.baseline)
        progress(f"seeded {self.store_path} with {env.baseline // 86400}d of baseline traffic"
                 f" ({steps:,} steps, peak {env.peak_rps:g} rps, seed {env.seed})")
        return {"store": str(self.store_path), "baseline_seconds": env.baseline, "baseline_steps": steps,
                "peak_rps": env.peak_rps, "seed": env.seed}

    def reopen(self) -> None:
        """For a cleanup: the store as the killed run left it (nothing is simulated any more)."""
        from opsctl.drills.simworld import open_drill_store

        if self.store_path.exists():
            self._store = open_drill_store(self.store_path, self.cfg.service_labels)

    def source(self):
        return self._store

    def vendor_ledger(self, vendor: str):
        return getattr(self.tickets(vendor), "channel", None)

    def injector(self, name: str):
        from opsctl.drills.faults.registry import injector

        return injector(name, self.cfg, self.run_id, self.world)

    def advance(self, to: float, should_stop: Callable[[], bool]) -> None:
        pace = self.scenario.embedded.pace
        now = self.clock.now()
        if pace and to > now:  # watch it unfold: `pace` simulated seconds per wall second
            wall_end = time.monotonic() + (to - now) / pace
            while not should_stop() and time.monotonic() < wall_end:
                time.sleep(min(0.05, wall_end - time.monotonic()))
            if should_stop():
                return
        if self.world is not None:
            self.world.advance(to)
        if to > now:
            self.clock.advance(to - now)
        self._follow_ready_replicas()

    def _follow_ready_replicas(self) -> None:
        """The capacity guard counts the pods that are ready now: after a GPU capacity loss the static
        replicas less the lost share (rounded down), all of them again once it ends (decisions/0312)."""
        cap = self.cfg.capacity
        if self.world is None or cap is None or self._replicas is None or cap.backend not in self.world.backends:
            return
        from opsctl.drills.simworld import ready_pods

        ready = ready_pods(self._replicas, self.world.ready_share(cap.backend, self.clock.now()))
        if ready != cap.replicas:
            self.cfg = dataclasses.replace(self.cfg, capacity=dataclasses.replace(cap, replicas=ready))
            self._traffic = None  # rebuilt from the config with the ready count (env/base.py traffic())

    def split_changed(self, split) -> None:
        if self.world is not None and split is not None:
            self.world.set_split(dict(split.weights))

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
