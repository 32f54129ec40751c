"""opsctl.yaml -> typed, validated models. The only module that handles raw dicts.

Each section is a frozen dataclass; `_build` checks types, ranges and unknown keys against the
annotations and reports every problem with the file and the key path (`metrics.prometheus.timeout`).
Dataclasses rather than pydantic keep `opsctl --help` and `opsctl traffic status` fast to start.

Where the config comes from, first match wins: `--config PATH`, `$OPSCTL_CONFIG`, `./opsctl.yaml`,
else the built-in embedded default (state under `./.opsctl/`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from opsctl.errors import ConfigError

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"
BUILTIN_CONFIG = DEFAULTS_DIR / "opsctl.yaml"


# ---------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class SecretRef:
    """Where a secret lives: an environment variable or a file. The value is never in the config."""

    env: str | None = None
    file: str | None = None

    def __post_init__(self):
        if bool(self.env) == bool(self.file):
            raise ValueError("give exactly one of 'env' or 'file'")

    def resolve(self) -> str:
        from opsctl.errors import UsageError

        if self.env:
            value = os.environ.get(self.env)
            if not value:
                raise UsageError(f"secret environment variable {self.env} is not set")
            return value.strip()
        try:
            return Path(self.file).read_text().strip()
        except OSError as exc:
            raise UsageError(f"cannot read secret file {self.file}: {exc.strerror}") from exc

    def describe(self) -> str:
        return f"env:{self.env}" if self.env else f"file:{self.file}"


@dataclass(frozen=True)
class Backend:
    """One place the model runs. `kind` is internal (our GPU pods) or vendor (a serving endpoint)."""

    kind: Literal["internal", "vendor"]
    description: str = ""
    vendor: str | None = None


@dataclass(frozen=True)
class PrometheusAuth:
    bearer_token: SecretRef | None = None
    username: str | None = None
    password: SecretRef | None = None

    def __post_init__(self):
        if self.bearer_token and (self.username or self.password):
            raise ValueError("use either bearer_token or username/password, not both")
        if bool(self.username) != bool(self.password):
            raise ValueError("basic auth needs both username and password")


@dataclass(frozen=True)
class PrometheusSource:
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

    def __post_init__(self):
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


@dataclass(frozen=True)
class MetricsConfig:
    source: Literal["embedded", "prometheus"] = "embedded"
    prometheus: PrometheusSource = field(default_factory=PrometheusSource)
    # Traffic guards refuse metrics whose newest sample is older than this, on either source.
    max_data_age: str = "5m"

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if not 10 <= parse_duration(self.max_data_age) <= 3650 * 86400:
            raise ValueError("max_data_age must be between 10s and 3650d")

    @property
    def max_data_age_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.max_data_age)


@dataclass(frozen=True)
class SloConfig:
    dir: str = "slos"
    period: str = "28d"

    def __post_init__(self):
        from opsctl.clock import parse_duration

        seconds = parse_duration(self.period)
        if not 86400 <= seconds <= 400 * 86400:
            raise ValueError("period must be between 1d and 400d")

    @property
    def period_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.period)


# ---------------------------------------------------------------------------------------------
# Paging and vendor tickets


def _https_url(name: str, value: str) -> None:
    # The pagerduty client refuses plain http (UrlError); vendor APIs carry credentials: https only.
    if not value.startswith("https://"):
        raise ValueError(f"{name} must be an https:// URL (got {value!r})")


@dataclass(frozen=True)
class RetrySettings:
    """Bounds for calls to a remote service: attempts, jittered backoff, one overall deadline."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    deadline: float = 30.0
    timeout: float = 10.0

    def __post_init__(self):
        if not 1 <= self.max_attempts <= 20:
            raise ValueError("max_attempts must be between 1 and 20")
        if not 0 <= self.base_delay <= self.max_delay <= 300:
            raise ValueError("need 0 <= base_delay <= max_delay <= 300 seconds")
        if not 0 < self.deadline <= 3600:
            raise ValueError("deadline must be between 0 and 3600 seconds")
        if not 0 < self.timeout <= 600:
            raise ValueError("timeout must be between 0 and 600 seconds")


@dataclass(frozen=True)
class PagerDutySettings:
    routing_key: SecretRef | None = None
    # Change events may go to a separate Change Events integration; defaults to routing_key.
    change_routing_key: SecretRef | None = None
    api_token: SecretRef | None = None
    service_id: str | None = None
    escalation_policy_id: str | None = None
    from_email: str | None = None
    events_url: str = "https://events.pagerduty.com"
    api_url: str = "https://api.pagerduty.com"
    # Extra CA bundle to trust (a TLS-inspecting proxy; the loopback fake in tests).
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self):
        _https_url("events_url", self.events_url)
        _https_url("api_url", self.api_url)
        if self.from_email is not None and "@" not in self.from_email:
            raise ValueError(f"from_email must be an email address (got {self.from_email!r})")


@dataclass(frozen=True)
class LocalPagerSettings:
    # Who the local ledger reports as on call, by escalation level (first = level 1).
    oncall: tuple[str, ...] = ("primary on-call (local)", "secondary on-call (local)")


@dataclass(frozen=True)
class PagingConfig:
    provider: Literal["local", "pagerduty"] = "local"
    pagerduty: PagerDutySettings = field(default_factory=PagerDutySettings)
    local: LocalPagerSettings = field(default_factory=LocalPagerSettings)

    def __post_init__(self):
        if self.provider == "pagerduty" and self.pagerduty.routing_key is None:
            raise ValueError("provider pagerduty needs pagerduty.routing_key ({env: ...} or {file: ...})")


SEVERITIES = ("Sev1", "Sev2", "Sev3", "Sev4")  # opsctl's ticket severities, Sev1 = service down


@dataclass(frozen=True)
class ZendeskSettings:
    url: str
    email: str
    api_token: SecretRef
    # Custom fields that carry the category and severity; when severity_field_id is unset the
    # vendor's severity values are Zendesk priorities (urgent, high, normal, low).
    category_field_id: int | None = None
    severity_field_id: int | None = None
    tags: tuple[str, ...] = ("opsctl",)
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self):
        _https_url("url", self.url)
        if "@" not in self.email:
            raise ValueError(f"email must be the API user's email address (got {self.email!r})")


