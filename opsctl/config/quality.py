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

    def __post_init__(self) -> None:
        if bool(self.workspace_url) == bool(self.token_url):
            raise ValueError("give exactly one of 'workspace_url' or 'token_url'")
        _check_url("workspace_url" if self.workspace_url else "token_url", self.workspace_url or self.token_url or "")
        if not self.client_id.strip():
            raise ValueError("client_id must not be empty")
        if not 0 <= self.refresh_margin <= 3000:
            raise ValueError("refresh_margin must be between 0 and 3000 seconds")

    @property
    def endpoint(self) -> str:
        return self.token_url or (self.workspace_url or "").rstrip("/") + "/oidc/v1/token"


class EndpointAuth(Model):
    """At most one: a bearer token (vLLM --api-key), Databricks OAuth M2M, or a personal access token."""

    bearer: SecretRef | None = None
    databricks_oauth: DatabricksOAuth | None = None
    pat: SecretRef | None = None

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
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

    window: Duration = Duration("1h")
    rate_window: Duration = Duration("5m")
    min_requests: int = 1000
    max_error_rate_increase: float = 0.0001
    percentiles: list[float] = field(default_factory=lambda: [0.5, 0.95, 0.99])
    max_latency_ratio: float = 1.2
    min_load_ratio: float = 0.9

    def __post_init__(self) -> None:
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

    def __post_init__(self) -> None:
        _check_url("pushgateway_url", self.pushgateway_url)
        if not self.job or not all(c.isalnum() or c in "_-." for c in self.job):
            raise ValueError("job must be letters, digits, '_', '-' or '.'")
        if not 0 < self.timeout <= 120:
            raise ValueError("timeout must be between 0 and 120 seconds")


# One request's spread of each compared figure (QualitySignal.spread's default), from the LLM
# proxy's traffic: prompt tokens per request sd ~350 tokens; completion tokens per answer sd ~140 of
# a mean ~180 (cv 0.78); suggestions per answer about Poisson with mean 3 (cv 1/sqrt(3) = 0.58).
QUALITY_SPREADS = {"prompt_tokens": 350.0, "completion_tokens": 0.78, "suggestions": 0.58}


class QualitySignal(Model):
    """One live quality rule: how far the signal may move, the alert's severity and its `for:`.

    `spread` is one request's spread of what is compared: the standard deviation of prompt tokens
    per request (tokens), or for completion tokens and suggestions per answer their coefficient of
    variation (standard deviation over mean). With the requests over the window on each side
    compared (n1, n2), the compared figure's noise is spread x sqrt(1/n1 + 1/n2); the rule holds
    its alert (and says it is suppressed) until that is below threshold / quality.rules.noise_sigmas."""

    threshold: float
    severity: Literal["page", "ticket"] = "ticket"
    for_duration: Duration = Duration("5m")
    spread: float | None = None  # default per signal: QUALITY_SPREADS

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not 0 < self.threshold < 1e6:
            raise ValueError("threshold must be a positive number")
        if self.spread is not None and not 0 < self.spread < 1e6:
            raise ValueError("spread must be a positive number (per request)")
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
    The minimum traffic comes from sampling noise (QualitySignal.spread): prompts vary by ~350 tokens,
    so the mean of n requests is known to about 350/sqrt(n) tokens, and two sides' difference to
    350 x sqrt(1/n1 + 1/n2); a rule fires only where its threshold clears `noise_sigmas` of that
    (a 0.5-token shift at an 80/20 split over 10m: about 128,000 requests/s)."""

    enabled: bool = True
    window: Duration = Duration("10m")
    baseline_offset: Duration = Duration("1d")
    noise_sigmas: float = 5.0  # how many standard deviations of sampling noise the threshold must clear
    min_request_rate: float = 0.0  # an extra floor, requests/s on every side (the noise guard is the minimum)
    reference: str | None = None  # default: the internal backend
    prompt_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.5, "page", Duration("2m")))
    completion_tokens: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "ticket", Duration("10m")))
    suggestions: QualitySignal = field(default_factory=lambda: QualitySignal(0.1, "page", Duration("5m")))

    def __post_init__(self) -> None:
        window = self.window.seconds
        if not 60 <= window <= 86400 or window % 10:
            raise ValueError("window must be a multiple of 10s between 1m and 1d")
        if not window <= self.baseline_offset.seconds <= 28 * 86400:
            raise ValueError("baseline_offset must be at least the window and at most 28d")
        if not 0 <= self.min_request_rate < 1e7:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")
        if not 0 < self.noise_sigmas <= 20:
            raise ValueError("noise_sigmas must be between 0 and 20")
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
