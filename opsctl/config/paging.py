"""Paging: PagerDuty or the local ledger, and the retry bounds of remote calls."""

from __future__ import annotations

from typing import Literal

from opsctl.config.types import SecretRef, _https_url
from opsctl.model import Model, field

class RetrySettings(Model):
    """Bounds for calls to a remote service: attempts, jittered backoff, one overall deadline."""

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0
    deadline: float = 30.0
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 20:
            raise ValueError("max_attempts must be between 1 and 20")
        if not 0 <= self.base_delay <= self.max_delay <= 300:
            raise ValueError("need 0 <= base_delay <= max_delay <= 300 seconds")
        if not 0 < self.deadline <= 3600:
            raise ValueError("deadline must be between 0 and 3600 seconds")
        if not 0 < self.timeout <= 600:
            raise ValueError("timeout must be between 0 and 600 seconds")


class PagerDutySettings(Model):
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

    def __post_init__(self) -> None:
        _https_url("events_url", self.events_url)
        _https_url("api_url", self.api_url)
        if self.from_email is not None and "@" not in self.from_email:
            raise ValueError(f"from_email must be an email address (got {self.from_email!r})")


class LocalPagerSettings(Model):
    # Who the local ledger reports as on call, by escalation level (first = level 1).
    oncall: tuple[str, ...] = ("primary on-call (local)", "secondary on-call (local)")


class PagingConfig(Model):
    provider: Literal["local", "pagerduty"] = "local"
    pagerduty: PagerDutySettings = field(default_factory=PagerDutySettings)
    local: LocalPagerSettings = field(default_factory=LocalPagerSettings)

    def __post_init__(self) -> None:
        if self.provider == "pagerduty" and self.pagerduty.routing_key is None:
            raise ValueError("provider pagerduty needs pagerduty.routing_key ({env: ...} or {file: ...})")
