"""Traffic control: Kubernetes access, actuators, destinations, rate limit, ramps; state and capacity."""

from __future__ import annotations

from typing import Literal

from opsctl.config.rollout import FlagdSettings
from opsctl.config.types import _check_duration
from opsctl.model import Duration, Model, field

class KubernetesSettings(Model):
    """How opsctl reaches the cluster: an explicit `host` (e.g. `kubectl proxy`), a kubeconfig, or in-cluster."""

    host: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "default"
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.host and not self.host.startswith(("http://", "https://")):
            raise ValueError(f"host must start with http:// or https:// (got {self.host!r})")
        if self.host and self.kubeconfig:
            raise ValueError("give either host or kubeconfig, not both")
        if not 0 < self.timeout <= 300:
            raise ValueError("timeout must be between 0 and 300 seconds")


class FileActuatorSettings(Model):
    path: str = "traffic/split.json"  # relative paths resolve under state_dir


class ConfigMapSettings(Model):
    name: str = "grammar-traffic-split"
    key: str = "split.json"
    namespace: str | None = None  # default: traffic.kubernetes.namespace


class IstioSettings(Model):
    name: str = "llm-inference"  # the VirtualService
    namespace: str | None = None
    route: str | None = None  # spec.http[].name; default: the first HTTP route
    api_version: Literal["v1", "v1beta1", "v1alpha3"] = "v1"


class GatewayApiSettings(Model):
    name: str = "llm-inference"  # the HTTPRoute
    namespace: str | None = None
    rule: int = 0  # index into spec.rules
    api_version: Literal["v1", "v1beta1"] = "v1"

    def __post_init__(self) -> None:
        if self.rule < 0:
            raise ValueError("rule must be a rule index (0 or more)")


class Destination(Model):
    """Where one backend's requests go: Istio destination host, or Gateway API backendRef (a Service) name."""

    host: str
    port: int | None = None
    subset: str | None = None  # Istio only
    namespace: str | None = None  # Gateway API only

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("host must not be empty")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ValueError(f"port must be between 1 and 65535 (got {self.port})")


class RateLimit(Model):
    """Flap damping: at most `max_changes` traffic operations per `window` (a ramp counts once)."""

    max_changes: int = 6
    window: Duration = Duration("1h")

    def __post_init__(self) -> None:
        if not 1 <= self.max_changes <= 1000:
            raise ValueError("max_changes must be between 1 and 1000")
        _check_duration(self.window, "window", minimum=1)

    @property
    def window_seconds(self) -> int:
        return self.window.seconds


class RampDefaults(Model):
    step: int = 10  # percentage points per step
    interval: Duration = Duration("5m")  # wait between steps, then check the receiving backend's burn rate

    def __post_init__(self) -> None:
        if not 1 <= self.step <= 100:
            raise ValueError("step must be between 1 and 100")
        _check_duration(self.interval, "interval")


