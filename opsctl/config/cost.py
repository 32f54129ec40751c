"""Cost: GPU, provisioned and per-token pricing by backend, and the frontier reference."""

from __future__ import annotations

from opsctl.config.types import _check_share
from opsctl.model import Duration, Model, field

class GpuPricing(Model):
    """Internal pods: replicas x GPUs per replica x hours x the GPU hourly price.

    `replicas` is a fixed count; `replicas_query` is PromQL over the metric source giving the average
    replica count over the window, `$window` standing for it (e.g.
    `avg_over_time(kube_deployment_status_replicas_available{deployment="vllm"}[$window])`).
    Neither: the static `capacity.replicas` of the same backend, so the pods that are billed and
    the pods that carry a failover are one number (Config fills it in).
    """

    gpu_hourly_price: float
    gpus_per_replica: int = 1
    replicas: float | None = None
    replicas_query: str | None = None

    def __post_init__(self) -> None:
        if self.gpu_hourly_price < 0:
            raise ValueError("gpu_hourly_price must not be negative")
        if self.gpus_per_replica < 1:
            raise ValueError("gpus_per_replica must be at least 1")
        if self.replicas is not None and self.replicas_query is not None:
            raise ValueError("give one of 'replicas' (a count) or 'replicas_query' (PromQL), not both")
        if self.replicas is not None and self.replicas < 0:
            raise ValueError("replicas must not be negative")


class ProvisionedPricing(Model):
    """Vendor provisioned throughput: a fixed price per hour, whatever the traffic."""

    hourly_price: float

    def __post_init__(self) -> None:
        if self.hourly_price < 0:
            raise ValueError("hourly_price must not be negative")


class TokenPricing(Model):
    """Vendor pay-per-token: prices per million input (prompt) and output (completion) tokens."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        if self.input_per_million < 0 or self.output_per_million < 0:
            raise ValueError("prices must not be negative")


class BackendCost(Model):
    """Exactly one pricing model per backend."""

    gpu: GpuPricing | None = None
    provisioned: ProvisionedPricing | None = None
    per_token: TokenPricing | None = None

    def __post_init__(self) -> None:
        given = [n for n in ("gpu", "provisioned", "per_token") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'gpu', 'provisioned' or 'per_token'")

    @property
    def model(self) -> str:
        return next(n for n in ("gpu", "provisioned", "per_token") if getattr(self, n) is not None)


class FrontierReference(Model):
    name: str = "frontier model"
    price_per_million: float = 0.0

    def __post_init__(self) -> None:
        if self.price_per_million < 0:
            raise ValueError("price_per_million must not be negative")


class CostConfig(Model):
    currency: str = "USD"
    window: Duration = Duration("7d")
    min_traffic_share: float = 0.05
    frontier: FrontierReference | None = None
    backends: dict[str, BackendCost] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.window.seconds < 3600:
            raise ValueError("window must be at least 1h")
        _check_share("min_traffic_share", self.min_traffic_share)
