"""`traffic status` as data: the split, where it lives, the last change and open failovers (from the
change record stored with the split, the same for every reader), freezes, capacity, ramp (from the
shared state store), with `traffic.shadow_actuator` the shadow object's mirror share, and where the
metrics are read.

`traffic_status` builds a `TrafficStatus` once; the CLI renders its table from the fields and
`-o json` from `to_dict(order)`, the document tests/traffic/status_documents.json pins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsctl.errors import OpsctlError
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.freeze import FreezeSpan
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.capacity_reading import CapacityReading, VendorReading
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.ramp_record import RampDocument, RampOwner
    from opsctl.traffic.record import OpenFailover
    from opsctl.traffic.split import Split

# The keys of an entry `last_change` shows, in order.
LAST_CHANGE_KEYS = ("id", "time", "actor", "action", "operation", "reason", "incident", "emergency", "overrides",
                    "before", "after")


def last_change_dict(entry: "ChangeEntry | None") -> dict[str, Any] | None:
    """An entry as `last_change` shows it: these keys of its stored form."""
    if entry is None:
        return None
    stored = entry.to_dict()
    return {k: stored.get(k) for k in LAST_CHANGE_KEYS}


class VendorStatus(Model):
    """A vendor's provisioned throughput against current traffic, or why it could not be read."""

    backend: str
    reading: VendorReading | None = None  # None: `error` says why
    error: str | None = None
    share_now: int | None = None  # its share of requests now; None when the split is unknown

    def to_dict(self) -> dict[str, Any]:
        data = {"backend": self.backend, "error": self.error} if self.reading is None else self.reading.to_dict()
        return {**data, "share_now": self.share_now}


class CapacityStatus(Model):
    """The internal backend's capacity reading (and the vendors'), or why it could not be read."""

    backend: str
    reading: CapacityReading | None = None  # None: `error` says why
    error: str | None = None
    share_now: int | None = None
    vendors: dict[str, VendorStatus] | None = None  # None: no capacity.vendors

    def to_dict(self) -> dict[str, Any]:
        if self.reading is None:
            return {"backend": self.backend, "error": self.error}
        data = {**self.reading.to_dict(), "share_now": self.share_now}
        if self.vendors is not None:
            data["vendors"] = {name: v.to_dict() for name, v in self.vendors.items()}
        return data


class RampStatus(Model):
    """The ramp in the shared state store, while it runs (or was interrupted)."""

    doc: "RampDocument"  # the ramp's stored document
    live: bool  # its owner's heartbeat is fresh (and, on this host, its process alive)
    holder: "RampOwner | None" = None  # the owner while live

    @property
    def id(self) -> str:
        return str(self.doc.id)

    @property
    def done(self) -> int:
        return self.doc.done

    @property
    def total(self) -> int:
        return len(self.doc.steps)

    @property
    def target(self) -> dict[str, Any] | None:
        return self.doc.target

    def to_dict(self) -> dict[str, Any]:
        return {**self.doc.summary(), "live": self.live, "holder": self.holder.to_dict() if self.holder else None}


class ShadowObject(Model):
    """The second object of a rollout (`traffic.shadow_actuator`): its mirror share, where it lives,
    its version and last change, or why it could not be read (`error`)."""

    actuator: str
    target: str | None = None
    version: str | None = None
    split: Split | None = None
    note: str | None = None
    corrupt: str | None = None
    last_change: ChangeEntry | None = None
    error: str | None = None

    def mirror(self, order: list[str]) -> dict[str, int] | None:
        """Backend -> the share mirrored to it (those with one), in the config's order."""
        if self.split is None:
            return None
        return {b: self.split.shadow_of(b) for b in order if self.split.shadow_of(b)}

    def to_dict(self, order: list[str]) -> dict[str, Any]:
        return {"actuator": self.actuator, "target": self.target, "version": self.version,
                "mirror": None if self.error else self.mirror(order),
                "split": self.split.to_dict(order) if self.split else None, "note": self.note,
                "corrupt": self.corrupt, "last_change": last_change_dict(self.last_change), "error": self.error}