@dataclass(frozen=True)
class JiraSettings:
    url: str
    service_desk_id: str
    api_token: SecretRef
    # cloud: basic auth with email + API token; datacenter: bearer personal access token.
    deployment: Literal["cloud", "datacenter"] = "cloud"
    email: str | None = None
    # "priority" (values are priority names) or a custom field id such as customfield_10050.
    severity_field: str = "priority"
    labels: tuple[str, ...] = ("opsctl",)
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self):
        _https_url("url", self.url)
        if self.deployment == "cloud" and not self.email:
            raise ValueError("deployment cloud needs email (basic auth with email and API token)")
        if self.severity_field != "priority" and not self.severity_field.startswith("customfield_"):
            raise ValueError("severity_field must be 'priority' or a custom field id like customfield_10050")


@dataclass(frozen=True)
class EmailSettings:
    host: str
    from_addr: str
    port: int = 587
    security: Literal["starttls", "ssl", "none"] = "starttls"
    username: str | None = None
    password: SecretRef | None = None
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self):
        if not 1 <= self.port <= 65535:
            raise ValueError("port must be between 1 and 65535")
        if "@" not in self.from_addr:
            raise ValueError(f"from_addr must be an email address (got {self.from_addr!r})")
        if bool(self.username) != bool(self.password):
            raise ValueError("SMTP login needs both username and password")


@dataclass(frozen=True)
class WebhookSettings:
    url: str
    bearer_token: SecretRef | None = None
    # HMAC-SHA256 of the raw body, sent as X-Opsctl-Signature: sha256=<hex>.
    signing_secret: SecretRef | None = None
    # Optional GET endpoint to read a ticket back; {id} is replaced by the ticket id.
    status_url: str | None = None
    ca_file: str | None = None
    retry: RetrySettings = field(default_factory=RetrySettings)

    def __post_init__(self):
        _https_url("url", self.url)
        if self.status_url is not None:
            _https_url("status_url", self.status_url)
            if "{id}" not in self.status_url:
                raise ValueError("status_url must contain {id}")


@dataclass(frozen=True)
class VendorTickets:
    """How tickets reach one vendor: the channel, and opsctl's names -> the vendor's values.

    categories: opsctl category (e.g. inference) -> provider value (a Zendesk field value, a Jira
    request type id, a label in the email subject). severities: Sev1..Sev4 -> provider value.
    """

    categories: dict[str, str]
    severities: dict[str, str]
    provider: Literal["local", "zendesk", "jira", "email", "webhook"] | None = None
    to: str | None = None  # email: the vendor's support address
    group_id: int | None = None  # zendesk: the group (queue) to route to
    tags: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.categories:
            raise ValueError("categories: map at least one opsctl category (e.g. inference)")
        missing = [s for s in SEVERITIES if s not in self.severities]
        unknown = [s for s in self.severities if s not in SEVERITIES]
        if unknown:
            raise ValueError(f"severities: unknown severity {', '.join(unknown)} (use {', '.join(SEVERITIES)})")
        if missing:
            raise ValueError(f"severities: map every severity; missing {', '.join(missing)}")
        for name in self.categories:
            if not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"categories: invalid category name {name!r} (letters, digits, - and _)")
        if self.to is not None and "@" not in self.to:
            raise ValueError(f"to must be an email address (got {self.to!r})")


@dataclass(frozen=True)
class LocalTicketSettings:
    # Who the local ledger reports as the routed group (the embedded environment has no vendor).
    group: str = "vendor support (local)"


@dataclass(frozen=True)
class TicketsConfig:
    provider: Literal["local", "zendesk", "jira", "email", "webhook"] = "local"
    vendors: dict[str, VendorTickets] = field(default_factory=dict)
    local: LocalTicketSettings = field(default_factory=LocalTicketSettings)
    zendesk: ZendeskSettings | None = None
    jira: JiraSettings | None = None
    email: EmailSettings | None = None
    webhook: WebhookSettings | None = None
    # A ticket with the same derived idempotency key within this window is the same ticket.
    dedup_window: str = "24h"

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if not 60 <= parse_duration(self.dedup_window) <= 30 * 86400:
            raise ValueError("dedup_window must be between 1m and 30d")
        for vendor, route in self.vendors.items():
            name = route.provider or self.provider
            if name != "local" and getattr(self, name) is None:
                raise ValueError(f"vendors.{vendor}: provider {name} needs a tickets.{name} section")
            if name == "email" and not route.to:
                raise ValueError(f"vendors.{vendor}: provider email needs 'to' (the vendor's support address)")
            if name == "jira":
                bad = [c for c, v in route.categories.items() if not v.isdigit()]
                if bad:
                    raise ValueError(
                        f"vendors.{vendor}.categories: with jira each category maps to a numeric request type id"
                        f" ({', '.join(bad)})"
                    )

    def provider_for(self, vendor: str) -> str:
        return self.vendor(vendor).provider or self.provider

    def vendor(self, name: str) -> VendorTickets:
        try:
            return self.vendors[name]
        except KeyError:
            known = ", ".join(sorted(self.vendors)) or "none configured"
            raise ConfigError(f"unknown vendor {name!r} (tickets.vendors: {known})") from None


# -- quality: endpoints the probe calls, thresholds, cost ---------------------------------------


