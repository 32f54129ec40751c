"""Quality: the endpoints the probe calls, probe/shadow/push settings, quality signals and rules."""

from __future__ import annotations

from typing import Literal

from opsctl.config.types import SecretRef, _check_share, _check_url
from opsctl.model import Duration, Model, field

class DatabricksOAuth(Model):
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


class EndpointAuth(Model):
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


class Endpoint(Model):
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


class ProbeSettings(Model):
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


class ShadowSettings(Model):
    """When a backend on shadow traffic is ready to take real traffic, compared with the primary."""

    window: Duration = "1h"
    rate_window: Duration = "5m"
    min_requests: int = 1000
    max_error_rate_increase: float = 0.0001
    percentiles: list[float] = field(default_factory=lambda: [0.5, 0.95, 0.99])
    max_latency_ratio: float = 1.2
    min_load_ratio: float = 0.9

    def __post_init__(self):
        for name in ("window", "rate_window"):
            if getattr(self, name).seconds < 60:
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
        return self.window.seconds

    @property
    def rate_window_seconds(self) -> int:
        return self.rate_window.seconds


class PushSettings(Model):
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


class QualitySignal(Model):
    """One live quality rule: how far the signal may move, the alert's severity and its `for:`."""

    threshold: float
    severity: Literal["page", "ticket"] = "ticket"
    for_duration: Duration = "5m"

    def __post_init__(self):
        if isinstance(self.threshold, bool) or not 0 < self.threshold < 1e6:
            raise ValueError("threshold must be a positive number")
        if not 0 <= self.for_duration.seconds <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")

    @property
    def for_seconds(self) -> int:
        return self.for_duration.seconds


class QualityRules(Model):
    """Live quality rules over the proxy's counters (`opsctl slo rules` writes them, `opsctl quality
    alerts` evaluates them in-process). Prompt tokens per request of each backend are compared with
    the `reference` backend over the same `window` (tokens per request); completion tokens and
    suggestions per answer with the backend's own figure `baseline_offset` earlier (relative change).
    `min_request_rate` (requests/s over the window, on every side compared) keeps sampling noise
    under the thresholds: prompts vary by ~350 tokens, so the mean of n requests is known to about
    350/sqrt(n) tokens; 20,000 requests/s over 10m puts a 0.5-token threshold past 5 sigma."""

    enabled: bool = True
    window: Duration = "10m"
    baseline_offset: Duration = "1d"
    min_request_rate: float = 20000.0
    reference: str | None = None  # default: the internal backend
    prompt_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.5, "page", "2m"))
    completion_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "ticket", "10m"))
    suggestions: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "page", "5m"))

    def __post_init__(self):
        window = self.window.seconds
        if not 60 <= window <= 86400 or window % 10:
            raise ValueError("window must be a multiple of 10s between 1m and 1d")
        if not window <= self.baseline_offset.seconds <= 28 * 86400:
            raise ValueError("baseline_offset must be at least the window and at most 28d")
        if not 0 <= self.min_request_rate < 1e7:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")
        for name in ("completion_tokens", "suggestions"):
            if getattr(self, name).threshold >= 1:
                raise ValueError(f"{name}.threshold is a relative change and must be below 1 (e.g. 0.1 for 10%)")

    @property
    def window_seconds(self) -> int:
        return self.window.seconds

    @property
    def baseline_seconds(self) -> int:
        return self.baseline_offset.seconds


class QualityConfig(Model):
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    shadow: ShadowSettings = field(default_factory=ShadowSettings)
    push: PushSettings = field(default_factory=PushSettings)
    rules: QualityRules = field(default_factory=QualityRules)
