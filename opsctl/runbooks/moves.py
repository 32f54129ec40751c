"""Traffic moves a runbook quotes and the capacity they need: the failover and the partial ramp
off a backend planned on the normal split, the replicas the capacity backend needs (the capacity
guard's arithmetic), vendors' throughput, and where the split lives. Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsctl.errors import ConfigError
from opsctl.runbooks.formatting import pct

if TYPE_CHECKING:
    from opsctl.config import Config


@dataclass(frozen=True)
class CapacityNeed:
    """What the internal backend must carry after a move, at the configured peak request rate."""

    backend: str
    where: str  # "Deployment llm/vllm" or "static replicas"
    source: str  # kubernetes | static
    own_share: int  # its share before
    moved_share: int  # what it receives
    share_after: int
    peak_rps: float | None
    rps_per_replica: float
    headroom: float
    replicas: int | None  # configured (static); None: read live from the Deployment
    max_replicas: int
    needed: int | None  # replicas to carry share_after at peak, with headroom
    needed_for_moved: int | None  # replicas for the moved share alone
    fits_at_max: int | None  # share of peak traffic the most replicas opsctl can have ready carry

    @property
    def available(self) -> int:
        """The most replicas there can be: static capacity is what is configured (opsctl cannot scale
        it); a Deployment is scaled up to max_replicas."""
        return self.replicas if self.replicas is not None else self.max_replicas

    @property
    def available_key(self) -> str:
        return "capacity.replicas" if self.replicas is not None else "capacity.max_replicas"

    @property
    def enough(self) -> bool | None:
        if self.needed is None:
            return None
        return self.needed <= self.available

    @property
    def headroom_text(self) -> str:
        return pct(self.headroom)

    @property
    def peak_text(self) -> str:
        return "unknown" if self.peak_rps is None else f"{self.peak_rps:g}"

    def formula(self, share: int) -> str:
        """The sum behind a replica count, with its inputs."""
        peak = "PEAK" if self.peak_rps is None else f"{self.peak_rps:g} requests/s"
        return (f"ceil({peak} x {share}% x (1 + {self.headroom:g}) / {self.rps_per_replica:g} requests/s per replica)")

    @property
    def carries_at_peak(self) -> int | None:
        """The share the backend ends with at peak on max_replicas (a failover moves only what fits)."""
        if self.fits_at_max is None:
            return None
        return min(self.share_after, max(self.fits_at_max, self.own_share))

    @property
    def left_at_peak(self) -> int | None:
        """Points of the moved share that stay on the failing backend at peak."""
        carried = self.carries_at_peak
        return None if carried is None else self.share_after - carried

    @property
    def short_by(self) -> int | None:
        return None if self.needed is None else max(self.needed - self.available, 0)


@dataclass(frozen=True)
class Move:
    """A failover from one backend, planned on the normal split as `opsctl traffic failover` plans it."""

    source: str
    receivers: tuple[str, ...]
    before: dict[str, int] | None  # the normal split (traffic.default_split); None when not configured
    after: dict[str, int] | None
    capacity: CapacityNeed | None  # when the internal (capacity) backend receives traffic
    unmodelled: tuple[str, ...]  # receivers whose capacity opsctl does not model (vendors)

    def describe(self, which: str) -> str:
        split = self.before if which == "before" else self.after
        if split is None:
            return "unknown"
        return " / ".join(f"{b} {w}" for b, w in split.items())


def normal_split(cfg: "Config") -> dict[str, int] | None:
    split = cfg.traffic.default_split
    if not split:
        return None
    return {b: split.get(b, 0) for b in cfg.backends}


def plan_move(cfg: "Config", source: str) -> Move | None:
    """The failover from `source` on the normal split, and what the receiving capacity needs."""
    from opsctl.traffic.failover import failover_plan
    from opsctl.traffic.split import Split

    # As `traffic failover` picks them: the degradation backend only takes what capacity leaves over.
    receivers = tuple(b for b in cfg.backends if b != source and b != cfg.traffic.degradation)
    if not receivers:
        return None
    before = normal_split(cfg)
    after = None
    if before is not None:
        planned = failover_plan(source, receivers)(Split.of(before))
        after = {b: planned.weight(b) for b in cfg.backends}
    capacity = None
    cap = cfg.capacity
    if cap is not None and cap.backend in receivers:
        own = before.get(cap.backend, 0) if before else 0
        share_after = after.get(cap.backend, 0) if after else 100
        capacity = capacity_need(cfg, own, share_after)
    unmodelled = tuple(b for b in receivers if cap is None or (b != cap.backend and b not in cap.vendors))
    return Move(source, receivers, before, after, capacity, unmodelled)


def vendor_throughput_text(vendor) -> str:
    """A vendor's provisioned throughput as the capacity guard checks it."""
    if vendor.requests_per_second is not None:
        figure = f"{vendor.requests_per_second:g} requests/s"
    elif vendor.tokens_per_second is not None:
        figure = f"{vendor.tokens_per_second:g} tokens/s"
    else:
        figure = f"`{vendor.query}` ({vendor.unit}/s)"
    return f"{figure} with {pct(vendor.headroom)} headroom"