def _check_url(what: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{what} must start with http:// or https:// (got {url!r})")


@dataclass(frozen=True)
class DatabricksOAuth:
    """OAuth machine-to-machine: a service principal's client id and secret exchanged for a token.

    `workspace_url` implies the token endpoint `<workspace_url>/oidc/v1/token`; `token_url` names it
    directly. The token is refreshed `refresh_margin` seconds before it expires; `persist` also keeps
    it in the state dir (mode 0600) so consecutive runs do not each exchange credentials.
    """

    client_id: str
    client_secret: SecretRef
    workspace_url: str | None = None
    token_url: str | None = None
    scope: str = "all-apis"
    refresh_margin: float = 300.0
    persist: bool = False

    def __post_init__(self):
        if bool(self.workspace_url) == bool(self.token_url):
            raise ValueError("give exactly one of 'workspace_url' or 'token_url'")
        _check_url("workspace_url" if self.workspace_url else "token_url", self.workspace_url or self.token_url)
        if not self.client_id.strip():
            raise ValueError("client_id must not be empty")
        if not 0 <= self.refresh_margin <= 3000:
            raise ValueError("refresh_margin must be between 0 and 3000 seconds")

    @property
    def endpoint(self) -> str:
        return self.token_url or self.workspace_url.rstrip("/") + "/oidc/v1/token"


@dataclass(frozen=True)
class EndpointAuth:
    """At most one: a bearer token (vLLM --api-key), Databricks OAuth M2M, or a personal access token."""

    bearer: SecretRef | None = None
    databricks_oauth: DatabricksOAuth | None = None
    pat: SecretRef | None = None

    def __post_init__(self):
        given = [n for n in ("bearer", "databricks_oauth", "pat") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"use one auth method, not {' and '.join(given)}")

    @property
    def method(self) -> str:
        for name in ("bearer", "databricks_oauth", "pat"):
            if getattr(self, name) is not None:
                return name
        return "none"


@dataclass(frozen=True)
class Endpoint:
    """A backend's OpenAI-compatible API: vLLM `http://host:8000/v1`, Databricks
    `https://<workspace>/serving-endpoints` (model = the serving endpoint's name)."""

    base_url: str
    model: str
    api: Literal["completions", "chat"] = "completions"
    auth: EndpointAuth = field(default_factory=EndpointAuth)
    max_tokens: int = 256
    verify_tls: bool = True

    def __post_init__(self):
        _check_url("base_url", self.base_url)
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if not 1 <= self.max_tokens <= 32768:
            raise ValueError("max_tokens must be between 1 and 32768")


def _check_share(name: str, value: float | None) -> None:
    if value is not None and not 0 <= value <= 1:
        raise ValueError(f"{name} must be between 0 and 1 (a share, e.g. 0.94)")


@dataclass(frozen=True)
class ProbeSettings:
    """Thresholds that turn a consistency probe into pass or fail, and how hard it may push."""

    min_exact_match_between: float = 0.94
    # With --repeat N (N >= 2): the between-backends threshold as a share of the lower self-agreement
    # (noise floor) of the two, e.g. 0.98; None keeps the absolute min_exact_match_between.
    min_exact_match_between_vs_floor: float | None = None
    min_exact_match_golden: float | None = 0.90
    max_error_rate: float = 0.0
    fail_on_prompt_token_mismatch: bool = True
    normalize: Literal["strip", "none"] = "strip"
    concurrency: int = 4
    timeout: float = 30.0
    retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    deadline: float = 300.0

    def __post_init__(self):
        _check_share("min_exact_match_between", self.min_exact_match_between)
        _check_share("min_exact_match_between_vs_floor", self.min_exact_match_between_vs_floor)
        _check_share("min_exact_match_golden", self.min_exact_match_golden)
        _check_share("max_error_rate", self.max_error_rate)
        if not 1 <= self.concurrency <= 64:
            raise ValueError("concurrency must be between 1 and 64")
        if not 0 < self.timeout <= 600:
            raise ValueError("timeout must be between 0 and 600 seconds")
        if not 0 <= self.retries <= 10:
            raise ValueError("retries must be between 0 and 10")
        if not 0 < self.backoff_base <= self.backoff_cap <= 120:
            raise ValueError("need 0 < backoff_base <= backoff_cap <= 120 seconds")
        if not 0 < self.deadline <= 3600:
            raise ValueError("deadline must be between 0 and 3600 seconds")


@dataclass(frozen=True)
class ShadowSettings:
    """When a backend on shadow traffic is ready to take real traffic, compared with the primary."""

    window: str = "1h"
    rate_window: str = "5m"
    min_requests: int = 1000
    max_error_rate_increase: float = 0.0001
    percentiles: list[float] = field(default_factory=lambda: [0.5, 0.95, 0.99])
    max_latency_ratio: float = 1.2
    min_load_ratio: float = 0.9

    def __post_init__(self):
        from opsctl.clock import parse_duration

        for name in ("window", "rate_window"):
            if parse_duration(getattr(self, name)) < 60:
                raise ValueError(f"{name} must be at least 1m")
        if self.min_requests < 1:
            raise ValueError("min_requests must be at least 1")
        _check_share("max_error_rate_increase", self.max_error_rate_increase)
        if not self.percentiles or any(not 0 < q < 1 for q in self.percentiles):
            raise ValueError("percentiles must be a non-empty list of numbers between 0 and 1 (e.g. 0.99)")
        if self.max_latency_ratio < 1:
            raise ValueError("max_latency_ratio must be at least 1")
        if not 0 < self.min_load_ratio <= 10:
            raise ValueError("min_load_ratio must be between 0 and 10")

    @property
    def window_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.window)

    @property
    def rate_window_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.rate_window)


@dataclass(frozen=True)
class PushSettings:
    """Where `opsctl probe consistency --push` writes its figures."""

    target: Literal["embedded", "pushgateway"] = "embedded"
    pushgateway_url: str = "http://127.0.0.1:9091"
    job: str = "opsctl_probe"
    timeout: float = 10.0

    def __post_init__(self):
        _check_url("pushgateway_url", self.pushgateway_url)
        if not self.job or not all(c.isalnum() or c in "_-." for c in self.job):
            raise ValueError("job must be letters, digits, '_', '-' or '.'")
        if not 0 < self.timeout <= 120:
            raise ValueError("timeout must be between 0 and 120 seconds")


@dataclass(frozen=True)
class QualitySignal:
    """One live quality rule: how far the signal may move, the alert's severity and its `for:`."""

    threshold: float
    severity: Literal["page", "ticket"] = "ticket"
    for_duration: str = "5m"

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if isinstance(self.threshold, bool) or not 0 < self.threshold < 1e6:
            raise ValueError("threshold must be a positive number")
        if not 0 <= parse_duration(self.for_duration) <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")

    @property
    def for_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.for_duration)


