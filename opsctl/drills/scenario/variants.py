"""Tagged variants: one class per method action, responder action, fault kind, live fault target,
probe, stop condition and expectation, holding exactly the keys that variant accepts. typed.py
dispatches on the tag key (`action`, `kind`, `probe`, `condition`, `expect`) and builds the class;
`model()` turns a variant into the engine's model (model.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any

from opsctl.drills.scenario.checks import (Bad, Check, checked, duration, flag, integer, names, number,
                                           percent_map, show, text)
from opsctl.slo.conventions import CAUSES
from opsctl.drills.scenario.model import (EXPECTATIONS, FAULT_PARAMS, GUARDS, LIVE_DELAY_KINDS, LIVE_SCALE_KINDS, METHOD_ACTIONS,
                                          PROBES, RESPONDER_ACTIONS, SEVERITIES, STATUS_LEVELS, STOP_CONDITIONS,
                                          Activity, Expectation, Fault, LiveRouteFault, LiveScaleFault, Probe,
                                          StopCondition)



def _name():
    return checked(text(), None)


# ---------------------------------------------------------------------------------------------
# Faults (tag `kind`) and where a live drill injects them


@dataclass(frozen=True, kw_only=True)
class LiveRoute:
    namespace: str = checked(text(), required=True)
    virtual_service: str = checked(text(), required=True)
    route: str | None = checked(text(), None)
    percentage: float | None = checked(number(0, 100, low_open=True), None)
    http_status: int | None = checked(integer(400, 599), None)

    def model(self) -> LiveRouteFault:
        return LiveRouteFault(self.namespace, self.virtual_service, self.route, self.percentage, self.http_status)


def _istio_duration() -> Check:
    def convert(value):
        value = text().convert(value)
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?(ms|s|m|h)", value):
            raise Bad(f"expected an Istio duration such as 500ms, 2s or 1m, got {value!r}")
        return value
    return Check(convert, "1s")


@dataclass(frozen=True, kw_only=True)
class LiveDelay:
    namespace: str = checked(text(), required=True)
    virtual_service: str = checked(text(), required=True)
    route: str | None = checked(text(), None)
    percentage: float | None = checked(number(0, 100, low_open=True), None)
    fixed_delay: str = checked(_istio_duration(), required=True)

    def model(self) -> LiveRouteFault:
        return LiveRouteFault(self.namespace, self.virtual_service, self.route, self.percentage,
                              fixed_delay=self.fixed_delay)


@dataclass(frozen=True, kw_only=True)
class LiveScale:
    namespace: str = checked(text(), required=True)
    deployment: str = checked(text(), required=True)
    replicas: int | None = checked(integer(0, 10000), None)

    def model(self) -> LiveScaleFault:
        return LiveScaleFault(self.namespace, self.deployment, self.replicas)


def live_target(kind: str) -> type:
    if kind in LIVE_SCALE_KINDS:
        return LiveScale
    return LiveDelay if kind in LIVE_DELAY_KINDS else LiveRoute


def waves() -> Check:
    """`waves: {on: 2m, off: 3m}`: the fault acts for `on`, rests for `off`, and again, until its
    duration ends; (on, off) seconds, each 10s..1d. YAML 1.1 reads a bare `on`/`off` key as true/false:
    those keys are read as `on`/`off` (quoting them works too)."""
    step = duration(10, 86400)

    def convert(value):
        if not isinstance(value, dict):
            raise Bad(f"expected a mapping {{on: 2m, off: 3m}}, got {show(value)}")
        named = {{True: "on", False: "off"}.get(k, k) if isinstance(k, bool) else k: v for k, v in value.items()}
        unknown = sorted(str(k) for k in named if k not in ("on", "off"))
        if unknown:
            raise Bad(f"unknown key {', '.join(unknown)} (known keys here: on, off)")
        missing = [k for k in ("on", "off") if k not in named]
        if missing:
            raise Bad(f"{' and '.join(missing)} missing: give both, e.g. {{on: 2m, off: 3m}}")
        out = []
        for key in ("on", "off"):
            try:
                out.append(step.convert(named[key]))
            except Bad as exc:
                raise Bad(f"{key}: {exc}") from None
        return (out[0], out[1])
    return Check(convert, (0, 0))


def _fault_class(kind: str) -> type:
    """A fault kind's section: the common keys and the kind's own parameters with their ranges."""
    params = [(name, float | None, checked(number(low, high, low_open=name == "rate"), default, key=name))
              for name, (default, low, high) in FAULT_PARAMS[kind].items()]

    def model(self) -> Fault:
        given = {n: getattr(self, n) for n, *_ in params}
        return Fault(self.kind, self.backend, self.duration, {n: v for n, v in given.items() if v is not None},
                     waves=self.waves)

    return make_dataclass(
        "Fault_" + kind.replace("-", "_"),
        [("kind", str, checked(text(*FAULT_PARAMS), required=True)),
         ("backend", str | None, checked(text(), None)),
         ("duration", int, checked(duration(10, 7 * 86400), required=True)),
         ("live", Any, field(default=None)),  # read by live_target(kind)
         ("waves", Any, checked(waves(), (0, 0))),  # (on, off) seconds
         *params],
        namespace={"model": model}, frozen=True, kw_only=True)


FAULTS = {kind: _fault_class(kind) for kind in FAULT_PARAMS}


# ---------------------------------------------------------------------------------------------
# Method and responder actions (tag `action`)


@dataclass(frozen=True, kw_only=True)
class Pauses:
    before: int = checked(duration(), 0)
    after: int = checked(duration(), 0)


@dataclass(frozen=True, kw_only=True)
class Step:
    """What every method action has: a name, its tag and Chaos Toolkit's pauses."""

    name: str | None = _name()
    action: str = checked(text(*METHOD_ACTIONS), required=True)
    pauses: Pauses | None = None

    def common(self) -> dict:
        pauses = self.pauses or Pauses()
        return {"name": self.name or self.action, "action": self.action,
                "pause_before": pauses.before, "pause_after": pauses.after}

    def model(self) -> Activity:
        return Activity(**self.common())


