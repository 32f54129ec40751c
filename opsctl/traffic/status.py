"""`traffic status` as data: the split, where it lives, the last change and open failovers (from the
change record stored with the split, the same for every reader), freezes, capacity, ramp (from the
shared state store), with `traffic.shadow_actuator` the shadow object's mirror share, and where the
metrics are read."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.split import Split


def traffic_status(cfg: "Config", now: float) -> dict[str, Any]:
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
    active = calendar.active(now)
    upcoming = [s for s in calendar.upcoming(now) if not s.contains(now)][:1]
    status = {
        "actuator": actuator.kind,
        "target": actuator.target,
        "version": stored.version,
        "split": stored.split.to_dict(order) if stored.split else None,
        "note": stored.note,
        "corrupt": stored.corrupt or None,
        "last_change": _last_change(last[0].to_dict()) if last else None,
        "open_failovers": [{"incident": incident, "saved": f.saved, "since": f.opened_at, "actor": f.actor,
                            "after": f.after}
                           for incident, f in sorted(stored.record.failovers.items() if stored.record else ())],
        "state_backend": store.backend,
        "freezes_active": [s.to_dict() for s in active],
        "next_freeze": upcoming[0].to_dict() if upcoming else None,
        "capacity": _capacity(cfg, stored.split),
        "ramp": None,
        "shadow_object": _shadow_object(cfg, order),
        "metrics": {"source": cfg.metrics.source,
                    "where": cfg.metrics.prometheus.url if cfg.metrics.source == "prometheus"
                    else str(cfg.state_path / "metrics.sqlite")},
    }
    state = RampState.load(store)
    if state is not None and state.status == "running":
        live = state.live
        status["ramp"] = {**state.summary(), "live": live, "holder": state.data.get("owner") if live else None}
    return status


def _shadow_object(cfg: "Config", order: list[str]) -> dict[str, Any] | None:
    """The second object of a rollout (`traffic.shadow_actuator`, e.g. the mesh's mirror while the
    flagd gate assigns users): its mirror share per backend, where it lives, its version and last
    change, read through its own actuator. None when unset (the actuator carries the mirror too);
    a read that fails is said in `error`, the rest of the status still shown."""
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
        return {"actuator": cfg.traffic.shadow_actuator, "target": None, "version": None, "mirror": None,
                "split": None, "note": None, "corrupt": None, "last_change": None, "error": exc.message}
    split = stored.split
    last = newest_first(stored.record)[:1]
    return {"actuator": actuator.kind, "target": actuator.target, "version": stored.version,
            "mirror": {b: split.shadow_of(b) for b in order if split.shadow_of(b)} if split else None,
            "split": split.to_dict(order) if split else None, "note": stored.note, "corrupt": stored.corrupt or None,
            "last_change": _last_change(last[0].to_dict()) if last else None, "error": None}


def _last_change(entry: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "time", "actor", "action", "operation", "reason", "incident", "emergency", "overrides", "before",
            "after")
    return {k: entry.get(k) for k in keys}


def _capacity(cfg: "Config", split: "Split | None") -> dict[str, Any] | None:
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
        return {"backend": cfg.capacity.backend, "error": exc.message}
    data = reading.to_dict()
    data["share_now"] = split.load_share(cfg.capacity.backend) if split else None
    if cfg.capacity.vendors:
        from opsctl.traffic.capacity import vendor_reading

        vendors = {}
        for backend in cfg.capacity.vendors:
            try:
                vendors[backend] = vendor_reading(cfg, backend, source(), source().default_time()).to_dict()
            except OpsctlError as exc:
                vendors[backend] = {"backend": backend, "error": exc.message}
            vendors[backend]["share_now"] = split.load_share(backend) if split else None
        data["vendors"] = vendors
    return data