@dataclass(frozen=True)
class QualityRules:
    """Live quality rules over the proxy's counters (`opsctl slo rules` writes them, `opsctl quality
    alerts` evaluates them in-process). Prompt tokens per request of each backend are compared with
    the `reference` backend over the same `window` (tokens per request); completion tokens and
    suggestions per answer with the backend's own figure `baseline_offset` earlier (relative change).
    `min_request_rate` (requests/s over the window, on every side compared) keeps sampling noise
    under the thresholds: prompts vary by ~350 tokens, so the mean of n requests is known to about
    350/sqrt(n) tokens; 20,000 requests/s over 10m puts a 0.5-token threshold past 5 sigma."""

    enabled: bool = True
    window: str = "10m"
    baseline_offset: str = "1d"
    min_request_rate: float = 20000.0
    reference: str | None = None  # default: the internal backend
    prompt_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.5, "page", "2m"))
    completion_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "ticket", "10m"))
    suggestions: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "page", "5m"))

    def __post_init__(self):
        from opsctl.clock import parse_duration

        window = parse_duration(self.window)
        if not 60 <= window <= 86400 or window % 10:
            raise ValueError("window must be a multiple of 10s between 1m and 1d")
        if not window <= parse_duration(self.baseline_offset) <= 28 * 86400:
            raise ValueError("baseline_offset must be at least the window and at most 28d")
        if not 0 <= self.min_request_rate < 1e7:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")
        for name in ("completion_tokens", "suggestions"):
            if getattr(self, name).threshold >= 1:
                raise ValueError(f"{name}.threshold is a relative change and must be below 1 (e.g. 0.1 for 10%)")

    @property
    def window_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.window)

    @property
    def baseline_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.baseline_offset)


@dataclass(frozen=True)
class QualityConfig:
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    shadow: ShadowSettings = field(default_factory=ShadowSettings)
    push: PushSettings = field(default_factory=PushSettings)
    rules: QualityRules = field(default_factory=QualityRules)


@dataclass(frozen=True)
class GpuPricing:
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

    def __post_init__(self):
        if self.gpu_hourly_price < 0:
            raise ValueError("gpu_hourly_price must not be negative")
        if self.gpus_per_replica < 1:
            raise ValueError("gpus_per_replica must be at least 1")
        if self.replicas is not None and self.replicas_query is not None:
            raise ValueError("give one of 'replicas' (a count) or 'replicas_query' (PromQL), not both")
        if self.replicas is not None and self.replicas < 0:
            raise ValueError("replicas must not be negative")


@dataclass(frozen=True)
class ProvisionedPricing:
    """Vendor provisioned throughput: a fixed price per hour, whatever the traffic."""

    hourly_price: float

    def __post_init__(self):
        if self.hourly_price < 0:
            raise ValueError("hourly_price must not be negative")


@dataclass(frozen=True)
class TokenPricing:
    """Vendor pay-per-token: prices per million input (prompt) and output (completion) tokens."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self):
        if self.input_per_million < 0 or self.output_per_million < 0:
            raise ValueError("prices must not be negative")


@dataclass(frozen=True)
class BackendCost:
    """Exactly one pricing model per backend."""

    gpu: GpuPricing | None = None
    provisioned: ProvisionedPricing | None = None
    per_token: TokenPricing | None = None

    def __post_init__(self):
        given = [n for n in ("gpu", "provisioned", "per_token") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'gpu', 'provisioned' or 'per_token'")

    @property
    def model(self) -> str:
        return next(n for n in ("gpu", "provisioned", "per_token") if getattr(self, n) is not None)


@dataclass(frozen=True)
class FrontierReference:
    name: str = "frontier model"
    price_per_million: float = 0.0

    def __post_init__(self):
        if self.price_per_million < 0:
            raise ValueError("price_per_million must not be negative")


@dataclass(frozen=True)
class CostConfig:
    currency: str = "USD"
    window: str = "7d"
    min_traffic_share: float = 0.05
    frontier: FrontierReference | None = None
    backends: dict[str, BackendCost] = field(default_factory=dict)

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if parse_duration(self.window) < 3600:
            raise ValueError("window must be at least 1h")
        _check_share("min_traffic_share", self.min_traffic_share)


# ---------------------------------------------------------------------------------------------
# Traffic control, capacity and freezes


def _check_duration(value: str, what: str, *, minimum: int = 0) -> int:
    from opsctl.clock import parse_duration

    seconds = parse_duration(value)
    if seconds < minimum:
        raise ValueError(f"{what} must be at least {minimum}s")
    return seconds


@dataclass(frozen=True)
class KubernetesSettings:
    """How opsctl reaches the cluster: an explicit `host` (e.g. `kubectl proxy`), a kubeconfig, or in-cluster."""

    host: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "default"
    timeout: float = 10.0

    def __post_init__(self):
        if self.host and not self.host.startswith(("http://", "https://")):
            raise ValueError(f"host must start with http:// or https:// (got {self.host!r})")
        if self.host and self.kubeconfig:
            raise ValueError("give either host or kubeconfig, not both")
        if not 0 < self.timeout <= 300:
            raise ValueError("timeout must be between 0 and 300 seconds")


@dataclass(frozen=True)
class FileActuatorSettings:
    path: str = "traffic/split.json"  # relative paths resolve under state_dir


@dataclass(frozen=True)
class ConfigMapSettings:
    name: str = "grammar-traffic-split"
    key: str = "split.json"
    namespace: str | None = None  # default: traffic.kubernetes.namespace


@dataclass(frozen=True)
class IstioSettings:
    name: str = "llm-inference"  # the VirtualService
    namespace: str | None = None
    route: str | None = None  # spec.http[].name; default: the first HTTP route
    api_version: Literal["v1", "v1beta1", "v1alpha3"] = "v1"


@dataclass(frozen=True)
class GatewayApiSettings:
    name: str = "llm-inference"  # the HTTPRoute
    namespace: str | None = None
    rule: int = 0  # index into spec.rules
    api_version: Literal["v1", "v1beta1"] = "v1"

    def __post_init__(self):
        if self.rule < 0:
            raise ValueError("rule must be a rule index (0 or more)")


@dataclass(frozen=True)
class Destination:
    """Where one backend's requests go: Istio destination host, or Gateway API backendRef (a Service) name."""

    host: str
    port: int | None = None
    subset: str | None = None  # Istio only
    namespace: str | None = None  # Gateway API only

    def __post_init__(self):
        if not self.host:
            raise ValueError("host must not be empty")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ValueError(f"port must be between 1 and 65535 (got {self.port})")