@dataclass(frozen=True, kw_only=True)
class InjectFault(Step):
    fault: Any = field()  # required; read as the variant of its `kind` (parse.py)

    def model(self, fault: Fault | None = None) -> Activity:
        return Activity(**self.common(), fault=fault)


@dataclass(frozen=True, kw_only=True)
class Wait(Step):
    duration: int = checked(duration(1), required=True)

    def model(self) -> Activity:
        return Activity(**self.common(), duration=self.duration)


@dataclass(frozen=True, kw_only=True)
class Ticket:
    vendor: str = checked(text(), required=True)
    category: str = checked(text(), required=True)
    severity: str = checked(text(*SEVERITIES), "Sev2")
    subject: str | None = checked(text(), None)
    body: str = checked(text(), "")

    def ticket(self) -> dict:
        return {"vendor": self.vendor, "category": self.category, "severity": self.severity,
                "subject": self.subject, "body": self.body}


@dataclass(frozen=True, kw_only=True)
class FileTicket(Step, Ticket):
    def model(self) -> Activity:
        return Activity(**self.common(), **self.ticket())


@dataclass(frozen=True, kw_only=True)
class Page(Step):
    summary: str | None = checked(text(), None)

    def model(self) -> Activity:
        return Activity(**self.common(), summary=self.summary)


@dataclass(frozen=True, kw_only=True)
class TrafficSet(Step):
    weights: dict[str, int] = checked(percent_map(), required=True)
    emergency: bool = checked(flag(), False)

    def model(self) -> Activity:
        return Activity(**self.common(), weights=dict(self.weights), emergency=self.emergency)


@dataclass(frozen=True, kw_only=True)
class Failover(Step):
    from_: str = checked(text(), key="from", required=True)

    def model(self) -> Activity:
        return Activity(**self.common(), backend=self.from_)


METHOD = {"inject-fault": InjectFault, "wait": Wait, "file-ticket": FileTicket, "page": Page,
          "traffic-set": TrafficSet, "failover": Failover}