class TrafficStatus(Model):
    """What `traffic status` shows, read once."""

    actuator: str
    target: str
    version: str
    split: Split | None  # None: unknown (exit 3)
    note: str = ""
    corrupt: str | None = None
    last_change: ChangeEntry | None = None
    open_failovers: dict[str, OpenFailover] = field(default_factory=dict)  # incident -> its open failover
    state_backend: str = ""
    freezes_active: tuple[FreezeSpan, ...] = ()
    next_freeze: FreezeSpan | None = None
    capacity: CapacityStatus | None = None  # None: no `capacity:` section
    ramp: RampStatus | None = None
    shadow_object: ShadowObject | None = None
    metrics_source: str = ""
    metrics_where: str = ""

    def to_dict(self, order: list[str]) -> dict[str, Any]:
        """The `-o json` document (its keys, order and values as before the status was typed)."""
        return {
            "actuator": self.actuator,
            "target": self.target,
            "version": self.version,
            "split": self.split.to_dict(order) if self.split else None,
            "note": self.note,
            "corrupt": self.corrupt,
            "last_change": last_change_dict(self.last_change),
            "open_failovers": [{"incident": incident, "saved": f.saved, "since": f.opened_at, "actor": f.actor,
                                "after": f.after} for incident, f in sorted(self.open_failovers.items())],
            "state_backend": self.state_backend,
            "freezes_active": [s.to_dict() for s in self.freezes_active],
            "next_freeze": self.next_freeze.to_dict() if self.next_freeze else None,
            "capacity": self.capacity.to_dict() if self.capacity else None,
            "ramp": self.ramp.to_dict() if self.ramp else None,
            "shadow_object": self.shadow_object.to_dict(order) if self.shadow_object else None,
            "metrics": {"source": self.metrics_source, "where": self.metrics_where},
        }


def traffic_status(cfg: "Config", now: float) -> TrafficStatus:
    from opsctl.freeze import FreezeCalendar
    from opsctl.state import open_state_store
    from opsctl.traffic.rampstate import RampState
    from opsctl.traffic.record import newest_first
    from opsctl.traffic.registry import open_actuator

    order = list(cfg.backends)
    actuator = open_actuator(cfg)
    stored = actuator.read()
    last = newest_first(stored.record)[:1]
    store = open_state_store(cfg)
    calendar = FreezeCalendar(cfg.freezes)
    upcoming = [s for s in calendar.upcoming(now) if not s.contains(now)][:1]
    ramp = None
    state = RampState.load(store)
    if state is not None and state.status == "running":
        live = state.live
        ramp = RampStatus(state.doc, live, state.doc.owner if live else None)
    return TrafficStatus(
        actuator=actuator.kind,
        target=actuator.target,
        version=stored.version,
        split=stored.split,
        note=stored.note,
        corrupt=stored.corrupt or None,
        last_change=last[0] if last else None,
        open_failovers=dict(stored.record.failovers) if stored.record is not None else {},
        state_backend=store.backend,
        freezes_active=tuple(calendar.active(now)),
        next_freeze=upcoming[0] if upcoming else None,
        capacity=_capacity(cfg, stored.split),
        ramp=ramp,
        shadow_object=_shadow_object(cfg, order),
        metrics_source=cfg.metrics.source,
        metrics_where=cfg.metrics.prometheus.url if cfg.metrics.source == "prometheus"
        else str(cfg.state_path / "metrics.sqlite"),
    )


def _shadow_object(cfg: "Config", order: list[str]) -> ShadowObject | None:
    """The shadow object read through its own actuator. None when unset (the actuator carries the
    mirror too); a read that fails is said in `error`, the rest of the status still shown."""
    from opsctl.traffic.record import newest_first
    from opsctl.traffic.registry import open_shadow_actuator

    if cfg.traffic.shadow_actuator is None:
        return None
    try:
        actuator = open_shadow_actuator(cfg)
        if actuator is None:
            return None
        stored = actuator.read()
    except OpsctlError as exc:
        return ShadowObject(cfg.traffic.shadow_actuator, error=exc.message)
    last = newest_first(stored.record)[:1]
    return ShadowObject(actuator.kind, actuator.target, stored.version, stored.split, stored.note,
                        stored.corrupt or None, last[0] if last else None)


def _capacity(cfg: "Config", split: "Split | None") -> CapacityStatus | None:
    if cfg.capacity is None:
        return None
    from opsctl.metrics.base import open_source
    from opsctl.traffic.capacity import Capacity

    cache: dict[str, MetricSource] = {}

    def source() -> MetricSource:
        if "s" not in cache:
            cache["s"] = open_source(cfg)
            cache["s"].check()
        return cache["s"]

    try:
        reading = Capacity(cfg, source, lambda: source().default_time()).read()
    except OpsctlError as exc:
        return CapacityStatus(cfg.capacity.backend, error=exc.message)
    vendors: dict[str, VendorStatus] | None = None
    if cfg.capacity.vendors:
        from opsctl.traffic.capacity import vendor_reading

        vendors = {}
        for backend in cfg.capacity.vendors:
            share = split.load_share(backend) if split else None
            try:
                vendors[backend] = VendorStatus(backend, vendor_reading(cfg, backend, source(),
                                                                        source().default_time()), share_now=share)
            except OpsctlError as exc:
                vendors[backend] = VendorStatus(backend, error=exc.message, share_now=share)
    return CapacityStatus(cfg.capacity.backend, reading, share_now=split.load_share(cfg.capacity.backend)
                          if split else None, vendors=vendors)