@dataclass(frozen=True)
class RateLimit:
    """Flap damping: at most `max_changes` traffic operations per `window` (a ramp counts once)."""

    max_changes: int = 6
    window: str = "1h"

    def __post_init__(self):
        if not 1 <= self.max_changes <= 1000:
            raise ValueError("max_changes must be between 1 and 1000")
        _check_duration(self.window, "window", minimum=1)

    @property
    def window_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.window)


@dataclass(frozen=True)
class RampDefaults:
    step: int = 10  # percentage points per step
    interval: str = "5m"  # wait between steps, then check the receiving backend's burn rate

    def __post_init__(self):
        if not 1 <= self.step <= 100:
            raise ValueError("step must be between 1 and 100")
        _check_duration(self.interval, "interval")


@dataclass(frozen=True)
class TrafficConfig:
    actuator: Literal["file", "configmap", "istio", "gateway-api"] = "file"
    # The split before anything was stored (file actuator); must name configured backends and sum to 100.
    default_split: dict[str, int] = field(default_factory=dict)
    file: FileActuatorSettings = field(default_factory=FileActuatorSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    configmap: ConfigMapSettings = field(default_factory=ConfigMapSettings)
    istio: IstioSettings = field(default_factory=IstioSettings)
    gateway_api: GatewayApiSettings = field(default_factory=GatewayApiSettings)
    destinations: dict[str, Destination] = field(default_factory=dict)
    rate_limit: RateLimit = field(default_factory=RateLimit)
    ramp: RampDefaults = field(default_factory=RampDefaults)
    # A write that meets a concurrent change (file version moved, 409 Conflict) re-reads, re-plans and
    # re-checks its guards, up to this many attempts in all; then exit 5.
    conflict_attempts: int = 5

    def __post_init__(self):
        if not 1 <= self.conflict_attempts <= 20:
            raise ValueError("conflict_attempts must be between 1 and 20")


@dataclass(frozen=True)
class StateConfig:
    """Where state that more than one actor must agree on lives (see docs/design.md).

    `local`: JSON documents under the state dir (one host; the embedded default). `kubernetes`: one
    ConfigMap per document in `namespace`, written with resourceVersion compare-and-swap, so laptops,
    `opsctl serve` replicas and drills share one truth. The connection is `kubernetes` when given,
    else traffic.kubernetes (the actuators' own settings).
    """

    backend: Literal["local", "kubernetes"] = "local"
    namespace: str | None = None  # default: the connection's namespace
    kubernetes: KubernetesSettings | None = None  # default: traffic.kubernetes
    history: int = 50  # change records kept with the split; older ones live in Events and logs

    def __post_init__(self):
        if not 1 <= self.history <= 200:
            raise ValueError("history must be between 1 and 200 (a ConfigMap or annotation holds at most 1 MiB)")


@dataclass(frozen=True)
class CapacityConfig:
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
    ready_timeout: str = "10m"
    poll_interval: str = "5s"
    rate_window: str = "5m"  # request rate = sum(rate(llm_proxy_requests_total[rate_window]))
    # What drives the Deployment's replicas. With `hpa` (autoscaling/v2) or `keda` (a ScaledObject),
    # capacity raises the autoscaler's minimum (minReplicas / minReplicaCount) and puts it back on
    # restore: a scale-subresource patch would be undone at the autoscaler's next sync.
    autoscaler: Literal["none", "hpa", "keda"] = "none"
    autoscaler_name: str | None = None  # default: the Deployment's name

    def __post_init__(self):
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


@dataclass(frozen=True)
class LiveDrillSettings:
    # The only Kubernetes namespaces a live drill may inject faults into (an Istio fault on the
    # vendor route, the internal Deployment scaled down): staging, never production. Empty: none.
    fault_namespaces: tuple[str, ...] = ()
    # `drill run --live --chain`: the Alertmanager and `opsctl serve` the chain goes through
    # (Prometheus is metrics.prometheus.url).
    alertmanager_url: str | None = None  # e.g. http://alertmanager.monitoring.svc:9093
    serve_url: str | None = None  # e.g. http://opsctl.opsctl.svc:9095

    def __post_init__(self):
        import re

        for what, url in (("alertmanager_url", self.alertmanager_url), ("serve_url", self.serve_url)):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"{what} must start with http:// or https:// (got {url!r})")
        for ns in self.fault_namespaces:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", ns):
                raise ValueError(f"fault_namespaces: {ns!r} is not a Kubernetes namespace name")


@dataclass(frozen=True)
class DrillsConfig:
    """Game-day drills: where scenarios live, and what a live drill may touch."""

    scenarios: str = "chaos"  # `opsctl drill list` and `validate` look here (relative to the config file)
    live: LiveDrillSettings = field(default_factory=LiveDrillSettings)


@dataclass(frozen=True)
class FreezeWindow:
    """A change freeze: a fixed range (`start`/`end`, local times in `timezone`) or `cron` plus `duration`."""

    name: str
    timezone: str = "UTC"
    start: str | None = None
    end: str | None = None
    cron: str | None = None
    duration: str | None = None
    reason: str = ""

    def __post_init__(self):
        from opsctl.freeze import validate_window

        validate_window(self)


# ---------------------------------------------------------------------------------------------
# Runbooks


TicketSeverity = Literal["Sev1", "Sev2", "Sev3", "Sev4"]


