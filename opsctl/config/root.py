"""The root `Config`: the backends, every section, and the checks that span sections."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from opsctl.config.alerting import AlertingConfig
from opsctl.config.automation import AutomationConfig
from opsctl.config.cost import CostConfig
from opsctl.config.drills import DrillsConfig
from opsctl.config.metrics import MetricsConfig, SloConfig
from opsctl.config.paging import PagingConfig
from opsctl.config.quality import Endpoint, QualityConfig
from opsctl.config.runbooks import RunbooksConfig
from opsctl.config.tickets import TicketsConfig
from opsctl.config.traffic import CapacityConfig, KubernetesSettings, StateConfig, TrafficConfig
from opsctl.errors import ConfigError
from opsctl.freeze import FreezeWindow
from opsctl.model import Model, field

def _promql_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class BackendProbe(Model):
    """`backends.<name>.probe`: read the proxy's synthetic probes of this backend
    (`llm_proxy_probes_total{backend, outcome}`, sent whatever its share) as its readiness for the
    canary restore (opsctl/traffic/canary_readiness.py, docs/decisions/0270): ready when at least
    `success` of the probes over `automation.restore.steady` succeeded and at least `min_probes`
    were sent there; fewer, or none, is unknown (never ready)."""

    success: float = 0.99  # share of the window's probes that must succeed (0.99: 3 of 300 may fail)
    min_probes: int = 30  # fewer probes in the window than this: unknown, not ready

    def __post_init__(self) -> None:
        if isinstance(self.success, bool) or not 0 < self.success <= 1:
            raise ValueError(f"success must be a share in (0, 1], e.g. 0.99 (got {self.success!r})")
        if isinstance(self.min_probes, bool) or not 1 <= self.min_probes <= 1_000_000:
            raise ValueError(f"min_probes must be a whole number from 1 to 1000000, e.g. 30 (got {self.min_probes!r})")


class Backend(Model):
    """One place the model runs. `kind` is internal (our GPU pods) or vendor (a serving endpoint)."""

    kind: Literal["internal", "vendor"]
    description: str = ""
    vendor: str | None = None
    probe: BackendProbe | None = None  # its synthetic probes as its readiness (a vendor's: it has no pods)


class Config(Model):
    service: str
    backends: dict[str, Backend]
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    slos: SloConfig = field(default_factory=SloConfig)
    automation: AutomationConfig = field(default_factory=AutomationConfig)
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
    paging: PagingConfig = field(default_factory=PagingConfig)
    tickets: TicketsConfig = field(default_factory=TicketsConfig)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    quality: QualityConfig = field(default_factory=QualityConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    capacity: CapacityConfig | None = None
    state: StateConfig = field(default_factory=StateConfig)
    freezes: list[FreezeWindow] = field(default_factory=list)
    drills: DrillsConfig = field(default_factory=DrillsConfig)
    runbooks: RunbooksConfig = field(default_factory=RunbooksConfig)
    state_dir: str = ".opsctl"
    # Where the config came from, and the directory relative paths resolve against.
    source_path: str = field(default="<built-in>", metadata={"internal": True})
    base_dir: str = field(default=".", metadata={"internal": True})
    # The catalog directory this config was read from (opsctl.config.catalog); None: a single config.
    catalog: str | None = field(default=None, metadata={"internal": True})

    def __post_init__(self) -> None:
        if not self.backends:
            raise ValueError("backends: at least one backend is required")
        for name in self.backends:
            if not name.replace("-", "").replace("_", "").isalnum() or name == "all":
                raise ValueError(f"backends: invalid backend name {name!r} (letters, digits, - and _; 'all' is reserved)")
        for section, names in (("endpoints", self.endpoints), ("cost.backends", self.cost.backends)):
            unknown = sorted(set(names) - set(self.backends))
            if unknown:
                raise ValueError(
                    f"{section}: {', '.join(unknown)} not a configured backend (known: {', '.join(sorted(self.backends))})"
                )
        self._check_traffic()
        self._fill_service_urls()
        self._check_runbooks()
        reference = self.quality.rules.reference
        if reference is not None and reference not in self.backends:
            raise ValueError(f"quality.rules.reference: unknown backend {reference!r}"
                             f" (known: {', '.join(sorted(self.backends))})")
        self._check_automation()
        self._fill_gpu_replicas()

    def _fill_service_urls(self) -> None:
        """`{service}` in the runbook URLs is the config's `service:` (decision 0162): the generated
        rules' runbook_url and the runbooks follow a rename, nothing else to edit."""
        url = self.alerting.runbook_base_url
        if "{service}" in url:
            object.__setattr__(self.alerting, "runbook_base_url", url.replace("{service}", self.service))
        base = self.runbooks.base_url
        if base is not None and "{service}" in base:
            object.__setattr__(self.runbooks, "base_url", base.replace("{service}", self.service))

    def _fill_gpu_replicas(self) -> None:
        """A GPU price without its own replica count bills the static capacity model's replicas."""
        for name, pricing in self.cost.backends.items():
            gpu = pricing.gpu
            if gpu is None or gpu.replicas is not None or gpu.replicas_query is not None:
                continue
            cap = self.capacity
            if cap is None or cap.backend != name or cap.replicas is None or cap.source != "static":
                raise ValueError(
                    f"cost.backends.{name}.gpu: give replicas or replicas_query; without them the count comes"
                    f" from capacity.replicas, which needs capacity: {{backend: {name}, source: static}}"
                )
            object.__setattr__(gpu, "replicas", float(cap.replicas))  # validated once, here; frozen after

    def _check_automation(self) -> None:
        """Policies that fail over from a fixed backend must name a configured one."""
        known = ", ".join(sorted(self.backends))
        for i, policy in enumerate(self.automation.policies):
            failover = policy.actions.failover
            if failover and failover.backend is not None and failover.backend not in self.backends:
                raise ValueError(
                    f"automation.policies[{i}].actions.failover.backend: unknown backend {failover.backend!r}"
                    f" (known: {known})"
                )

    def _check_traffic(self) -> None:
        """Cross-section checks: traffic, capacity and freezes must name configured backends."""
        known = ", ".join(sorted(self.backends))
        split = self.traffic.default_split
        for name, weight in split.items():
            if name not in self.backends:
                raise ValueError(f"traffic.default_split: unknown backend {name!r} (known: {known})")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
                raise ValueError(f"traffic.default_split.{name}: weight must be an integer from 0 to 100")
        if split and sum(split.values()) != 100:
            raise ValueError(f"traffic.default_split: weights must sum to 100 (they sum to {sum(split.values())})")
        for name in self.traffic.destinations:
            if name not in self.backends:
                raise ValueError(f"traffic.destinations: unknown backend {name!r} (known: {known})")
        if self.traffic.actuator in ("istio", "gateway-api"):
            missing = sorted(set(self.backends) - set(self.traffic.destinations))
            if missing:
                raise ValueError(
                    f"traffic.destinations: actuator {self.traffic.actuator} needs a destination for every backend"
                    f" (missing: {', '.join(missing)})"
                )
        if self.capacity is not None:
            backend = self.backends.get(self.capacity.backend)
            if backend is None:
                raise ValueError(f"capacity.backend: unknown backend {self.capacity.backend!r} (known: {known})")
            if backend.kind != "internal":
                raise ValueError(f"capacity.backend: {self.capacity.backend!r} is a vendor backend; capacity models our own pods")
            if backend.probe is not None:
                raise ValueError(f"backends.{self.capacity.backend}.probe: its readiness is its pods (capacity.backend);"
                                 " a probe is read for a backend opsctl does not count the pods of: remove it")
            for name in self.capacity.vendors:
                if name not in self.backends or self.backends[name].kind != "vendor":
                    raise ValueError(f"capacity.vendors: {name!r} is not a configured vendor backend (known: {known})")
        degradation = self.traffic.degradation
        if degradation is not None:
            if degradation not in self.backends:
                raise ValueError(f"traffic.degradation: unknown backend {degradation!r} (known: {known})")
            if self.capacity is not None and degradation == self.capacity.backend:
                raise ValueError(f"traffic.degradation: {degradation!r} is the capacity-modelled backend; name the"
                                 " backend that answers with no suggestions")
        names = [w.name for w in self.freezes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"freezes: duplicate freeze name(s): {', '.join(duplicates)}")

    def _check_runbooks(self) -> None:
        base = self.runbooks.base_url
        if base is not None and base.rstrip("/") != self.alerting.runbook_base_url.rstrip("/"):
            raise ValueError(
                f"runbooks.base_url ({base}) differs from alerting.runbook_base_url"
                f" ({self.alerting.runbook_base_url}): the alerts would link to runbooks somewhere else than"
                " they are published; set only alerting.runbook_base_url (runbooks.base_url defaults to it)"
            )

    @property
    def service_label(self) -> str:
        """The label name the proxy puts the service in (`metrics.service_label`, default `service`)."""
        label = self.metrics.service_label
        return "service" if label is None else label

    @property
    def service_labels(self) -> dict[str, str]:
        """The labels the proxy's series of this service carry, which generated selectors match: {}
        with `metrics.service_label: ""`, or unset on a single config (backwards compatible)."""
        if not self.service_label or (self.metrics.service_label is None and self.catalog is None):
            return {}
        return {self.service_label: self.service}

    @property
    def service_matcher(self) -> str:
        """`service="<service>"`, the matcher every generated selector carries ("" when turned off)."""
        return ",".join(f'{k}="{_promql_quote(v)}"' for k, v in self.service_labels.items())

    @property
    def requires_service_matcher(self) -> bool:
        """Must every SLO selector carry the service matcher (`slos.require_service_matcher`)?"""
        wanted = self.slos.require_service_matcher
        return bool(self.service_label) and (self.catalog is not None if wanted is None else wanted)

    @property
    def runbook_base_url(self) -> str:
        """Where the generated runbooks are published; the alerts' runbook_url links point here."""
        return (self.runbooks.base_url or self.alerting.runbook_base_url).rstrip("/")

    def path(self, value: str) -> Path:
        """Resolve a path from the config against the config file's directory."""
        p = Path(os.path.expanduser(value))
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def slo_dir(self) -> Path:
        return self.path(self.slos.dir)

    @property
    def state_path(self) -> Path:
        return self.path(self.state_dir)

    @property
    def audit_path(self) -> Path:
        return self.state_path / "audit.jsonl"

    @property
    def state_kubernetes(self) -> KubernetesSettings:
        """The connection the kubernetes state backend uses."""
        return self.state.kubernetes or self.traffic.kubernetes

    @property
    def drills_path(self) -> Path:
        """Where drill runs keep their state and reports: <state_dir>/drills/<run-id>/."""
        return self.state_path / "drills"


    def backend(self, name: str) -> Backend:
        try:
            return self.backends[name]
        except KeyError:
            known = ", ".join(sorted(self.backends))
            raise ConfigError(f"unknown backend {name!r} (known: {known})") from None
