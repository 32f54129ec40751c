"""Game-day drills: where scenarios live, and what a live drill may touch."""

from __future__ import annotations

from opsctl.model import Model, field

class LiveDrillSettings(Model):
    # The only Kubernetes namespaces a live drill may inject faults into (an Istio fault on the
    # vendor route, the internal Deployment scaled down): staging, never production. Empty: none.
    fault_namespaces: tuple[str, ...] = ()
    # `drill run --live --chain`: the Alertmanager and `opsctl serve` the chain goes through
    # (Prometheus is metrics.prometheus.url).
    alertmanager_url: str | None = None  # e.g. http://alertmanager.monitoring.svc:9093
    serve_url: str | None = None  # e.g. http://opsctl.opsctl.svc:9095

    def __post_init__(self) -> None:
        import re

        for what, url in (("alertmanager_url", self.alertmanager_url), ("serve_url", self.serve_url)):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"{what} must start with http:// or https:// (got {url!r})")
        for ns in self.fault_namespaces:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", ns):
                raise ValueError(f"fault_namespaces: {ns!r} is not a Kubernetes namespace name")


class DrillsConfig(Model):
    """Game-day drills: where scenarios live, and what a live drill may touch."""

    scenarios: str = "chaos"  # `opsctl drill list` and `validate` look here (relative to the config file)
    live: LiveDrillSettings = field(default_factory=LiveDrillSettings)