@dataclass(frozen=True)
class RunbookSeverities:
    """The ticket severity a runbook files with a vendor, by how bad the situation is."""

    outage: TicketSeverity = "Sev1"  # the vendor's endpoint is down
    page: TicketSeverity = "Sev2"  # a page-level burn: users see errors or slow answers now
    ticket: TicketSeverity = "Sev3"  # a slow burn: the budget runs out in days


@dataclass(frozen=True)
class RunbookTickets:
    """Which vendor ticket the runbooks tell on-call to file (mapped through tickets.vendors)."""

    category: str = "inference"  # opsctl category for serving incidents (e.g. inference -> Model Serving)
    auth_category: str | None = None  # auth-layer throttling; default: category
    severity: RunbookSeverities = field(default_factory=RunbookSeverities)


@dataclass(frozen=True)
class RunbooksConfig:
    """Generated runbooks (`opsctl runbook generate|check|list`).

    `base_url` is where the runbooks are published; the alerts' runbook_url links point there, so it
    defaults to alerting.runbook_base_url. `peak_rps` (the whole service's peak request rate) sizes
    the capacity a failover needs; without it the runbooks give the formula and the query instead.
    """

    dir: str = "runbooks"
    base_url: str | None = None
    templates: str = "runbooks/templates"  # overrides of the shipped templates, file by file
    dashboards: dict[str, str] = field(default_factory=dict)  # title -> URL, listed in every runbook
    peak_rps: float | None = None
    golden: str = "golden.jsonl"  # the golden set `opsctl probe consistency` runs in the quality runbook
    tickets: RunbookTickets = field(default_factory=RunbookTickets)

    def __post_init__(self):
        if self.base_url is not None:
            _check_url("base_url", self.base_url)
        for title, url in self.dashboards.items():
            if not title.strip():
                raise ValueError("dashboards: a dashboard needs a title")
            _check_url(f"dashboards.{title}", url)
        if self.peak_rps is not None and not 0 < self.peak_rps < 1e9:
            raise ValueError("peak_rps must be a positive request rate (requests/s of the whole service)")
        for what, value in (("dir", self.dir), ("templates", self.templates), ("golden", self.golden)):
            if not value.strip():
                raise ValueError(f"{what} must not be empty")


@dataclass(frozen=True)
class SeverityAlerting:
    """How one severity's burn-rate alerts behave: `for:` and the minimum-traffic guard."""

    for_duration: str  # Prometheus `for:`: the condition must hold this long before the alert fires
    min_request_rate: float  # valid events per second over the pair's short window, below which it never fires

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if not 0 <= parse_duration(self.for_duration) <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")
        if not 0 <= self.min_request_rate < 1e6:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")

    @property
    def for_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.for_duration)


@dataclass(frozen=True)
class PrometheusRuleMeta:
    """metadata of the PrometheusRule manifest (`opsctl slo rules --format prometheusrule`)."""

    name: str = "opsctl-slo-burn-rate"
    namespace: str = "monitoring"
    labels: dict[str, str] = field(default_factory=dict)  # what prometheus-operator's ruleSelector matches

    def __post_init__(self):
        import re

        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value):
                raise ValueError(f"{what} must be a Kubernetes name (lower case, digits, - and .), got {value!r}")


@dataclass(frozen=True)
class AlertingConfig:
    """Burn-rate alerting: the generated Prometheus rules and the in-process evaluation share it."""

    # Rule evaluation interval: each group's `interval:` and the in-process `for:` steps.
    evaluation_interval: str = "1m"
    runbook_base_url: str = "https://runbooks.example.com/llm-inference"
    rule_group_prefix: str = "opsctl-slo"
    labels: dict[str, str] = field(default_factory=dict)  # extra labels on every alert, e.g. team
    page: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("2m", 1.0))
    ticket: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("15m", 0.1))
    prometheus_rule: PrometheusRuleMeta = field(default_factory=PrometheusRuleMeta)

    def __post_init__(self):
        import re

        from opsctl.clock import parse_duration
        from opsctl.slo.conventions import RESERVED_LABELS

        interval = parse_duration(self.evaluation_interval)
        if not 10 <= interval <= 3600 or interval % 10:
            raise ValueError("evaluation_interval must be a multiple of 10s between 10s and 1h (metrics come every 10s)")
        if not self.runbook_base_url.startswith(("http://", "https://")):
            raise ValueError(f"runbook_base_url must start with http:// or https:// (got {self.runbook_base_url!r})")
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.rule_group_prefix):
            raise ValueError(f"rule_group_prefix must be letters, digits, _ . : -, got {self.rule_group_prefix!r}")
        for name in self.labels:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) or name.startswith("__"):
                raise ValueError(f"labels: {name!r} is not a Prometheus label name")
            if name in RESERVED_LABELS:
                raise ValueError(f"labels: {name!r} is set by opsctl on every alert and cannot be overridden")

    @property
    def interval_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.evaluation_interval)

    def severity(self, name: str) -> SeverityAlerting:
        return {"page": self.page, "ticket": self.ticket}[name]


# ---------------------------------------------------------------------------------------------
# Alert-triggered automation (`opsctl serve`)

# Labels a policy may match on; quality alerts (opsctl.quality.rules) add `category` (quality) and `signal`.
POLICY_LABELS = ("alertname", "severity", "slo", "backend", "service", "category", "signal")


def _check_bind(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"bind must be HOST:PORT, e.g. 127.0.0.1:9095 or 0.0.0.0:9095 (got {value!r})")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class FailoverAction:
    """Move all user traffic away from a backend. `backend` unset: the alert's `backend` label.

    Automated failover goes through the traffic guards like any routine change. During a change
    freeze it counts as an emergency (overriding the freeze, recorded with the incident the policy
    opened) only when `emergency_in_freeze` is true; otherwise the freeze refuses it.
    """

    backend: str | None = None
    emergency_in_freeze: bool = False


@dataclass(frozen=True)
class PageAction:
    severity: Literal["critical", "error", "warning", "info"] = "critical"


@dataclass(frozen=True)
class TicketAction:
    """File the support ticket with the failing backend's vendor (tickets.vendors.<vendor>)."""

    category: str = "inference"
    severity: Literal["Sev1", "Sev2", "Sev3", "Sev4"] = "Sev2"


