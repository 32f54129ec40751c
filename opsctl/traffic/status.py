"""`traffic status` as data: the split, where it lives, the last change, freezes, capacity, ramp."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.audit import AuditLog
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.config import Config


def traffic_status(cfg: "Config", now: float) -> dict:
    from opsctl.freeze import FreezeCalendar
    from opsctl.traffic.rampstate import RampState, running_ramp
    from opsctl.traffic.registry import open_actuator

    order = list(cfg.backends)
    actuator = open_actuator(cfg)
    stored = actuator.read()
    last = AuditLog(cfg.audit_path).find(
        lambda e: e.get("kind") == "traffic" and e.get("outcome") == "applied" and not e.get("dry_run"), limit=1)
    calendar = FreezeCalendar(cfg.freezes)
    active = calendar.active(now)
    upcoming = [s for s in calendar.upcoming(now) if not s.contains(now)][:1]
    status = {
        "actuator": actuator.kind,
        "target": actuator.target,
        "version": stored.version,
        "split": stored.split.to_dict(order) if stored.split else None,
        "note": stored.note,
        "last_change": _last_change(last[0]) if last else None,
        "freezes_active": [s.to_dict() for s in active],
        "next_freeze": upcoming[0].to_dict() if upcoming else None,
        "capacity": _capacity(cfg, stored.split),
        "ramp": None,
    }
    state = RampState.load(cfg)
    if state is not None and state.status == "running":
        live = running_ramp(cfg)
        status["ramp"] = {**state.summary(), "live": live is not None,
                          "holder": live or None}
    return status


def _last_change(entry: dict) -> dict:
    keys = ("time", "actor", "action", "operation", "reason", "incident", "emergency", "overrides", "before", "after")
    return {k: entry.get(k) for k in keys}


def _capacity(cfg: "Config", split) -> dict | None:
    if cfg.capacity is None:
        return None
    from opsctl.metrics.base import open_source
    from opsctl.traffic.capacity import Capacity

    cache: dict = {}

    def source():
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
    return data