@dataclass(frozen=True, kw_only=True)
class Act:
    """An on-call action, `after` the acknowledgement."""

    name: str | None = _name()
    action: str = checked(text(*RESPONDER_ACTIONS), required=True)
    after: int = checked(duration(), 0)

    def common(self) -> dict:
        return {"name": self.name or self.action, "action": self.action, "after": self.after}


@dataclass(frozen=True, kw_only=True)
class ActFailover(Act):
    from_: str = checked(text(), key="from", required=True)

    def model(self) -> Activity:
        return Activity(**self.common(), backend=self.from_)


@dataclass(frozen=True, kw_only=True)
class ActFileTicket(Act, Ticket):
    def model(self) -> Activity:
        return Activity(**self.common(), **self.ticket())


RESPONDER = {"failover": ActFailover, "file-ticket": ActFileTicket}


# ---------------------------------------------------------------------------------------------
# Steady-state probes (tag `probe`)


def _levels() -> Check:
    def convert(value):
        levels = [value] if isinstance(value, str) else value
        if not isinstance(levels, list) or not levels or any(lv not in STATUS_LEVELS for lv in levels):
            raise Bad(f"expected a status level or a list of them ({', '.join(STATUS_LEVELS)}), got {show(value)}")
        return tuple(levels)
    return Check(convert, ("ok",))


def _alert_count() -> Check:
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise Bad(f"expected the number of firing alerts tolerated (0 or more), got {show(value)}")
        return value
    return Check(convert, 0)


@dataclass(frozen=True, kw_only=True)
class ProbeBase:
    name: str | None = _name()
    probe: str = checked(text(*PROBES), required=True)
    if TYPE_CHECKING:  # each probe declares its own, with its check and default
        tolerance: Any

    def model(self) -> Probe:
        extra = {k: getattr(self, k) for k in ("slos", "backend", "severity") if hasattr(self, k)}
        if "slos" in extra:
            extra["slos"] = tuple(extra["slos"])
        return Probe(self.name or self.probe, self.probe, self.tolerance, **extra)


@dataclass(frozen=True, kw_only=True)
class SloStatus(ProbeBase):
    slos: list[str] = checked(names(), ())
    backend: str | None = checked(text(), None)
    tolerance: Any = checked(_levels(), ("ok",))


@dataclass(frozen=True, kw_only=True)
class AlertsFiring(ProbeBase):
    severity: str | None = checked(text("page", "ticket"), None)
    tolerance: int = checked(_alert_count(), 0)


@dataclass(frozen=True, kw_only=True)
class TrafficSplit(ProbeBase):
    tolerance: dict[str, int] | None = checked(percent_map(), None)


@dataclass(frozen=True, kw_only=True)
class FreezeActive(ProbeBase):
    tolerance: bool = checked(flag(), True)


PROBE = {"slo-status": SloStatus, "alerts-firing": AlertsFiring, "traffic-split": TrafficSplit,
         "freeze-active": FreezeActive}


# ---------------------------------------------------------------------------------------------
# Stop conditions (tag `condition`)


@dataclass(frozen=True, kw_only=True)
class Stop:
    name: str | None = _name()
    condition: str = checked(text(*STOP_CONDITIONS), required=True)

    def model(self) -> StopCondition:
        extra = {k: getattr(self, k) for k in ("slo", "above", "below", "backend", "severity") if hasattr(self, k)}
        return StopCondition(self.name or self.condition, self.condition, **extra)


@dataclass(frozen=True, kw_only=True)
class BudgetSpent(Stop):
    slo: str = checked(text(), required=True)
    above: float = checked(number(0, 100, low_open=True), required=True)


@dataclass(frozen=True, kw_only=True)
class BudgetRemaining(Stop):
    slo: str = checked(text(), required=True)
    below: float = checked(number(-100, 1), required=True)


@dataclass(frozen=True, kw_only=True)
class AlertFiring(Stop):
    slo: str | None = checked(text(), None)
    backend: str | None = checked(text(), None)
    severity: str = checked(text("page", "ticket"), "page")


STOP = {"budget-spent": BudgetSpent, "budget-remaining": BudgetRemaining, "real-incident-open": Stop,
        "alert-firing": AlertFiring}


