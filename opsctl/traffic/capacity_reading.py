"""What a capacity check saw: the internal backend's replicas against the traffic
(`CapacityReading`), a vendor's provisioned throughput (`VendorReading`) and what `ensure()` did
(`EnsureResult`). The arithmetic of shares lives here; reading and scaling in opsctl/traffic/capacity.py.
"""

from __future__ import annotations

import math
from typing import Any


class _Record:
    """Equality and repr over `__slots__`. The readings below are plain classes, not @dataclass:
    `traffic status` imports this module, and generating three dataclasses' methods was its largest
    opsctl import (#26 item 6)."""

    __slots__: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable records: compare, don't hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


class VendorReading(_Record):
    """A vendor endpoint's provisioned throughput against the service's current traffic."""

    __slots__ = ("backend", "unit", "provisioned", "headroom", "total", "where")

    def __init__(self, backend: str, unit: str, provisioned: float | None, headroom: float, total: float | None,
                 where: str):
        self.backend = backend
        self.unit = unit  # requests | tokens (per second)
        self.provisioned = provisioned  # None: its query had no data
        self.headroom = headroom
        self.total = total  # the whole service's current rate in `unit`; None: no data
        self.where = where  # "configured" or the query

    def needed(self, share: int) -> float | None:
        return None if self.total is None else self.total * share / 100 * (1 + self.headroom)

    def max_share(self) -> int | None:
        if self.total is None or self.provisioned is None:
            return None
        if self.total <= 0:
            return 100
        fits = self.provisioned / (self.total * (1 + self.headroom)) * 100
        return max(0, min(100, math.floor(fits + 1e-9)))

    def summary(self, share: int) -> str:
        unit = "requests/s" if self.unit == "requests" else "tokens/s"
        if self.provisioned is None or self.total is None:
            return f"{self.backend}: provisioned throughput or current {unit} unknown (no data)"
        return (f"{self.backend} is provisioned for {self.provisioned:g} {unit} ({self.where}); {share}% of"
                f" {self.total:.1f} {unit} with {self.headroom:.0%} headroom needs {self.needed(share):.1f}")

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "unit": self.unit, "provisioned": self.provisioned,
                "headroom": self.headroom, "current": self.total, "where": self.where,
                "max_share": self.max_share()}


class CapacityReading(_Record):
    __slots__ = ("backend", "ready", "desired", "max_replicas", "rps_per_replica", "headroom", "total_rps",
                 "backend_rps", "where")

    def __init__(self, backend: str, ready: int, desired: int, max_replicas: int, rps_per_replica: float,
                 headroom: float, total_rps: float | None, backend_rps: float | None, where: str):
        self.backend = backend
        self.ready = ready
        self.desired = desired
        self.max_replicas = max_replicas
        self.rps_per_replica = rps_per_replica
        self.headroom = headroom
        self.total_rps = total_rps  # None: no data
        self.backend_rps = backend_rps
        self.where = where  # "Deployment llm/vllm" or "static"

    @property
    def capacity_rps(self) -> float:
        return self.ready * self.rps_per_replica

    def needed_rps(self, share: int) -> float | None:
        if self.total_rps is None:
            return None
        return self.total_rps * share / 100 * (1 + self.headroom)

    def replicas_for(self, share: int) -> int | None:
        needed = self.needed_rps(share)
        return None if needed is None else math.ceil(needed / self.rps_per_replica - 1e-9)

    def max_share(self, ready: int | None = None) -> int | None:
        """The largest whole share of current traffic `ready` replicas carry with headroom."""
        if self.total_rps is None:
            return None
        ready = self.ready if ready is None else ready
        if self.total_rps <= 0:
            return 100
        fits = ready * self.rps_per_replica / (self.total_rps * (1 + self.headroom)) * 100
        return max(0, min(100, math.floor(fits + 1e-9)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "where": self.where,
            "ready_replicas": self.ready,
            "desired_replicas": self.desired,
            "max_replicas": self.max_replicas,
            "rps_per_replica": self.rps_per_replica,
            "headroom": self.headroom,
            "capacity_rps": self.capacity_rps,
            "current_rps": self.total_rps,
            "backend_rps": self.backend_rps,
            "max_share": self.max_share(),
            "max_share_at_max_replicas": self.max_share(self.max_replicas),
        }


class EnsureResult(_Record):
    __slots__ = ("share", "fits", "reading", "scaled_from", "scaled_to", "waited", "timed_out", "notes")

    def __init__(self, share: int, fits: int | None, reading: CapacityReading, scaled_from: int | None = None,
                 scaled_to: int | None = None, waited: float = 0.0, timed_out: bool = False,
                 notes: list[str] | None = None):
        self.share = share  # what was asked for
        self.fits = fits  # the share the ready replicas carry (None: no data)
        self.reading = reading
        self.scaled_from = scaled_from
        self.scaled_to = scaled_to
        self.waited = waited
        self.timed_out = timed_out
        self.notes: list[str] = [] if notes is None else notes

    @property
    def enough(self) -> bool:
        return self.fits is not None and self.fits >= self.share
