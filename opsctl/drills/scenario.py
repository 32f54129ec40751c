"""Drill scenarios: a small YAML format of opsctl's own, in Chaos Toolkit's vocabulary.

    version: 1
    title: Vendor outage                      # required
    description: ...
    runbook: vendor-outage                    # the runbook it rehearses (default: the file's name)
    max-duration: 2h                          # the drill stops and rolls back after this, whatever happens
    environment:
      embedded: {start: 2026-11-18T14:00:00Z, baseline: 3d, peak-rps: 200, seed: 7, pace: 0}
      live: {poll-interval: 15s}
    freeze: {name: drill-freeze, reason: ...}  # optional: a change freeze in force during the drill
    steady-state-hypothesis:                  # checked before the method; a deviation aborts the drill
      title: ...
      probes: [{name, probe: slo-status | alerts-firing | traffic-split | freeze-active, tolerance, ...}]
    method:                                   # run in order; `pauses: {before, after}` as in Chaos Toolkit
      - {name, action: inject-fault, fault: {kind, backend, rate | factor, duration, live: {...}}}
      - {name, action: wait, duration: 10m}
      - {name, action: file-ticket | page | traffic-set | failover, ...}
    paging: {group-wait: 30s, severity: critical}   # the drill's alert -> page step (Alertmanager's part)
    responders:                               # simulated people
      on-call: {acknowledge-after: 3m, escalate-after: 5m, secondary-acknowledge-after: 2m,
                actions: [{action: failover, from: databricks, after: 2m}, {action: file-ticket, ...}]}
      vendor: {respond-after: 20m, route-to: inference}
    stop-conditions: [{condition: budget-spent | budget-remaining | real-incident-open | alert-firing, ...}]
    expectations: [{expect: detected | paged | acknowledged | escalated | failover-applied | vendor-ticket
                    | vendor-responded | slo-recovered | change-refused, within: 5m, ...}]
    rollbacks: [{action: remove-faults}, {action: restore-traffic}, {action: resolve-pages}]

Keys are hyphenated, as in Chaos Toolkit. Every deadline (`within`) counts from the first injected
fault (from the method's start when no fault is injected). `load_scenario` reports every problem
with the file and the key path (`method[0].fault.rate`) and raises ConfigError (exit 2);
`check_against_config` adds the problems that need the config (unknown backends, vendors, SLOs).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opsctl.errors import ConfigError

SCENARIO_VERSION = 1
DEFAULT_START = "2026-11-18T14:00:00Z"  # a Wednesday, 09:00 US Eastern: traffic climbing to its peak
SEVERITIES = ("Sev1", "Sev2", "Sev3", "Sev4")
PAGE_SEVERITIES = ("critical", "error", "warning", "info")
STATUS_LEVELS = ("ok", "ticket", "page", "unknown")

# Fault kinds are the simulator's incident kinds; their tunable parameter and range.
FAULT_PARAMS: dict[str, dict[str, tuple[float, float, float]]] = {
    "vendor-5xx": {"rate": (0.2, 0.0, 1.0)},
    "latency-spike": {"factor": (3.0, 1.0, 100.0)},
    "auth-throttling": {"rate": (0.3, 0.0, 1.0)},
    "gpu-capacity-loss": {"rate": (0.1, 0.0, 1.0), "factor": (2.0, 1.0, 100.0)},
    "quality-regression": {"prompt_shift": (-1.0, -100.0, 100.0), "rate": (0.3, 0.0, 1.0),
                           "suggestions": (0.5, 0.0, 10.0), "completion": (1.0, 0.0, 10.0)},
    "oauth-token-failure": {"rate": (1.0, 0.0, 1.0)},  # opsctl/drills/chain/faults.py
}
FAULT_BACKEND_KIND = {"vendor-5xx": "vendor", "latency-spike": None, "auth-throttling": "vendor",
                      "gpu-capacity-loss": "internal", "quality-regression": "vendor", "oauth-token-failure": "vendor"}
# Live injection per kind: an Istio fault on the backend's route, or the Deployment scaled down.
LIVE_ROUTE_KINDS = ("vendor-5xx", "auth-throttling", "latency-spike", "oauth-token-failure")
LIVE_SCALE_KINDS = ("gpu-capacity-loss",)

PROBES = ("slo-status", "alerts-firing", "traffic-split", "freeze-active")
METHOD_ACTIONS = ("inject-fault", "wait", "file-ticket", "page", "traffic-set", "failover")
RESPONDER_ACTIONS = ("failover", "file-ticket")
ROLLBACKS = ("remove-faults", "restore-traffic", "resolve-pages")
STOP_CONDITIONS = ("budget-spent", "budget-remaining", "real-incident-open", "alert-firing")
EXPECTATIONS = ("detected", "paged", "acknowledged", "escalated", "failover-applied", "vendor-ticket",
                "vendor-responded", "slo-recovered", "change-refused")
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

    def describe(self) -> str:
        opts = ", ".join(f"{k} {v:g}" for k, v in self.params.items())
        return f"{self.kind} on {self.backend or '(default backend)'} ({opts}) for {_dur(self.duration)}"


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


@dataclass(frozen=True)
class VendorResponder:
    simulated: bool = True
    respond_after: int | None = None  # None: no response within the drill
    route_to: str | None = None  # the category the vendor's triage leaves the ticket in
    assignee: str = "vendor support engineer (drill)"


@dataclass(frozen=True)
class Paging:
    group_wait: int = 30
    severity: str = "critical"


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


@dataclass(frozen=True)
class EmbeddedEnv:
    start: float
    baseline: int = 3 * 86400
    peak_rps: float = 200.0
    seed: int = 7
    pace: float = 0.0  # simulated seconds per wall second; 0: as fast as the machine goes


@dataclass(frozen=True)
class LiveEnv:
    poll_interval: int = 15


@dataclass(frozen=True)
class DrillFreeze:
    name: str = "drill-freeze"
    reason: str = "change freeze declared by the drill"


@dataclass(frozen=True)
class Scenario:
    title: str
    path: str
    digest: str
    description: str = ""
    tags: tuple[str, ...] = ()
    max_duration: int = 7200
    embedded: EmbeddedEnv = field(default_factory=lambda: EmbeddedEnv(_rfc3339(DEFAULT_START)))
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


# ---------------------------------------------------------------------------------------------
# Reading raw YAML with key paths


class _Node:
    """A mapping under a key path. Reads typed values; collects problems instead of failing at the first."""

    def __init__(self, data: dict, path: str, problems: list[str]):
        self.data, self.path, self.problems = data, path, problems
        self.used: set[str] = set()

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def bad(self, key: str, message: str) -> None:
        self.problems.append(f"{self.where(key) if key else (self.path or '(top level)')}: {message}")

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        self.used.add(key)
        if key not in self.data or self.data[key] is None:
            if required:
                self.bad(key, "required key is missing")
            return default
        return self.data[key]

    def text(self, key: str, default: str | None = None, *, required: bool = False,
             choices: tuple[str, ...] | None = None) -> str | None:
        value = self.raw(key, default, required=required)
        if value is default:
            return value
        if not isinstance(value, str) or not value.strip():
            self.bad(key, f"expected a non-empty string, got {_show(value)}")
            return default
        if choices and value not in choices:
            self.bad(key, f"must be one of {', '.join(choices)}; got {value!r}")
            return default
        return value.strip()

    def number(self, key: str, default: float | None = None, *, required: bool = False,
               low: float | None = None, high: float | None = None, low_open: bool = False) -> float | None:
        value = self.raw(key, default, required=required)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.bad(key, f"expected a number, got {_show(value)}")
            return default
        if (low is not None and (value < low or (low_open and value == low))) or (high is not None and value > high):
            lo = f"{'above' if low_open else 'at least'} {low:g}" if low is not None else ""
            hi = f"at most {high:g}" if high is not None else ""
            self.bad(key, f"must be {' and '.join(x for x in (lo, hi) if x)}; got {value!r}")
            return default
        return float(value)

    def integer(self, key: str, default: int | None = None, *, low: int | None = None, high: int | None = None) -> int | None:
        value = self.raw(key, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(key, f"expected an integer, got {_show(value)}")
            return default
        if (low is not None and value < low) or (high is not None and value > high):
            self.bad(key, f"must be between {low} and {high}; got {value}")
            return default
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            self.bad(key, f"expected true or false, got {_show(value)}")
            return default
        return value

    def duration(self, key: str, default: int | None = None, *, required: bool = False, minimum: int = 0,
                 maximum: int = 30 * 86400) -> int | None:
        from opsctl.clock import parse_duration

        value = self.raw(key, default, required=required)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.bad(key, f"expected a duration such as 30s, 5m, 1h30m, got {_show(value)}")
            return default
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.bad(key, str(exc))
            return default
        if not minimum <= seconds <= maximum:
            self.bad(key, f"must be between {_dur(minimum)} and {_dur(maximum)}; got {value!r}")
            return default
        return seconds

    def time(self, key: str, default: float) -> float:
        value = self.raw(key, None)
        if value is None:
            return default
        if isinstance(value, _dt.datetime):  # YAML reads an unquoted timestamp as a datetime
            return (value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)).timestamp()
        if isinstance(value, str):
            try:
                return _rfc3339(value)
            except ValueError:
                pass
        self.bad(key, f"expected an RFC 3339 time such as {DEFAULT_START}, got {_show(value)}")
        return default

    def names(self, key: str) -> tuple[str, ...]:
        value = self.raw(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.bad(key, f"expected a list of names, got {_show(value)}")
            return ()
        return tuple(value)

    def child(self, key: str, *, required: bool = False) -> "_Node | None":
        value = self.raw(key, None, required=required)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.bad(key, f"expected a mapping, got {_show(value)}")
            return None
        return _Node(value, self.where(key), self.problems)

    def items(self, key: str, *, required: bool = False) -> list["_Node"]:
        value = self.raw(key, None, required=required)
        if value is None:
            return []
        if not isinstance(value, list):
            self.bad(key, f"expected a list, got {_show(value)}")
            return []
        out = []
        for i, item in enumerate(value):
            where = f"{self.where(key)}[{i}]"
            if not isinstance(item, dict):
                self.problems.append(f"{where}: expected a mapping, got {_show(item)}")
                continue
            out.append(_Node(item, where, self.problems))
        return out

    def done(self, allowed: tuple[str, ...] | None = None) -> None:
        """Report keys nobody read (or outside `allowed`): a typo must not pass silently."""
        known = allowed if allowed is not None else tuple(sorted(self.used))
        for key in self.data:
            if key not in known:
                self.bad(str(key), f"unknown key (known keys here: {', '.join(sorted(known))})")


def _show(value: Any) -> str:
    return f"{type(value).__name__} {repr(value)[:60]}"


def _dur(seconds: int) -> str:
    from opsctl.clock import format_duration

    return format_duration(int(seconds))


def _rfc3339(text: str) -> float:
    from opsctl.clock import parse_rfc3339

    return parse_rfc3339(text)


# ---------------------------------------------------------------------------------------------
# Sections


def _fault(node: _Node) -> Fault | None:
    kind = node.text("kind", required=True, choices=tuple(FAULT_PARAMS))
    backend = node.text("backend")
    duration = node.duration("duration", required=True, minimum=10, maximum=7 * 86400)
    params: dict[str, float] = {}
    for name, (default, low, high) in FAULT_PARAMS.get(kind or "", {}).items():
        params[name] = node.number(name, default, low=low, high=high, low_open=name == "rate")
    live = None
    live_node = node.child("live")
    if live_node is not None and kind:
        live = _live_fault(live_node, kind)
    node.done(("kind", "backend", "duration", "live", *FAULT_PARAMS.get(kind or "", {})))
    if kind is None or duration is None:
        return None
    return Fault(kind, backend, duration, params, live)


def _live_fault(node: _Node, kind: str) -> LiveRouteFault | LiveScaleFault | None:
    namespace = node.text("namespace", required=True)
    if kind in LIVE_SCALE_KINDS:
        deployment = node.text("deployment", required=True)
        replicas = node.integer("replicas", None, low=0, high=10000)
        node.done(("namespace", "deployment", "replicas"))
        return LiveScaleFault(namespace, deployment, replicas) if namespace and deployment else None
    vs = node.text("virtual-service", required=True)
    route = node.text("route")
    percentage = node.number("percentage", None, low=0, high=100, low_open=True)
    status = node.integer("http-status", None, low=400, high=599) if kind != "latency-spike" else None
    delay = None
    if kind == "latency-spike":
        delay = node.text("fixed-delay", required=True)
        if delay and not re.fullmatch(r"[0-9]+(\.[0-9]+)?(ms|s|m|h)", delay):
            node.bad("fixed-delay", f"expected an Istio duration such as 500ms, 2s or 1m, got {delay!r}")
    allowed = ("namespace", "virtual-service", "route", "percentage",
               "fixed-delay" if kind == "latency-spike" else "http-status")
    node.done(allowed)
    if not (namespace and vs):
        return None
    return LiveRouteFault(namespace, vs, route, percentage, status, delay)


def _ticket_fields(node: _Node, required: bool = True) -> dict:
    return {
        "vendor": node.text("vendor", required=required),
        "category": node.text("category", required=required),
        "severity": node.text("severity", "Sev2", choices=SEVERITIES),
        "subject": node.text("subject"),
        "body": node.text("body", "") or "",
    }


def _activity(node: _Node, *, responder: bool) -> Activity | None:
    allowed_actions = RESPONDER_ACTIONS if responder else METHOD_ACTIONS
    action = node.text("action", required=True, choices=allowed_actions)
    name = node.text("name", action or "")
    kw: dict[str, Any] = {}
    if responder:
        kw["after"] = node.duration("after", 0)
    else:
        pauses = node.child("pauses")
        if pauses is not None:
            kw["pause_before"] = pauses.duration("before", 0)
            kw["pause_after"] = pauses.duration("after", 0)
            pauses.done(("before", "after"))
    if action == "inject-fault":
        fault_node = node.child("fault", required=True)
        kw["fault"] = _fault(fault_node) if fault_node is not None else None
    elif action == "wait":
        kw["duration"] = node.duration("duration", required=True, minimum=1)
    elif action == "file-ticket":
        kw.update(_ticket_fields(node))
    elif action == "page":
        kw["summary"] = node.text("summary")
    elif action == "failover":
        kw["backend"] = node.text("from", required=True)
    elif action == "traffic-set":
        weights = node.raw("weights", required=True)
        if weights is not None:
            if not isinstance(weights, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in weights.items()):
                node.bad("weights", f"expected a mapping of backend to whole percent, got {_show(weights)}")
            else:
                kw["weights"] = dict(weights)
        kw["emergency"] = node.flag("emergency", False)
    node.done()
    if action is None or (action == "inject-fault" and kw.get("fault") is None):
        return None
    return Activity(name=name or action, action=action, **{k: v for k, v in kw.items() if v is not None})


def _probe(node: _Node) -> Probe | None:
    kind = node.text("probe", required=True, choices=PROBES)
    name = node.text("name", kind or "")
    kw: dict[str, Any] = {}
    tolerance = node.raw("tolerance")
    if kind == "slo-status":
        kw["slos"] = node.names("slos")
        kw["backend"] = node.text("backend")
        levels = [tolerance] if isinstance(tolerance, str) else tolerance if tolerance is not None else ["ok"]
        if not isinstance(levels, list) or not levels or any(lv not in STATUS_LEVELS for lv in levels):
            node.bad("tolerance", f"expected a status level or a list of them ({', '.join(STATUS_LEVELS)}),"
                                  f" got {_show(tolerance)}")
            levels = ["ok"]
        tolerance = tuple(levels)
    elif kind == "alerts-firing":
        kw["severity"] = node.text("severity", None, choices=("page", "ticket"))
        if tolerance is None:
            tolerance = 0
        if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
            node.bad("tolerance", f"expected the number of firing alerts tolerated (0 or more), got {_show(tolerance)}")
            tolerance = 0
    elif kind == "traffic-split":
        if tolerance is not None and not (isinstance(tolerance, dict) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in tolerance.items())):
            node.bad("tolerance", f"expected a mapping of backend to whole percent, got {_show(tolerance)}")
            tolerance = None
    elif kind == "freeze-active":
        if tolerance is None:
            tolerance = True
        if not isinstance(tolerance, bool):
            node.bad("tolerance", f"expected true or false, got {_show(tolerance)}")
            tolerance = True
    node.done()
    return Probe(name or kind, kind, tolerance, **kw) if kind else None


def _stop_condition(node: _Node) -> StopCondition | None:
    kind = node.text("condition", required=True, choices=STOP_CONDITIONS)
    name = node.text("name", kind or "")
    kw: dict[str, Any] = {}
    if kind == "budget-spent":
        kw["slo"] = node.text("slo", required=True)
        kw["above"] = node.number("above", required=True, low=0, high=100, low_open=True)
    elif kind == "budget-remaining":
        kw["slo"] = node.text("slo", required=True)
        kw["below"] = node.number("below", required=True, low=-100, high=1)
    elif kind == "alert-firing":
        kw["slo"] = node.text("slo")
        kw["backend"] = node.text("backend")
        kw["severity"] = node.text("severity", "page", choices=("page", "ticket"))
    node.done()
    return StopCondition(name or kind, kind, **kw) if kind else None


_EXPECT_KEYS: dict[str, tuple[str, ...]] = {
    "detected": ("slo", "backend", "severity", "alert"),
    "paged": ("mentions", "not-mentions"),
    "acknowledged": (),
    "escalated": (),
    "failover-applied": ("from", "overrides", "full"),
    "vendor-ticket": ("vendor", "category"),
    "vendor-responded": ("vendor", "category"),
    "slo-recovered": ("slo", "window"),
    "change-refused": ("action", "guard"),
}


def _expectation(node: _Node) -> Expectation | None:
    kind = node.text("expect", required=True, choices=EXPECTATIONS)
    if kind is None:
        node.done(tuple(node.data))
        return None
    name = node.text("name", kind)
    within = node.duration("within", required=kind != "change-refused", minimum=1)
    kw: dict[str, Any] = {}
    if kind == "detected":
        kw["slo"] = node.text("slo")
        kw["backend"] = node.text("backend")
        kw["severity"] = node.text("severity", "page", choices=("page", "ticket"))
        kw["alert"] = node.text("alert")
    elif kind == "paged":
        kw["mentions"] = node.names("mentions")
        kw["excludes"] = node.names("not-mentions")
    elif kind == "failover-applied":
        kw["backend"] = node.text("from", required=True)
        kw["overrides"] = node.names("overrides")
        for g in kw["overrides"]:
            if g not in GUARDS:
                node.bad("overrides", f"unknown guard {g!r} (guards: {', '.join(GUARDS)})")
        kw["full"] = node.flag("full", False)
    elif kind in ("vendor-ticket", "vendor-responded"):
        kw["vendor"] = node.text("vendor", required=True)
        kw["category"] = node.text("category", required=kind == "vendor-ticket")
    elif kind == "slo-recovered":
        kw["slo"] = node.text("slo", required=True)
        kw["window"] = node.duration("window", 300, minimum=10, maximum=86400)
    elif kind == "change-refused":
        kw["action"] = node.text("action", "set", choices=("set",))
        kw["guard"] = node.text("guard", required=True, choices=GUARDS)
    node.done(("name", "expect", "within", *_EXPECT_KEYS[kind]))
    return Expectation(name=name or kind, expect=kind, within=within, **{k: v for k, v in kw.items() if v is not None})


def _environment(node: _Node | None) -> tuple[EmbeddedEnv, LiveEnv]:
    embedded, live = EmbeddedEnv(_rfc3339(DEFAULT_START)), LiveEnv()
    if node is None:
        return embedded, live
    e = node.child("embedded")
    if e is not None:
        embedded = EmbeddedEnv(
            start=e.time("start", embedded.start),
            baseline=e.duration("baseline", embedded.baseline, minimum=86400, maximum=14 * 86400),
            peak_rps=e.number("peak-rps", embedded.peak_rps, low=1, high=1000000),
            seed=e.integer("seed", embedded.seed, low=0, high=2**31),
            pace=e.number("pace", 0.0, low=0, high=1e6),
        )
        e.done(("start", "baseline", "peak-rps", "seed", "pace"))
    v = node.child("live")
    if v is not None:
        live = LiveEnv(poll_interval=v.duration("poll-interval", live.poll_interval, minimum=1, maximum=600))
        v.done(("poll-interval",))
    node.done(("embedded", "live"))
    return embedded, live


def _maybe_never(node: _Node, key: str, default: int | None) -> int | None:
    """A delay, or `never` (that person does not act within the drill)."""
    if node.data.get(key) == "never":
        node.used.add(key)
        return None
    return node.duration(key, default)


def _responders(node: _Node | None) -> tuple[OnCall, VendorResponder]:
    on_call, vendor = OnCall(), VendorResponder()
    if node is None:
        return on_call, vendor
    o = node.child("on-call")
    if o is not None:
        on_call = OnCall(
            simulated=o.flag("simulated", True),
            acknowledge_after=_maybe_never(o, "acknowledge-after", on_call.acknowledge_after),
            escalate_after=_maybe_never(o, "escalate-after", on_call.escalate_after),
            secondary_acknowledge_after=_maybe_never(o, "secondary-acknowledge-after",
                                                     on_call.secondary_acknowledge_after),
            name=o.text("name", on_call.name),
            secondary_name=o.text("secondary-name", on_call.secondary_name),
            actions=tuple(a for a in (_activity(n, responder=True) for n in o.items("actions")) if a),
        )
        o.done(("simulated", "acknowledge-after", "escalate-after", "secondary-acknowledge-after", "name",
                "secondary-name", "actions"))
    v = node.child("vendor")
    if v is not None:
        vendor = VendorResponder(
            simulated=v.flag("simulated", True),
            respond_after=v.duration("respond-after", None),
            route_to=v.text("route-to"),
            assignee=v.text("assignee", vendor.assignee),
        )
        v.done(("simulated", "respond-after", "route-to", "assignee"))
    node.done(("on-call", "vendor"))
    return on_call, vendor


TOP_KEYS = ("version", "title", "description", "tags", "runbook", "max-duration", "environment", "freeze",
            "steady-state-hypothesis", "method", "paging", "responders", "stop-conditions", "expectations",
            "rollbacks")


def parse_scenario(data: Any, path: str, digest: str = "") -> Scenario:
    """Raw YAML -> Scenario; every problem is collected and raised as one ConfigError naming file and key."""
    problems: list[str] = []
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a scenario must be a mapping, got {type(data).__name__}")
    top = _Node(data, "", problems)
    version = top.integer("version", SCENARIO_VERSION)
    if version is not None and version != SCENARIO_VERSION:
        top.bad("version", f"unsupported scenario version {version} (this opsctl reads version {SCENARIO_VERSION})")
    title = top.text("title", required=True)
    description = top.text("description", "") or ""
    tags = top.names("tags")
    runbook = top.text("runbook")
    max_duration = top.duration("max-duration", 7200, minimum=10, maximum=7 * 86400)
    embedded, live = _environment(top.child("environment"))
    freeze = None
    f = top.child("freeze")
    if f is not None:
        freeze = DrillFreeze(name=f.text("name", "drill-freeze"), reason=f.text("reason", DrillFreeze.reason))
        f.done(("name", "reason"))
    hypothesis_title, probes = "", ()
    h = top.child("steady-state-hypothesis")
    if h is not None:
        hypothesis_title = h.text("title", "") or ""
        probes = tuple(p for p in (_probe(n) for n in h.items("probes")) if p)
        h.done(("title", "probes"))
    method = tuple(a for a in (_activity(n, responder=False) for n in top.items("method", required=True)) if a)
    paging = Paging()
    p = top.child("paging")
    if p is not None:
        paging = Paging(group_wait=p.duration("group-wait", 30, maximum=3600),
                        severity=p.text("severity", "critical", choices=PAGE_SEVERITIES))
        p.done(("group-wait", "severity"))
    on_call, vendor = _responders(top.child("responders"))
    stops = tuple(s for s in (_stop_condition(n) for n in top.items("stop-conditions")) if s)
    indexed = [(i, _expectation(n)) for i, n in enumerate(top.items("expectations", required=True))]
    expectations = tuple(e for _, e in indexed if e)
    rollbacks: list[str] = []
    for n in top.items("rollbacks"):
        action = n.text("action", required=True, choices=ROLLBACKS)
        n.done(("action", "name"))
        if action:
            rollbacks.append(action)
    top.done(TOP_KEYS)

    if "method" in data and not data.get("method"):
        top.bad("method", "must hold at least one action")
    if "expectations" in data and not data.get("expectations"):
        top.bad("expectations", "a drill measures something: list at least one expectation")
    _cross_checks(top, method, on_call, rollbacks, [(i, e) for i, e in indexed if e], max_duration)
    if problems:
        raise ConfigError(f"{path}: invalid drill scenario", problems=[f"{path}: {p}" for p in problems])
    return Scenario(
        title=title, path=path, digest=digest, description=description, tags=tags, max_duration=max_duration,
        embedded=embedded, live=live, freeze=freeze, hypothesis_title=hypothesis_title, probes=probes,
        method=method, paging=paging, on_call=on_call, vendor=vendor, stop_conditions=stops,
        expectations=expectations, rollbacks=tuple(rollbacks), runbook=runbook,
    )


def _cross_checks(top: _Node, method, on_call: OnCall, rollbacks: list[str], expectations, max_duration) -> None:
    actions = [a.action for a in method] + [a.action for a in on_call.actions]
    needs = {
        "remove-faults": "inject-fault" in actions,
        "restore-traffic": any(a in actions for a in ("failover", "traffic-set")),
        "resolve-pages": True,  # every drill may page: alerts page on their own
    }
    for rollback, needed in needs.items():
        if needed and rollback not in rollbacks:
            top.bad("rollbacks", f"must include {{action: {rollback}}}: rollbacks always run, and this drill needs it")
    if len(set(rollbacks)) != len(rollbacks):
        top.bad("rollbacks", "lists an action twice")
    for i, e in expectations:
        if e.within is not None and e.within > max_duration:
            top.bad(f"expectations[{i}].within", f"{_dur(e.within)} is beyond max-duration {_dur(max_duration)}")
    simulated_ack = on_call.acknowledge_after is not None or (
        on_call.escalate_after is not None and on_call.secondary_acknowledge_after is not None)
    if on_call.actions and not simulated_ack:
        top.bad("responders.on-call.actions", "nobody acknowledges the page, so these actions would never run"
                                              " (set acknowledge-after or escalate-after with secondary-acknowledge-after)")


def load_scenario(path: str | Path) -> Scenario:
    from opsctl.config import load_yaml_file

    path = Path(path)
    data = load_yaml_file(path, "drill scenario")
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        digest = ""
    return parse_scenario(data, str(path), digest)


def discover(paths: list[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(x for x in p.iterdir() if x.suffix in (".yaml", ".yml") and x.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise ConfigError(f"{p}: no such scenario file or directory")
    return files


# ---------------------------------------------------------------------------------------------
# Problems that need the config


def check_against_config(scenario: Scenario, cfg, slo_names: list[str] | None = None, *, live: bool = False) -> list[str]:
    """Backends, vendors, categories, SLO names and live targets the config must know. Returns
    problems as `file: key: message` lines (empty when the scenario fits the config)."""
    problems: list[str] = []
    p = scenario.path
    backends = cfg.backends

    def need_backend(where: str, name: str | None, kind: str | None = None) -> None:
        if name is None:
            return
        if name not in backends:
            problems.append(f"{p}: {where}: unknown backend {name!r} (known: {', '.join(sorted(backends))})")
        elif kind and backends[name].kind != kind:
            problems.append(f"{p}: {where}: {name!r} is a {backends[name].kind} backend; this needs a {kind} one")

    def need_vendor(where: str, name: str | None) -> None:
        if name is not None and name not in cfg.tickets.vendors:
            known = ", ".join(sorted(cfg.tickets.vendors)) or "none configured"
            problems.append(f"{p}: {where}: unknown vendor {name!r} (tickets.vendors: {known})")

    def need_slo(where: str, name: str | None) -> None:
        if name is None or slo_names is None:
            return
        if resolve_slo(name, slo_names, cfg.service) is None:
            problems.append(f"{p}: {where}: unknown SLO {name!r} (known: {', '.join(sorted(slo_names))})")

    for i, a in enumerate(scenario.method):
        where = f"method[{i}]"
        if a.fault is not None:
            kind = FAULT_BACKEND_KIND[a.fault.kind]
            backend = a.fault.backend or default_backend(a.fault.kind, cfg)
            if backend is None:
                problems.append(f"{p}: {where}.fault.backend: name the backend ({a.fault.kind} has no default here)")
            need_backend(f"{where}.fault.backend", backend, kind)
            if live:
                problems.extend(_live_problems(p, f"{where}.fault", a.fault, cfg))
        if a.action == "failover":
            need_backend(f"{where}.from", a.backend)
        if a.action == "traffic-set":
            for b in a.weights:
                need_backend(f"{where}.weights", b)
        if a.action == "file-ticket":
            need_vendor(f"{where}.vendor", a.vendor)
    for i, a in enumerate(scenario.on_call.actions):
        where = f"responders.on-call.actions[{i}]"
        if a.action == "failover":
            need_backend(f"{where}.from", a.backend)
        if a.action == "file-ticket":
            need_vendor(f"{where}.vendor", a.vendor)
    for i, probe in enumerate(scenario.probes):
        where = f"steady-state-hypothesis.probes[{i}]"
        need_backend(f"{where}.backend", probe.backend)
        for name in probe.slos:
            need_slo(f"{where}.slos", name)
        if probe.probe == "traffic-split" and isinstance(probe.tolerance, dict):
            for b in probe.tolerance:
                need_backend(f"{where}.tolerance", b)
    for i, s in enumerate(scenario.stop_conditions):
        where = f"stop-conditions[{i}]"
        need_slo(f"{where}.slo", s.slo)
        need_backend(f"{where}.backend", s.backend)
    for i, e in enumerate(scenario.expectations):
        where = f"expectations[{i}]"
        need_slo(f"{where}.slo", e.slo)
        need_backend(f"{where}.{'from' if e.expect == 'failover-applied' else 'backend'}", e.backend)
        need_vendor(f"{where}.vendor", e.vendor)
    return problems


def _live_problems(p: str, where: str, fault: Fault, cfg) -> list[str]:
    if fault.kind not in LIVE_ROUTE_KINDS + LIVE_SCALE_KINDS:
        return [f"{p}: {where}.kind: {fault.kind} cannot be injected live (no route or scale fault changes a"
                " model's answers): run this drill embedded"]
    if fault.live is None:
        return [f"{p}: {where}.live: a live drill needs to know where to inject {fault.kind}"
                f" ({'namespace, deployment' if fault.kind in LIVE_SCALE_KINDS else 'namespace, virtual-service'})"]
    allowed = cfg.drills.live.fault_namespaces
    if fault.live.namespace not in allowed:
        return [f"{p}: {where}.live.namespace: {fault.live.namespace!r} is not in drills.live.fault_namespaces"
                f" ({', '.join(allowed) or 'empty'}): live faults go to staging namespaces listed there"]
    if isinstance(fault.live, LiveRouteFault):
        ns = cfg.traffic.istio.namespace or cfg.traffic.kubernetes.namespace
        if fault.live.virtual_service == cfg.traffic.istio.name and fault.live.namespace == ns:
            return [f"{p}: {where}.live.virtual-service: {ns}/{cfg.traffic.istio.name} is the traffic split's"
                    " VirtualService; a fault there hits every backend. Name the backend's own route"]
    return []


def default_backend(kind: str, cfg) -> str | None:
    want = FAULT_BACKEND_KIND.get(kind) or "vendor"
    names = [n for n, b in cfg.backends.items() if b.kind == want]
    return names[0] if len(names) == 1 else None


def resolve_slo(name: str, known: list[str], service: str) -> str | None:
    """An SLO by its full name, or without the service prefix (`databricks-availability`)."""
    if name in known:
        return name
    prefixed = f"{service}-{name}"
    return prefixed if prefixed in known else None


def raise_problems(problems: list[str], what: str) -> None:
    if problems:
        raise ConfigError(what, problems=problems)

