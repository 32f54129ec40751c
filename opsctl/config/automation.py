"""Alert-triggered automation (`opsctl serve`): policies, actions, leader election."""

from __future__ import annotations

from typing import Literal

from opsctl.config.types import SecretRef, _check_automation_duration, _check_bind
from opsctl.model import Duration, Model, field

# Labels a policy may match on: every alert opsctl generates has a fixed `category` (availability,
# latency, quality, absent); fast-burn pages add `tier: fast`; quality alerts add `signal`.
POLICY_LABELS = ("alertname", "severity", "slo", "backend", "service", "category", "tier", "signal")


class FailoverAction(Model):
    """Move all user traffic away from a backend. `backend` unset: the alert's `backend` label.

    Automated failover goes through the traffic guards like any routine change. During a change
    freeze it counts as an emergency (overriding the freeze, recorded with the incident the policy
    opened) only when `emergency_in_freeze` is true; otherwise the freeze refuses it.
    """

    backend: str | None = None
    emergency_in_freeze: bool = False


class PageAction(Model):
    severity: Literal["critical", "error", "warning", "info"] = "critical"


class TicketAction(Model):
    """File the support ticket with the failing backend's vendor (tickets.vendors.<vendor>).

    `category` unset (the default, and what the shipped policies do): from the cause of the alert
    that opened the episode, through runbooks.tickets (auth -> auth_category, anything else ->
    category), so a throttling incident reaches the platform team and a 5xx outage the serving team."""

    category: str | None = None
    severity: Literal["Sev1", "Sev2", "Sev3", "Sev4"] = "Sev2"


class PolicyActions(Model):
    failover: FailoverAction | None = None
    restore: bool = False  # after every matching alert resolved and the hold-down passed
    page: PageAction | None = None
    ticket: TicketAction | None = None
    note: bool = False  # add a note to the incident the policy opened, for every action taken

    def __post_init__(self) -> None:
        if self.restore and self.failover is None:
            raise ValueError("restore needs failover in the same policy (it undoes that failover)")
        if not (self.failover or self.page or self.ticket or self.note):
            raise ValueError("give at least one action: failover, page, ticket or note")


class AutomationPolicy(Model):
    """Alerts whose labels match `match` (exact) and `match_re` (fully anchored regex) trigger `actions`.

    `causes` (from opsctl.slo.conventions.CAUSES) narrows that to alerts whose `cause` annotation is
    one of them; an alert that opened this policy's episode stays in it when its cause flips later
    (the cause at opening is the episode's cause), and one that opened another cause-narrowed
    policy's episode never opens this one's."""

    name: str
    actions: PolicyActions
    match: dict[str, str] = field(default_factory=dict)
    match_re: dict[str, str] = field(default_factory=dict)
    causes: list[str] = field(default_factory=list)
    dry_run: bool = False
    hold_down: Duration | None = None  # default: automation.hold_down

    def __post_init__(self) -> None:
        import re

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9_]{0,62}[a-z0-9])?", self.name):
            raise ValueError(f"name must be lower case letters, digits, - and _ (got {self.name!r})")
        if not self.match and not self.match_re:
            raise ValueError("give match or match_re: a policy that matches every alert is refused")
        for kind, labels in (("match", self.match), ("match_re", self.match_re)):
            for label in labels:
                if label not in POLICY_LABELS:
                    raise ValueError(f"{kind}: unknown label {label!r} (known: {', '.join(POLICY_LABELS)})")
        from opsctl.slo.conventions import CAUSES

        unknown = [c for c in self.causes if c not in CAUSES]
        if unknown:
            raise ValueError(f"causes: unknown cause(s) {', '.join(map(repr, unknown))} (known: {', '.join(CAUSES)})")
        for label, pattern in self.match_re.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"match_re.{label}: invalid regular expression: {exc}") from None
        if self.hold_down is not None:
            _check_automation_duration(self.hold_down, "hold_down")

    @property
    def hold_down_seconds(self) -> int | None:
        return None if self.hold_down is None else self.hold_down.seconds


class LeaderElection(Model):
    """Several `opsctl serve` replicas elect one leader on a coordination.k8s.io/v1 Lease; only the
    leader acts (every replica records deliveries in the shared state). `enabled` unset: on exactly
    when `state.backend` is kubernetes (with local state, serve is one replica)."""

    enabled: bool | None = None
    lease_name: str = "opsctl-serve"
    namespace: str | None = None  # default: traffic.kubernetes.namespace
    # The Lease is taken over once its holder has not renewed it for lease_duration; the holder
    # stops acting when it could not renew for renew_deadline (shorter), so two never act at once.
    # Sized for a slow API server: renewals back to back keep the Lease while calls take < 7.5 s.
    lease_duration: Duration = Duration("20s")
    renew_deadline: Duration = Duration("15s")
    retry_period: Duration = Duration("2s")
    identity: str | None = None  # default: $POD_NAME (the Downward API), else the host name
    # Every replica records deliveries in the shared state, so every one is Ready by default (a
    # rolling update needs its new pods Ready). true: only the leader is Ready (Service -> leader).
    ready_only_when_leader: bool = False

    def __post_init__(self) -> None:
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
        return (self.lease_duration.seconds, self.renew_deadline.seconds,
                self.retry_period.seconds)