@dataclass(frozen=True)
class PolicyActions:
    failover: FailoverAction | None = None
    restore: bool = False  # after every matching alert resolved and the hold-down passed
    page: PageAction | None = None
    ticket: TicketAction | None = None
    note: bool = False  # add a note to the incident the policy opened, for every action taken

    def __post_init__(self):
        if self.restore and self.failover is None:
            raise ValueError("restore needs failover in the same policy (it undoes that failover)")
        if not (self.failover or self.page or self.ticket or self.note):
            raise ValueError("give at least one action: failover, page, ticket or note")


@dataclass(frozen=True)
class AutomationPolicy:
    """Alerts whose labels match `match` (exact) and `match_re` (fully anchored regex) trigger `actions`."""

    name: str
    actions: PolicyActions
    match: dict[str, str] = field(default_factory=dict)
    match_re: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False
    hold_down: str | None = None  # default: automation.hold_down

    def __post_init__(self):
        import re

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9_]{0,62}[a-z0-9])?", self.name):
            raise ValueError(f"name must be lower case letters, digits, - and _ (got {self.name!r})")
        if not self.match and not self.match_re:
            raise ValueError("give match or match_re: a policy that matches every alert is refused")
        for kind, labels in (("match", self.match), ("match_re", self.match_re)):
            for label in labels:
                if label not in POLICY_LABELS:
                    raise ValueError(f"{kind}: unknown label {label!r} (known: {', '.join(POLICY_LABELS)})")
        for label, pattern in self.match_re.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"match_re.{label}: invalid regular expression: {exc}") from None
        if self.hold_down is not None:
            _check_automation_duration(self.hold_down, "hold_down")

    @property
    def hold_down_seconds(self) -> int | None:
        from opsctl.clock import parse_duration

        return None if self.hold_down is None else parse_duration(self.hold_down)


def _check_automation_duration(value: str, what: str, maximum: int = 7 * 86400) -> int:
    from opsctl.clock import parse_duration

    seconds = parse_duration(value)
    if not 0 <= seconds <= maximum:
        raise ValueError(f"{what} must be between 0s and {maximum // 86400}d")
    return seconds


@dataclass(frozen=True)
class LeaderElection:
    """Several `opsctl serve` replicas elect one leader on a coordination.k8s.io/v1 Lease; only the
    leader acts (every replica records deliveries in the shared state). `enabled` unset: on exactly
    when `state.backend` is kubernetes (with local state, serve is one replica)."""

    enabled: bool | None = None
    lease_name: str = "opsctl-serve"
    namespace: str | None = None  # default: traffic.kubernetes.namespace
    # The Lease is taken over once its holder has not renewed it for lease_duration; the holder
    # stops acting when it could not renew for renew_deadline (shorter), so two never act at once.
    lease_duration: str = "15s"
    renew_deadline: str = "10s"
    retry_period: str = "2s"
    identity: str | None = None  # default: $POD_NAME (the Downward API), else the host name
    # Every replica records deliveries in the shared state, so every one is Ready by default (a
    # rolling update needs its new pods Ready). true: only the leader is Ready (Service -> leader).
    ready_only_when_leader: bool = False

    def __post_init__(self):
        import re

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", self.lease_name):
            raise ValueError(f"lease_name must be a Kubernetes object name (got {self.lease_name!r})")
        duration = _check_automation_duration(self.lease_duration, "lease_duration", 3600)
        deadline = _check_automation_duration(self.renew_deadline, "renew_deadline", 3600)
        retry = _check_automation_duration(self.retry_period, "retry_period", 3600)
        if not 1 <= retry < deadline < duration:
            raise ValueError("need 1s <= retry_period < renew_deadline < lease_duration")
        if self.identity is not None and not self.identity.strip():
            raise ValueError("identity must not be empty")

    @property
    def seconds(self) -> tuple[int, int, int]:
        """(lease_duration, renew_deadline, retry_period) in seconds."""
        from opsctl.clock import parse_duration

        return (parse_duration(self.lease_duration), parse_duration(self.renew_deadline),
                parse_duration(self.retry_period))


@dataclass(frozen=True)
class AutomationConfig:
    """`opsctl serve`: webhook receiver for Alertmanager and PagerDuty, acting by policy."""

    bind: str = "127.0.0.1:9095"
    # Alertmanager authenticates with `Authorization: Bearer <token>` or basic auth
    # (basic_auth_username, password = the token). Default: $OPSCTL_WEBHOOK_TOKEN.
    token: SecretRef | None = None
    basic_auth_username: str = "alertmanager"
    # PagerDuty webhook v3 signing secrets; several during a rotation (any one verifies).
    pagerduty_secrets: list[SecretRef] = field(default_factory=list)
    queue_size: int = 1000  # deliveries waiting for a worker; past it the sender gets 503 and retries
    workers: int = 2  # action threads; events about one backend always go to the same worker, in order
    body_limit: int = 1048576  # bytes; larger bodies get 413
    # Request headers, and then the body, must each arrive within this (slow clients are cut off).
    read_timeout: str = "10s"
    max_connections: int = 4096  # open connections; past it uvicorn answers 503
    pagerduty_max_age: str = "1h"  # signed PagerDuty events older than this are refused (replays)
    hold_down: str = "10m"  # wait after the last matching alert resolved before restoring traffic
    restore_retry: str = "1m"  # wait before retrying a restore a guard refused or that failed
    dry_run: bool = False  # every policy: decide and record, change nothing
    policies: list[AutomationPolicy] = field(default_factory=list)
    leader_election: LeaderElection = field(default_factory=LeaderElection)

    def __post_init__(self):
        _check_bind(self.bind)
        if not 1 <= self.queue_size <= 100000:
            raise ValueError("queue_size must be between 1 and 100000")
        if not 1 <= self.workers <= 32:
            raise ValueError("workers must be between 1 and 32")
        if not 1024 <= self.body_limit <= 64 * 1048576:
            raise ValueError("body_limit must be between 1024 and 67108864 bytes")
        if not 1 <= _check_automation_duration(self.read_timeout, "read_timeout", 300):
            raise ValueError("read_timeout must be at least 1s")
        if not 64 <= self.max_connections <= 100000:
            raise ValueError("max_connections must be between 64 and 100000")
        if _check_automation_duration(self.pagerduty_max_age, "pagerduty_max_age") < 60:
            raise ValueError("pagerduty_max_age must be at least 1m")
        if not self.basic_auth_username or ":" in self.basic_auth_username:
            raise ValueError("basic_auth_username must be non-empty and contain no ':'")
        _check_automation_duration(self.hold_down, "hold_down")
        if _check_automation_duration(self.restore_retry, "restore_retry") < 1:
            raise ValueError("restore_retry must be at least 1s")
        names = [p.name for p in self.policies]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"policies: duplicate policy name(s): {', '.join(duplicates)}")

    @property
    def bind_address(self) -> tuple[str, int]:
        return _check_bind(self.bind)

    @property
    def hold_down_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.hold_down)

    @property
    def restore_retry_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.restore_retry)

    @property
    def read_timeout_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.read_timeout)

    @property
    def pagerduty_max_age_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.pagerduty_max_age)