# ---------------------------------------------------------------------------------------------
# Expectations (tag `expect`); every deadline (`within`) counts from the first injected fault


@dataclass(frozen=True, kw_only=True)
class Expect:
    name: str | None = _name()
    expect: str = checked(text(*EXPECTATIONS), required=True)
    within: int | None = checked(duration(1), required=True)  # optional in some (change-refused)

    def model(self) -> Expectation:
        extra = {k: getattr(self, k) for k in ("slo", "backend", "severity", "vendor", "category", "full", "window",
                                               "action", "guard", "alert", "cause", "max") if hasattr(self, k)}
        if hasattr(self, "from_"):
            extra["backend"] = self.from_
        for name, key in (("overrides", "overrides"), ("mentions", "mentions"), ("excludes", "not_mentions"),
                          ("mentions", "words")):
            if hasattr(self, key):
                extra[name] = tuple(getattr(self, key))
        extra = {k: v for k, v in extra.items() if v is not None}
        return Expectation(name=self.name or self.expect, expect=self.expect, within=self.within, **extra)


@dataclass(frozen=True, kw_only=True)
class Detected(Expect):
    slo: str | None = checked(text(), None)
    backend: str | None = checked(text(), None)
    severity: str = checked(text("page", "ticket"), "page")
    alert: str | None = checked(text(), None)
    cause: str | None = checked(text(*CAUSES), None)


@dataclass(frozen=True, kw_only=True)
class Paged(Expect):
    mentions: list[str] = checked(names(), ())
    not_mentions: list[str] = checked(names(), ())


@dataclass(frozen=True, kw_only=True)
class FailoverApplied(Expect):
    from_: str = checked(text(), key="from", required=True)
    overrides: list[str] = checked(names(*GUARDS, what="guard"), ())
    full: bool = checked(flag(), False)


@dataclass(frozen=True, kw_only=True)
class VendorTicket(Expect):
    vendor: str = checked(text(), required=True)
    category: str = checked(text(), required=True)


@dataclass(frozen=True, kw_only=True)
class VendorResponded(Expect):
    vendor: str = checked(text(), required=True)
    category: str | None = checked(text(), None)


@dataclass(frozen=True, kw_only=True)
class SloRecovered(Expect):
    slo: str = checked(text(), required=True)
    window: int = checked(duration(10, 86400), 300)


@dataclass(frozen=True, kw_only=True)
class ChangeRefused(Expect):
    within: int | None = checked(duration(1), None)
    action: str = checked(text("set"), "set")
    guard: str = checked(text(*GUARDS), required=True)


@dataclass(frozen=True, kw_only=True)
class AtMost(Expect):
    """pages, tickets: at most `max` over the drill (or until `within`)."""

    within: int | None = checked(duration(1), None)
    max: int = checked(integer(0, 1000), required=True)


@dataclass(frozen=True, kw_only=True)
class TicketsAtMost(AtMost):
    vendor: str | None = checked(text(), None)
    category: str | None = checked(text(), None)


@dataclass(frozen=True, kw_only=True)
class NoTicket(Expect):
    within: int | None = checked(duration(1), None)
    vendor: str | None = checked(text(), None)


@dataclass(frozen=True, kw_only=True)
class NoFlap(Expect):
    """No move back toward `backend` within `window` of a move away from it."""

    within: int | None = checked(duration(1), None)
    backend: str = checked(text(), required=True)
    window: int = checked(duration(10, 86400), 1800)


@dataclass(frozen=True, kw_only=True)
class PageNames(Expect):
    within: int | None = checked(duration(1), None)
    words: list[str] = checked(names(), required=True)


EXPECT = {"detected": Detected, "paged": Paged, "acknowledged": Expect, "escalated": Expect,
          "failover-applied": FailoverApplied, "vendor-ticket": VendorTicket, "vendor-responded": VendorResponded,
          "slo-recovered": SloRecovered, "change-refused": ChangeRefused, "pages": AtMost, "tickets": TicketsAtMost,
          "no-ticket": NoTicket, "no-flap": NoFlap, "page-names": PageNames}