class RestoreSettings(Model):
    """`automation.restore`: the canary restore (opsctl/traffic/canary.py). Set (even `restore: {}`),
    a restoring policy returns traffic as soon as the backend's fast-tier windows are healthy, not
    after its slow pages resolve and the hold-down: first `canary` points, judged for `judge` on their
    own burn over the fast tier's windows, then the rest in `steps` (percent of what is still to come
    back, the last 100), each held `step_judge`. A move that burns at `fail_factor` or more (unset:
    the fast tier's page factor, alerting.fast.factor) fails back at once; the next canary waits
    `backoff`, doubled after every failed one, at most `backoff_max`. A backend whose pods opsctl counts
    waits, besides, until they are all ready and have been for `steady`. Unset: the hold-down restore."""

    canary: int = 5  # points of user traffic the canary moves back
    judge: Duration = Duration("5m")  # the canary's own burn is watched this long before the rest comes back
    steps: list[int] = field(default_factory=lambda: [25, 50, 100])  # % of the rest, cumulative
    step_judge: Duration = Duration("1m")  # each step is held (and watched) this long before the next
    fail_factor: float | None = None  # burn rate that fails a move; unset: alerting.fast.factor
    backoff: Duration = Duration("1m")  # wait before the first canary after a failover, and after a failed one
    backoff_max: Duration = Duration("5m")  # the wait doubles per failed canary, up to this
    # A backend whose pods opsctl can count (capacity.backend): no canary until all its desired
    # replicas are ready and have stayed so this long since one was last seen missing.
    steady: Duration = Duration("5m")

    def __post_init__(self) -> None:
        if _check_automation_duration(self.steady, "steady", 86400) > 3600:
            raise ValueError("steady must be between 0s and 1h")
        if not 1 <= self.canary <= 50:
            raise ValueError(f"canary must be between 1 and 50 points (got {self.canary})")
        if not 60 <= _check_automation_duration(self.judge, "judge", 3600):
            raise ValueError("judge must be between 1m and 1h (the fast tier's short window is 1m)")
        if not 10 <= _check_automation_duration(self.step_judge, "step_judge", 3600):
            raise ValueError("step_judge must be between 10s and 1h")
        steps = list(self.steps)
        if not steps or steps[-1] != 100 or any(not 1 <= s <= 100 for s in steps) or steps != sorted(set(steps)):
            raise ValueError(f"steps must rise strictly from 1 to 100 and end at 100 (got {steps})")
        if self.fail_factor is not None and not 1 < self.fail_factor < 1e6:
            raise ValueError(f"fail_factor must be a burn rate above 1 (got {self.fail_factor}); unset: alerting.fast.factor")
        backoff = _check_automation_duration(self.backoff, "backoff", 86400)
        most = _check_automation_duration(self.backoff_max, "backoff_max", 86400)
        if not 60 <= backoff <= most:  # >= the fast tier's short window: a failed canary's errors leave it first
            raise ValueError("need 1m <= backoff <= backoff_max")


class IncidentSettings(Model):
    """How alerts group into incidents (opsctl/incident/grouping.py). `quiet`: the correlation
    window, an incident whose alerts all resolved closes this long after its last alert (an alert
    starting inside it joins it again). `paging_route_key`: the route key of the Alertmanager route
    that pages, grouped by service (`opsctl alerts route` generates it); the PagerDuty dedup key of
    an incident is Alertmanager's for that route's group of the service."""

    quiet: Duration = Duration("15m")
    paging_route_key: str = '{}/{severity="page"}'

    def __post_init__(self) -> None:
        if _check_automation_duration(self.quiet, "incident.quiet") < 60:
            raise ValueError("incident.quiet must be at least 1m")
        if not self.paging_route_key.startswith("{}"):
            raise ValueError("incident.paging_route_key must be an Alertmanager route key, e.g. {}/{severity=\"page\"}")


class AutomationConfig(Model):
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
    read_timeout: Duration = Duration("10s")
    max_connections: int = 4096  # open connections; past it uvicorn answers 503
    pagerduty_max_age: Duration = Duration("1h")  # signed PagerDuty events older than this are refused (replays)
    hold_down: Duration = Duration("10m")  # wait after the last matching alert resolved before restoring traffic
    restore_retry: Duration = Duration("1m")  # wait before retrying a restore a guard refused or that failed
    restore: RestoreSettings | None = None  # the canary restore; unset: the hold-down restore
    dry_run: bool = False  # every policy: decide and record, change nothing
    policies: list[AutomationPolicy] = field(default_factory=list)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    incident: IncidentSettings = field(default_factory=IncidentSettings)

    def __post_init__(self) -> None:
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
        return self.hold_down.seconds

    @property
    def restore_retry_seconds(self) -> int:
        return self.restore_retry.seconds

    @property
    def read_timeout_seconds(self) -> int:
        return self.read_timeout.seconds

    @property
    def pagerduty_max_age_seconds(self) -> int:
        return self.pagerduty_max_age.seconds