class TrafficConfig(Model):
    actuator: Literal["file", "configmap", "istio", "gateway-api", "flagd"] = "file"
    # The split before anything was stored (file actuator); must name configured backends and sum to 100.
    default_split: dict[str, int] = field(default_factory=dict)
    file: FileActuatorSettings = field(default_factory=FileActuatorSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    configmap: ConfigMapSettings = field(default_factory=ConfigMapSettings)
    istio: IstioSettings = field(default_factory=IstioSettings)
    gateway_api: GatewayApiSettings = field(default_factory=GatewayApiSettings)
    flagd: FlagdSettings = field(default_factory=FlagdSettings)  # config/rollout.py
    destinations: dict[str, Destination] = field(default_factory=dict)
    rate_limit: RateLimit = field(default_factory=RateLimit)
    ramp: RampDefaults = field(default_factory=RampDefaults)
    # A write that meets a concurrent change (file version moved, 409 Conflict) re-reads, re-plans and
    # re-checks its guards, up to this many attempts in all; then exit 5.
    conflict_attempts: int = 5
    # A configured backend that answers with no suggestions (users see no red underlines rather than
    # errors). A failover whose receivers cannot carry the whole share sends the remainder there, as
    # its own recorded change; as replicas become Ready the top-ups take it back from there first.
    degradation: str | None = None
    # A second object for a rollout's shadow stages: the mesh's mirror share (its own section above,
    # e.g. `istio:`), while `actuator` (e.g. the flagd gate) assigns users for the A/B and ramp stages.
    # Unset: `actuator` carries both. Only the rollout controller writes it (docs/decisions/0036-rollout-as-one-plan.md).
    shadow_actuator: Literal["file", "configmap", "istio", "gateway-api"] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.conflict_attempts <= 20:
            raise ValueError("conflict_attempts must be between 1 and 20")
        if self.shadow_actuator is not None and self.shadow_actuator == self.actuator:
            raise ValueError(f"shadow_actuator {self.shadow_actuator!r} is the actuator itself: name the mesh"
                             " object that mirrors (or leave it unset: the actuator carries both)")


class StateConfig(Model):
    """Where state that more than one actor must agree on lives (docs/decisions/0033-the-record-lives-on-the-actuated-object.md).

    `local`: JSON documents under the state dir (one host; the embedded default). `kubernetes`: one
    ConfigMap per document in `namespace`, written with resourceVersion compare-and-swap, so laptops,
    `opsctl serve` replicas and drills share one truth. The connection is `kubernetes` when given,
    else traffic.kubernetes (the actuators' own settings).
    """

    backend: Literal["local", "kubernetes"] = "local"
    namespace: str | None = None  # default: the connection's namespace
    kubernetes: KubernetesSettings | None = None  # default: traffic.kubernetes
    history: int = 50  # change records kept with the split; older ones live in Events and logs

    def __post_init__(self) -> None:
        if not 1 <= self.history <= 200:
            raise ValueError("history must be between 1 and 200 (a ConfigMap or annotation holds at most 1 MiB)")


class VendorThroughput(Model):
    """A vendor endpoint's provisioned throughput: what it carries, in requests/s or tokens/s
    (prompt + completion), given here or read from the endpoint's metrics with `query` (PromQL
    answering one number in `unit`). A move toward the vendor must fit it with `headroom` to spare."""

    requests_per_second: float | None = None
    tokens_per_second: float | None = None
    query: str | None = None
    unit: Literal["requests", "tokens"] = "requests"  # what `query` answers in
    headroom: float = 0.2

    def __post_init__(self) -> None:
        given = [n for n in ("requests_per_second", "tokens_per_second", "query") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of requests_per_second, tokens_per_second or query"
                             f" (got {', '.join(given) or 'none'})")
        for name in ("requests_per_second", "tokens_per_second"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive")
        if self.query is not None and not self.query.strip():
            raise ValueError("query must not be empty")
        if not 0 <= self.headroom <= 10:
            raise ValueError("headroom must be between 0 and 10 (0.2 = keep 20% spare)")

    @property
    def measure(self) -> str:
        """requests | tokens: what the provisioned figure counts."""
        if self.requests_per_second is not None:
            return "requests"
        if self.tokens_per_second is not None:
            return "tokens"
        return self.unit


class CapacityConfig(Model):
    """The internal backend's capacity: ready replicas x rps_per_replica must carry its share x (1 + headroom).

    `source: kubernetes` reads (and scales, through the scale subresource) a Deployment; `source: static`
    takes `replicas` as the ready count and never scales (the embedded environment has no cluster).
    """

    backend: str
    rps_per_replica: float
    source: Literal["kubernetes", "static"] = "kubernetes"
    namespace: str | None = None  # default: traffic.kubernetes.namespace
    deployment: str | None = None
    replicas: int | None = None  # static only
    headroom: float = 0.2
    max_replicas: int = 1
    ready_timeout: Duration = Duration("10m")
    poll_interval: Duration = Duration("5s")
    rate_window: Duration = Duration("5m")  # request rate = sum(rate(llm_proxy_requests_total[rate_window]))
    # What drives the Deployment's replicas. With `hpa` (autoscaling/v2) or `keda` (a ScaledObject),
    # capacity raises the autoscaler's minimum (minReplicas / minReplicaCount) and puts it back on
    # restore: a scale-subresource patch would be undone at the autoscaler's next sync.
    autoscaler: Literal["none", "hpa", "keda"] = "none"
    autoscaler_name: str | None = None  # default: the Deployment's name
    # Vendor backend -> its provisioned throughput; a move toward a vendor listed here is checked
    # against it (refused, or a failover capped), as the internal backend's replicas are.
    vendors: dict[str, VendorThroughput] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.autoscaler != "none" and self.source != "kubernetes":
            raise ValueError("autoscaler needs source kubernetes")
        if self.rps_per_replica <= 0:
            raise ValueError("rps_per_replica must be positive")
        if not 0 <= self.headroom <= 10:
            raise ValueError("headroom must be between 0 and 10 (0.2 = keep 20% spare)")
        if self.max_replicas < 0:
            raise ValueError("max_replicas must not be negative")
        if self.source == "kubernetes" and not self.deployment:
            raise ValueError("source kubernetes needs deployment (the internal backend's Deployment name)")
        if self.source == "static" and self.replicas is None:
            raise ValueError("source static needs replicas (the ready replica count)")
        if self.replicas is not None and self.replicas < 0:
            raise ValueError("replicas must not be negative")
        _check_duration(self.ready_timeout, "ready_timeout")
        _check_duration(self.poll_interval, "poll_interval", minimum=0)
        _check_duration(self.rate_window, "rate_window", minimum=10)
