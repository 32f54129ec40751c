"""The metric source (embedded or Prometheus) and the SLO settings."""

from __future__ import annotations

from typing import Literal

from opsctl.config.types import SecretRef
from opsctl.model import Duration, Model, field

class PrometheusAuth(Model):
    bearer_token: SecretRef | None = None
    username: str | None = None
    password: SecretRef | None = None

    def __post_init__(self) -> None:
        if self.bearer_token and (self.username or self.password):
            raise ValueError("use either bearer_token or username/password, not both")
        if bool(self.username) != bool(self.password):
            raise ValueError("basic auth needs both username and password")


class PrometheusSource(Model):
    url: str = "http://127.0.0.1:9090"
    timeout: float = 10.0
    auth: PrometheusAuth = field(default_factory=PrometheusAuth)
    max_concurrency: int = 4
    report_deadline: float = 60.0
    verify_tls: bool = True
    # A traffic guard waits at most this long on metrics (an emergency never waits on a slow server).
    guard_deadline: float = 8.0
    # Thanos / Mimir / Cortex: tenant (X-Scope-OrgID), private CA, and query parameters.
    tenant: str | None = None
    ca_file: str | None = None
    dedup: bool | None = None
    partial_response: bool | None = None
    # The sample step of the proxy's series (its scrape interval): `--at` is aligned to it.
    # Unset: the newest request-counter sample at or before `--at` is the boundary.
    step: Duration | None = None

    def __post_init__(self) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be an http:// or https:// URL with a host (got {self.url!r})")
        try:
            parts.port
        except ValueError:
            raise ValueError(f"url has an invalid port (got {self.url!r})") from None
        if not 0 < self.guard_deadline <= 600:
            raise ValueError("guard_deadline must be between 0 and 600 seconds")
        if self.tenant is not None and (not self.tenant or any(c in self.tenant for c in "\r\n")):
            raise ValueError("tenant must be a non-empty single-line string")
        if not 0 < self.timeout <= 600:
            raise ValueError("timeout must be between 0 and 600 seconds")
        if not 1 <= self.max_concurrency <= 64:
            raise ValueError("max_concurrency must be between 1 and 64")
        if self.report_deadline <= 0:
            raise ValueError("report_deadline must be positive")
        if self.step is not None and not 1 <= self.step.seconds <= 3600:
            raise ValueError("step must be between 1s and 1h")


class MetricsConfig(Model):
    source: Literal["embedded", "prometheus"] = "embedded"
    prometheus: PrometheusSource = field(default_factory=PrometheusSource)
    # Traffic guards refuse metrics whose newest sample is older than this, on either source.
    max_data_age: Duration = Duration("5m")
    # The proxy's metrics carry the service in this label; every selector opsctl generates (capacity,
    # shadow, cost, quality) matches it. Unset: `service` for a catalog's services, and no matcher
    # for a single config (whose proxy may predate the label); "" turns the matcher off everywhere.
    service_label: str | None = None

    def __post_init__(self) -> None:
        import re

        if self.service_label and (not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", self.service_label)
                                   or self.service_label.startswith("__")):
            raise ValueError(f"service_label must be a Prometheus label name (got {self.service_label!r})")
        if self.service_label in ("backend", "outcome", "le"):
            raise ValueError(f"service_label {self.service_label!r} is one of the proxy's own labels")
        if not 10 <= self.max_data_age.seconds <= 3650 * 86400:
            raise ValueError("max_data_age must be between 10s and 3650d")

    @property
    def max_data_age_seconds(self) -> int:
        return self.max_data_age.seconds


class SloConfig(Model):
    dir: str = "slos"
    period: Duration = Duration("28d")
    # `slo validate` refuses an SLO file whose selectors lack metrics.service_label="<service>".
    # Unset: on for a service of a catalog, off for a single config (whose SLOs predate the label).
    require_service_matcher: bool | None = None
    # Add Sloth's sloth_id / sloth_service / sloth_slo labels to the generated recording series.
    sloth_labels: bool = False

    def __post_init__(self) -> None:
        seconds = self.period.seconds
        if not 86400 <= seconds <= 400 * 86400:
            raise ValueError("period must be between 1d and 400d")

    @property
    def period_seconds(self) -> int:
        return self.period.seconds