def capacity_need(cfg: "Config", own_share: int, share_after: int) -> CapacityNeed:
    """Replicas the capacity backend needs to carry `share_after`% of peak traffic, with the
    same arithmetic as the capacity guard (opsctl/traffic/capacity.py)."""
    from opsctl.traffic.capacity_reading import CapacityReading

    cap = cfg.capacity
    if cap is None:  # its callers ask only with a capacity section
        raise ConfigError("the runbooks' capacity figures need the capacity section")
    peak = cfg.runbooks.peak_rps
    namespace = cap.namespace or cfg.traffic.kubernetes.namespace
    where = f"Deployment {namespace}/{cap.deployment}" if cap.source == "kubernetes" else "static replicas"
    configured = cap.replicas if cap.source == "static" else None
    reading = CapacityReading(cap.backend, configured or 0, configured or 0, cap.max_replicas, cap.rps_per_replica,
                              cap.headroom, peak, None, where)
    moved = max(share_after - own_share, 0)
    return CapacityNeed(
        backend=cap.backend, where=where, source=cap.source, own_share=own_share, moved_share=moved,
        share_after=share_after, peak_rps=peak, rps_per_replica=cap.rps_per_replica, headroom=cap.headroom,
        replicas=configured, max_replicas=cap.max_replicas,
        needed=reading.replicas_for(share_after), needed_for_moved=reading.replicas_for(moved),
        fits_at_max=reading.max_share(configured if configured is not None else cap.max_replicas),
    )


@dataclass(frozen=True)
class Ramp:
    """A partial move off a degraded (not down) backend, and why these weights."""

    weights: dict[str, int]
    why: str


def ramp_target(cfg: "Config", source: str) -> Ramp | None:
    """Half the source's normal share, capped by what the capacity backend carries at peak on
    max_replicas. None when nothing sensible can move."""
    before = normal_split(cfg)
    if before is None or before.get(source, 0) == 0:
        return None
    receivers = [b for b in cfg.backends if b != source]
    if not receivers:
        return None
    half = before[source] // 2 or before[source]
    move = half
    why = f"half of {source}'s {before[source]}%"
    cap = cfg.capacity
    target = dict(before)
    if cap is not None and cap.backend in receivers:
        own = before.get(cap.backend, 0)
        need = capacity_need(cfg, own, own + half)
        if need.fits_at_max is not None and need.fits_at_max - own < half:
            move = max(0, need.fits_at_max - own)
            why = (f"{cap.backend} up to the {need.fits_at_max}% it carries at the {need.peak_text} requests/s peak"
                   f" on {need.available} replicas; half of {source}'s {before[source]}% would not fit")
        if move == 0:
            return None
        target[cap.backend] += move
    else:
        target[receivers[0]] += move
    target[source] -= move
    return Ramp(target, why)


def traffic_target(cfg: "Config") -> str:
    """Where the split lives, in words (no state-dir path: it differs between machines)."""
    t = cfg.traffic
    ns = t.kubernetes.namespace
    if t.actuator == "file":
        return f"the file {t.file.path} under the state dir"
    if t.actuator == "configmap":
        return f"ConfigMap {t.configmap.namespace or ns}/{t.configmap.name}, key {t.configmap.key}"
    if t.actuator == "istio":
        route = f", route {t.istio.route}" if t.istio.route else ", first HTTP route"
        return f"Istio VirtualService {t.istio.namespace or ns}/{t.istio.name}{route}"
    return f"Gateway API HTTPRoute {t.gateway_api.namespace or ns}/{t.gateway_api.name}, rule {t.gateway_api.rule}"
