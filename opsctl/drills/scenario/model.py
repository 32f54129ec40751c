"""The scenario model the engine runs: the sections as read (parse.py builds them), with the
vocabulary a scenario may use. The simple sections are read into these classes directly, their
fields' checks declared here (checks.py); actions, probes, stop conditions and expectations are
tagged variants (variants.py) turned into the engine's `Activity`, `Probe`, `StopCondition` and
`Expectation`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsctl.drills.scenario.checks import (DEFAULT_START, checked, dur, duration, flag, instant, number,
                                           integer, rfc3339, text)

SCENARIO_VERSION = 1
SEVERITIES = ("Sev1", "Sev2", "Sev3", "Sev4")
PAGE_SEVERITIES = ("critical", "error", "warning", "info")
STATUS_LEVELS = ("ok", "ticket", "page", "unknown")

# Fault kinds are the simulator's incident kinds; their tunable parameter and range.
# A default of None: the parameter is left out unless given (the simulator's incident has its default).
FAULT_PARAMS: dict[str, dict[str, tuple[float | None, float, float]]] = {
    "vendor-5xx": {"rate": (0.2, 0.0, 1.0)},
    "latency-spike": {"factor": (3.0, 1.0, 100.0)},
    "auth-throttling": {"rate": (0.3, 0.0, 1.0), "auth_rate": (0.0, 0.0, 1.0)},  # 429s, and 401s (auth_error)
    "latency-tail": {"share": (0.05, 0.0, 1.0), "factor": (6.0, 1.0, 100.0)},  # opsctl/drills/chain/faults.py
    "gpu-capacity-loss": {"rate": (0.1, 0.0, 1.0), "factor": (2.0, 1.0, 100.0),
                          "timeout_share": (None, 0.0, 1.0)},  # of the failed: timeouts (the rest 503s); unset: 0.8
    "quality-regression": {"prompt_shift": (-1.0, -100.0, 100.0), "rate": (0.3, 0.0, 1.0),
                           "suggestions": (0.5, 0.0, 10.0), "completion": (1.0, 0.0, 10.0)},
    "oauth-token-failure": {"rate": (1.0, 0.0, 1.0)},  # opsctl/drills/chain/faults.py
    "vendor-throttling": {"rate": (0.3, 0.0, 1.0)},  # 503/429 with Retry-After: outcome throttled, cause capacity
    "vendor-timeout": {"rate": (0.1, 0.0, 1.0)},  # no answer before the client timeout
    "slow-token-endpoint": {"share": (0.2, 0.0, 1.0), "factor": (8.0, 1.0, 100.0), "auth_rate": (0.1, 0.0, 1.0),
                            "timeout_rate": (0.03, 0.0, 1.0)},
}
FAULT_BACKEND_KIND = {"vendor-5xx": "vendor", "latency-spike": None, "latency-tail": None, "auth-throttling": "vendor",
                      "gpu-capacity-loss": "internal", "quality-regression": "vendor", "oauth-token-failure": "vendor",
                     "vendor-throttling": "vendor", "vendor-timeout": "vendor", "slow-token-endpoint": "vendor"}
# Live injection per kind: an Istio fault on the backend's route, or the Deployment scaled down.
LIVE_ROUTE_KINDS = ("vendor-5xx", "auth-throttling", "latency-spike", "latency-tail", "oauth-token-failure",
                    "vendor-throttling", "vendor-timeout", "slow-token-endpoint")
LIVE_DELAY_KINDS = ("latency-spike", "latency-tail", "vendor-timeout", "slow-token-endpoint")  # an Istio delay
LIVE_SCALE_KINDS = ("gpu-capacity-loss",)

PROBES = ("slo-status", "alerts-firing", "traffic-split", "freeze-active")
METHOD_ACTIONS = ("inject-fault", "wait", "file-ticket", "page", "traffic-set", "failover")
RESPONDER_ACTIONS = ("failover", "file-ticket")
ROLLBACKS = ("remove-faults", "restore-traffic", "resolve-pages")
STOP_CONDITIONS = ("budget-spent", "budget-remaining", "real-incident-open", "alert-firing")
EXPECTATIONS = ("detected", "paged", "acknowledged", "escalated", "failover-applied", "vendor-ticket",
                "vendor-responded", "slo-recovered", "change-refused", "pages", "tickets", "no-ticket", "no-flap",
                "page-names")
GUARDS = ("bounds", "freeze", "rate", "budget", "capacity")



# ---------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class LiveRouteFault:
    """An Istio fault on the HTTP route of a VirtualService that carries only this backend's traffic."""

    namespace: str
    virtual_service: str
    route: str | None = None  # route name; None: the first
    percentage: float | None = None  # None: the fault's rate x 100 (abort) or 100 (delay)
    http_status: int | None = None  # None: 503 for vendor-5xx, 429 for auth-throttling
    fixed_delay: str | None = None  # latency-spike: e.g. "2s"


@dataclass(frozen=True)
class LiveScaleFault:
    """The internal Deployment scaled down (in a staging namespace)."""

    namespace: str
    deployment: str
    replicas: int | None = None  # None: the current replicas x (1 - rate), rounded down


@dataclass(frozen=True)
class Fault:
    kind: str
    backend: str | None  # None: the kind's default backend, resolved against the config
    duration: int
    params: dict[str, float]
    live: LiveRouteFault | LiveScaleFault | None = None
    waves: tuple[int, int] = (0, 0)  # (on, off) seconds; (0, 0): on for the whole duration

    def active_at(self, elapsed: float) -> bool:
        """Whether the fault acts `elapsed` seconds after it was injected (its duration and waves):
        the rule the embedded world and the chain's exporter both draw by (sim_incidents.wave_active)."""
        from opsctl.metrics.sim_incidents import wave_active

        return wave_active(elapsed, self.duration, *self.waves)

    def describe(self) -> str:
        opts = ", ".join(f"{k} {v:g}" for k, v in self.params.items())
        waves = f", in waves of {dur(self.waves[0])} on, {dur(self.waves[1])} off" if all(self.waves) else ""
        return f"{self.kind} on {self.backend or '(default backend)'} ({opts}) for {dur(self.duration)}{waves}"