@dataclass(frozen=True)
class Config:
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

    def __post_init__(self):
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
        self._check_runbooks()
        reference = self.quality.rules.reference
        if reference is not None and reference not in self.backends:
            raise ValueError(f"quality.rules.reference: unknown backend {reference!r}"
                             f" (known: {', '.join(sorted(self.backends))})")
        self._check_automation()
        self._fill_gpu_replicas()

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


# ---------------------------------------------------------------------------------------------
# Loading


def find_config_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("OPSCTL_CONFIG")
    if env:
        return Path(env)
    local = Path("opsctl.yaml")
    return local if local.is_file() else None


def load_config(explicit: str | None = None) -> Config:
    path = find_config_path(explicit)
    if path is None:
        # The built-in default keeps its SLOs in the package, its state in ./.opsctl.
        cfg = load_config_file(BUILTIN_CONFIG)
        return dataclasses.replace(
            cfg, source_path="<built-in>", state_dir=str(Path.cwd() / cfg.state_dir)
        )
    return load_config_file(path)


def load_yaml_file(path: Path, what: str = "file") -> Any:
    """Parse a YAML file; syntax errors name the file and line."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {exc.start}, line {line}: "
                          f"{exc.object[exc.start:exc.start + 1]!r})", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from exc
    try:
        return yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: YAML syntax error at {where}: {' '.join(str(problem).split())}") from exc
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp like 2026-02-30
        raise ConfigError(f"{path}: YAML value error: {' '.join(str(exc).split())}") from exc
    except RecursionError:
        raise ConfigError(f"{path}: YAML nested too deeply") from None


@functools.lru_cache(maxsize=1)
def _strict_loader():
    """A SafeLoader that refuses duplicate keys, which PyYAML would silently let the last one win."""
    import yaml

    # libyaml's loader when present: ~10x faster, which the CLI's fast paths notice (traffic set
    # reads the SLO files for its budget guard).
    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return StrictLoader


def load_config_file(path: Path) -> Config:
    data = load_yaml_file(path, "config file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of sections, got {type(data).__name__}")
    data = dict(data)
    data["source_path"] = str(path)
    data["base_dir"] = str(path.resolve().parent)
    return build(Config, data, str(path))


def build(cls: type, data: Any, filename: str):
    """Build dataclass `cls` from raw data, collecting every problem before failing."""
    problems: list[str] = []
    result = _build(cls, data, "", problems)
    if problems:
        raise ConfigError(f"{filename}: invalid configuration", problems=[f"{filename}: {p}" for p in problems])
    return result


def _where(path: str) -> str:
    return path or "(top level)"


def _build(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _build(options[0], value, path, problems)
        for option in options:
            trial: list[str] = []
            built = _build(option, value, path, trial)
            if not trial:
                return built
        problems.append(f"{_where(path)}: expected {' or '.join(_name(o) for o in options)}, got {_show(value)}")
        return None
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            problems.append(f"{_where(path)}: must be one of {allowed}, got {_show(value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            problems.append(f"{_where(path)}: expected a list, got {_show(value)}")
            return []
        item_tp = args[0] if args else Any
        items = [_build(item_tp, v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
            return {}
        key_tp, val_tp = args if args else (Any, Any)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append(f"{_where(path)}: keys must be strings, got {k!r}")
                continue
            out[k] = _build(val_tp, v, f"{path}.{k}" if path else k, problems)
        return out
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, path, problems)
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{_where(path)}: expected true or false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{_where(path)}: expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{_where(path)}: expected a number, got {_show(value)}")
            return value
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{_where(path)}: expected a string, got {_show(value)}")
        return value
    raise TypeError(f"unsupported type in config model: {tp!r}")


def _build_dataclass(cls: type, value: Any, path: str, problems: list[str]) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        if cls is SecretRef:  # an inline secret: say so without echoing it
            problems.append(f"{_where(path)}: expected a mapping {{env: NAME}} or {{file: PATH}}, got a "
                            f"{type(value).__name__} (secret values do not belong in the config; not shown)")
        else:
            problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    public = {n for n, f in fields.items() if not f.metadata.get("internal")}
    for key in value:
        if key not in fields or (key not in public and not (path == "" and cls is Config)):
            known = ", ".join(sorted(public))
            problems.append(f"{path + '.' if path else ''}{key}: unknown key (known keys: {known})")
    kwargs = {}
    before = len(problems)
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in value:
            kwargs[name] = _build(hints[name], value[name], sub, problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: required key is missing")
    if len(problems) > before:
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        problems.append(f"{_where(path)}: {exc}")
        return None


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


# ---------------------------------------------------------------------------------------------
# Rendering (secrets redacted)


def to_dict(obj: Any) -> Any:
    """Model -> plain data for `config show`. SecretRefs show where the secret lives, never a value."""
    if isinstance(obj, SecretRef):
        return {"env": obj.env} if obj.env else {"file": obj.file}
    if dataclasses.is_dataclass(obj):
        return {
            f.name: to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj
