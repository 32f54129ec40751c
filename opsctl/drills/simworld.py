"""The embedded drill's world: simulated client-side traffic, written into the drill's own store.

The store (<run dir>/metrics.sqlite, never the user's) first gets `baseline` seconds of history
before the drill starts, so every burn-rate window up to 3 days has data. From then on the world
writes steps only up to the simulated now, so whatever reads the store (the burn-rate alerts, the
capacity guard, the SLO probes) sees exactly the past, as it would in production.

What the traffic looks like after now depends on the world as it is now: the split (a failover
moves the vendor's share to the internal pods) and the active faults. The steps ahead come from one
`simulate()` call over the drill's whole span for the current split and faults, re-run only when one
of them changes (a handful of times per drill; milliseconds each). Because every call starts at
the same instant with the same seed, traffic noise is continuous across those changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from opsctl.metrics import schema

if TYPE_CHECKING:
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.metrics.simulator import Incident

STEP = schema.STEP_SECONDS


class SimWorld:
    def __init__(self, store: "EmbeddedStore", backends: Mapping[str, str], *, start: float, horizon: float,
                 peak_rps: float, seed: int, split: Mapping[str, int]):
        self.store = store
        self.backends = dict(backends)  # name -> kind (internal | vendor)
        self.start = float(start)
        self.horizon = float(horizon)
        self.peak_rps = peak_rps
        self.seed = seed
        self.split = self._shares(split)
        self.incidents: dict[str, "Incident"] = {}
        self.written = self.start
        self._plan = None
        self.simulations = 0  # how often the span was (re)simulated, for the report's cost figures

    def _shares(self, split: Mapping[str, int]) -> dict[str, float]:
        return {name: float(split.get(name, 0)) for name in self.backends}

    # -- history ----------------------------------------------------------------------------------

    def seed_baseline(self, seconds: int) -> int:
        """Write `seconds` of history ending at the drill's start; returns the number of steps."""
        from opsctl.metrics.simulator import simulate

        series = simulate(self.start - seconds, self.start, backends=self.backends, split=self.split,
                          peak_rps=self.peak_rps, seed=self.seed)
        for name, s in series.items():
            self.store.append_steps(name, s.timestamps, s.columns)
        return sum(len(s) for s in series.values())

    # -- changes of the world -------------------------------------------------------------------

    def set_split(self, split: Mapping[str, int]) -> bool:
        """The grammar service routes by `split` from now on. True when that changes anything."""
        shares = self._shares(split)
        if shares == self.split:
            return False
        self.split = shares
        self._plan = None
        return True

    def add_incident(self, key: str, incident: "Incident") -> None:
        self.incidents[key] = incident
        self._plan = None

    def end_incident(self, key: str, at: float) -> None:
        """The fault stops at `at` (a rollback); steps after it are drawn without it."""
        from dataclasses import replace

        incident = self.incidents.get(key)
        if incident is None:
            return
        self.incidents[key] = replace(incident, end=max(incident.start, min(incident.end, float(at))))
        self._plan = None

    def ready_share(self, backend: str, at: float) -> float:
        """The share of `backend`'s pods still ready at `at` (`ready_share` below)."""
        return ready_share(self.incidents.values(), backend, at)

    # -- time -------------------------------------------------------------------------------------

    def advance(self, to: float) -> int:
        """Write the steps ending in (written, to]; returns how many steps were written."""
        if to <= self.written:
            return 0
        if to > self.horizon:
            self.horizon = to + 3600
            self._plan = None
        plan = self._simulated()
        count = 0
        for name, series in plan.items():
            ts = series.timestamps
            mask = (ts > self.written) & (ts <= to)
            if not mask.any():
                continue
            self.store.append_steps(name, ts[mask], {c: series.columns[c][mask] for c in schema.VALUE_COLUMNS})
            count += int(mask.sum())
        self.written = float(to)
        return count

    def _simulated(self):
        if self._plan is None:
            from opsctl.metrics.simulator import simulate

            incidents = [i for i in self.incidents.values() if i.end > i.start]
            self._plan = simulate(self.start, self.horizon, backends=self.backends, split=self.split,
                                  peak_rps=self.peak_rps, seed=self.seed, incidents=incidents)
            self.simulations += 1
        return self._plan


def ready_share(incidents: Iterable["Incident"], backend: str, at: float) -> float:
    """The share of `backend`'s pods still ready at `at`: each GPU capacity loss acting then (its
    waves and end, Incident.active_at) takes its `rate` of them. The one rule of both drill worlds:
    the embedded capacity follows it (decisions/0312), the chain's loopback Deployment serves it
    (decisions/0355)."""
    share = 1.0
    for incident in incidents:
        if incident.backend == backend and incident.kind == "gpu-capacity-loss" and incident.active_at(at):
            share *= 1.0 - float(getattr(incident, "rate", 0.0))
    return share


def ready_pods(replicas: int, share: float) -> int:
    """The pods ready of `replicas` when `share` of them are: rounded down (a pod is ready or not)."""
    return int(replicas * share + 1e-9)


def open_drill_store(path: Path, labels: Mapping[str, str] | None = None) -> "EmbeddedStore":
    """`labels`: the service's labels its series carry (Config.service_labels)."""
    from opsctl.metrics.embedded import EmbeddedStore

    return EmbeddedStore.open(Path(path), create=True, labels=labels)
