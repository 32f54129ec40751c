"""The readiness of a backend's own fleet, for the canary restore (opsctl/traffic/canary.py): the
internal Deployment's ready pods against its desired replicas, read from the capacity source the
capacity guard uses (`capacity.source: kubernetes`: the Deployment's status, `spec.replicas` and
`status.readyReplicas`; `static`: `replicas` ready of `replicas`). A backend the capacity section
does not count (a vendor) has no readiness: None, and its canary is judged on traffic alone.
An embedded drill stands in with the simulated pods (drills/automation.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.traffic.canary import Readiness

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.traffic.kube import Kube


def read_readiness(cfg: "Config", backend: str, *, kube: "Kube | None" = None) -> Readiness | None:
    """The backend's ready and desired pods, or None when opsctl does not count its pods. A read
    that fails is `Readiness.unknown` (never ready on it: the canary waits, as on no data)."""
    from opsctl.errors import OpsctlError
    from opsctl.traffic.capacity import Capacity, no_source

    cap = cfg.capacity
    if cap is None or cap.backend != backend:
        return None
    capacity = Capacity(cfg, no_source, lambda: 0.0, kube=kube)
    try:
        reading = capacity.read_replicas()
    except OpsctlError as exc:
        return Readiness.unknown(backend, capacity.where, exc.message)
    return Readiness(backend, ready=reading[0], desired=reading[1], where=capacity.where)


__all__ = ["read_readiness"]