@dataclass(frozen=True)
class Probe:
    name: str
    probe: str
    tolerance: Any
    slos: tuple[str, ...] = ()
    backend: str | None = None
    severity: str | None = None


@dataclass(frozen=True)
class Activity:
    """A method step or a responder action."""

    name: str
    action: str
    pause_before: int = 0
    pause_after: int = 0
    after: int = 0  # responder actions: seconds after the acknowledgement
    fault: Fault | None = None
    duration: int = 0  # wait
    vendor: str | None = None
    category: str | None = None
    severity: str | None = None
    subject: str | None = None
    body: str = ""
    backend: str | None = None  # failover: the backend to move traffic off
    weights: dict[str, int] = field(default_factory=dict)  # traffic-set
    emergency: bool = False  # traffic-set
    summary: str | None = None  # page


@dataclass(frozen=True)
class OnCall:
    simulated: bool = True
    acknowledge_after: int | None = 180  # None: the primary never acknowledges
    escalate_after: int | None = 300  # None: no escalation
    secondary_acknowledge_after: int | None = 120
    name: str = "primary on-call (drill)"
    secondary_name: str = "secondary on-call (drill)"
    actions: tuple[Activity, ...] = ()
    manual: str | None = None  # why on-call acts by hand: the manual path this scenario rehearses on purpose


@dataclass(frozen=True)
class VendorResponder:
    simulated: bool = checked(flag(), True)
    respond_after: int | None = checked(duration(), None)  # None: no response within the drill
    route_to: str | None = checked(text(), None)  # the category the vendor's triage leaves the ticket in
    assignee: str = checked(text(), "vendor support engineer (drill)")


@dataclass(frozen=True)
class Paging:
    # deploy/alertmanager.yml (`opsctl slo routes`): every page, the fast tier's too, takes one route
    # whose receiver holds PagerDuty and the automation, after its group_wait of 1 s (decisions/0230).
    group_wait: int = checked(duration(0, 3600), 1)  # the paging route's wait before it pages
    automation_group_wait: int = checked(duration(0, 3600), 1)  # the same route's, to opsctl serve
    fast_group_wait: int = checked(duration(0, 3600), 1)
    fast_automation_group_wait: int = checked(duration(0, 3600), 1)
    severity: str = checked(text(*PAGE_SEVERITIES), "critical")


@dataclass(frozen=True)
class StopCondition:
    name: str
    condition: str
    slo: str | None = None
    above: float | None = None
    below: float | None = None
    backend: str | None = None
    severity: str | None = None


@dataclass(frozen=True)
class Expectation:
    name: str
    expect: str
    within: int | None
    slo: str | None = None
    backend: str | None = None  # detected: the alert's backend; failover-applied: `from`
    severity: str | None = None
    vendor: str | None = None
    category: str | None = None
    overrides: tuple[str, ...] = ()
    full: bool = False
    window: int = 300
    action: str = "set"
    guard: str | None = None
    alert: str | None = None  # detected: this alert name only (e.g. QualityPromptTokensShift)
    mentions: tuple[str, ...] = ()  # paged: words the page must name
    excludes: tuple[str, ...] = ()  # paged: words it must not name
    cause: str | None = None  # detected: the alert's `cause` (conventions.CAUSES)
    max: int | None = None  # pages, tickets: at most this many (PagerDuty incidents, tickets)


@dataclass(frozen=True)
class EmbeddedEnv:
    start: float = checked(instant(), rfc3339(DEFAULT_START))
    baseline: int = checked(duration(86400, 14 * 86400), 3 * 86400)
    peak_rps: float = checked(number(1, 1000000), 200.0)
    seed: int = checked(integer(0, 2**31), 7)
    pace: float = checked(number(0, 1e6), 0.0)  # simulated seconds per wall second; 0: as fast as the machine goes


@dataclass(frozen=True)
class LiveEnv:
    poll_interval: int = checked(duration(1, 600), 15)


@dataclass(frozen=True)
class DrillFreeze:
    name: str = checked(text(), "drill-freeze")
    reason: str = checked(text(), "change freeze declared by the drill")


@dataclass(frozen=True)
class Scenario:
    title: str
    path: str
    digest: str
    description: str = ""
    tags: tuple[str, ...] = ()
    max_duration: int = 7200
    embedded: EmbeddedEnv = field(default_factory=lambda: EmbeddedEnv())
    live: LiveEnv = field(default_factory=LiveEnv)
    freeze: DrillFreeze | None = None
    hypothesis_title: str = ""
    probes: tuple[Probe, ...] = ()
    method: tuple[Activity, ...] = ()
    paging: Paging = field(default_factory=Paging)
    on_call: OnCall = field(default_factory=OnCall)
    vendor: VendorResponder = field(default_factory=VendorResponder)
    stop_conditions: tuple[StopCondition, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    rollbacks: tuple[str, ...] = ()
    runbook: str | None = None  # the runbook scenario it rehearses (runbooks/scenario-<name>.md); default: file name

    @property
    def faults(self) -> list[Fault]:
        return [a.fault for a in self.method if a.fault is not None]

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def activities(self) -> list[Activity]:
        return list(self.method) + list(self.on_call.actions)


