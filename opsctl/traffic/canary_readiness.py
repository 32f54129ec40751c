"""The readiness of a backend, for the canary restore (opsctl/traffic/canary.py), beside its traffic.

- Its pods (`read_readiness`): the internal Deployment's ready pods against its desired replicas,
  read from the capacity source the capacity guard uses (`capacity.source: kubernetes`: the
  Deployment's status, `spec.replicas` and `status.readyReplicas`; `static`: `replicas` ready of
  `replicas`). An embedded drill stands in with the simulated pods (drills/automation.py).
- Its synthetic probes (`read_probe_readiness`), for a backend whose pods opsctl does not count (a
  vendor) and that declares `backends.<name>.probe`: the proxy's `llm_proxy_probes_total{backend,
  outcome}` over `automation.restore.steady` (at least the fast tier's short window), read through
  the metric source the guards read (the embedded store or Prometheus, bounded and strict): ready
  when at least `probe.success` of at least `probe.min_probes` probes succeeded (decision 0270).

`backend_readiness` is the one call the restore makes: the pods where opsctl counts them (the
caller's reader, or `read_readiness`), else the probes where declared, else None (the canary is
judged on its traffic alone). A reading that fails is unknown: never ready on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.metrics import schema
from opsctl.traffic.canary import Readiness

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.canary import CanarySettings
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


def probe_queries(cfg: "Config", backend: str, window: int) -> list[str]:
    """One query per probe outcome (schema.PROBE_OUTCOMES): its probes over `window` seconds."""
    matchers = ",".join(m for m in (cfg.service_matcher, f'backend="{backend}"') if m)
    return [f'sum(increase({schema.PROBES}{{{matchers},outcome="{o}"}}[{window}s]))' for o in schema.PROBE_OUTCOMES]


def read_probe_readiness(cfg: "Config", backend: str, at: float, window: int,
                         source: "Callable[[], MetricSource] | None" = None) -> Readiness | None:
    """The backend's probes over the `window` seconds ending at `at`, as a `Readiness` (kind probe),
    or None when it declares no probe. No probe in the window, or a source that does not answer,
    is unknown (never ready)."""
    from dataclasses import replace

    from opsctl.errors import NoDataError, UsageError

    probe = cfg.backends[backend].probe if backend in cfg.backends else None
    if probe is None:
        return None
    reading = Readiness(backend, where=schema.PROBES, kind="probe", success=probe.success, minimum=probe.min_probes,
                        window=window)
    try:
        opened = source() if source is not None else _guard_source(cfg)
        reading = replace(reading, where=f"{schema.PROBES} in {opened.description}")
        answers = opened.query_many(probe_queries(cfg, backend, window), at)
    except (NoDataError, UsageError) as exc:
        return replace(reading, known=False, error=exc.message)
    counts = {o: int(round(a or 0.0)) for o, a in zip(schema.PROBE_OUTCOMES, answers)}
    sent = sum(counts.values())
    if sent <= 0:  # no series, or none counted: no data, never ready
        return replace(reading, known=False, error=f"no probe of {backend} in the last {window}s")
    failed = ", ".join(f"{o} {n}" for o, n in counts.items() if o != "ok" and n)
    return replace(reading, ready=counts["ok"], desired=sent, failed=failed)


def probe_window(settings: "CanarySettings") -> int:
    """The window the probes are judged over: `automation.restore.steady`, at least the fast tier's
    short window (a `steady` of 0s still reads a minute of probes)."""
    return max(settings.steady, settings.fast_short)


def backend_readiness(cfg: "Config", backend: str, at: float, settings: "CanarySettings",
                      pods: "Callable[[], Readiness | None] | None" = None,
                      source: "Callable[[], MetricSource] | None" = None) -> Readiness | None:
    """What holds a canary that has not started: the backend's pods (`pods`, default
    `read_readiness`) where opsctl counts them, else its probes where it declares them, else None."""
    fleet = pods() if pods is not None else read_readiness(cfg, backend)
    if fleet is not None:
        return fleet
    return read_probe_readiness(cfg, backend, at, probe_window(settings), source)


def _guard_source(cfg: "Config") -> "MetricSource":
    from opsctl.traffic.slo_health import _guard_source as guard_source

    return guard_source(cfg)


__all__ = ["backend_readiness", "probe_queries", "probe_window", "read_probe_readiness", "read_readiness"]
