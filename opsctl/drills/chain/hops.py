"""The hops of the chain, each measured from its own component's evidence.

    fault         the exporter switched the fault on (its own record)
    rule-pending  Prometheus' alerting rule went pending (alerts API: activeAt)
    rule-firing   ... and firing (rules API: the evaluation that found it firing)
    alertmanager  Alertmanager holds the alert (its API v2) and notifies (its notification counters)
    pagerduty     the PagerDuty endpoint opened an incident from an Events API v2 trigger
    serve         `opsctl serve` accepted a delivery (its /metrics)
    policy        a policy acted on it (serve's log: "policy P: ACTION STATUS: detail")
    actuator      the traffic controller applied the failover (the audit log, the split file)
    acknowledged  on-call acknowledged the PagerDuty incident
    ticket        the vendor ticket exists in the configured channel, in its category

A hop that is required and never happens fails the drill; its `last` says what was last seen on
the way to it, so the report can say where the chain broke.

The hops (what each is, where the drill looks) are here; collector.py asks the components,
readings.py holds the queries and the parsing of their answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsctl.drills.report_model import Hop as ReportHop

ORDER = ("fault", "rule-pending", "rule-firing", "alertmanager", "pagerduty", "serve", "policy", "actuator",
         "acknowledged", "ticket")
TITLES = {
    "fault": ("exporter", "fault switched on"),
    "rule-pending": ("prometheus", "burn-rate rule pending"),
    "rule-firing": ("prometheus", "burn-rate rule firing"),
    "alertmanager": ("alertmanager", "Alertmanager received and routed the alert"),
    "pagerduty": ("pagerduty", "PagerDuty incident opened (Events API v2)"),
    "serve": ("opsctl serve", "opsctl serve received the webhook"),
    "policy": ("opsctl serve", "policy acted (serve's record)"),
    "actuator": ("traffic controller", "failover applied by the actuator"),
    "acknowledged": ("pagerduty", "on-call acknowledged the incident"),
    "ticket": ("ticket channel", "vendor ticket filed in its category"),
}

@dataclass
class Hop:
    key: str
    required: bool = True
    at: float | None = None
    evidence: str = ""  # what the component said when the hop happened
    last: str = "nothing seen yet"  # the latest evidence on the way to it
    failed: str | None = None  # reached, but wrong (a refused failover, a ticket in the wrong category)
    title_seen: str | None = None  # pagerduty: the incident's title, as on-call reads it

    @property
    def component(self) -> str:
        return TITLES[self.key][0]

    @property
    def title(self) -> str:
        return TITLES[self.key][1]

    @property
    def passed(self) -> bool:
        return self.at is not None and self.failed is None

    def reach(self, at: float, evidence: str) -> bool:
        if self.at is None:
            self.at, self.evidence = at, evidence
            return True
        return False

    def report(self, t0: float | None) -> ReportHop:
        """The hop as the report holds it (report_model.Hop)."""
        from opsctl.drills.report_model import Hop as ReportHop

        return ReportHop(hop=self.key, component=self.component, title=self.title, required=self.required,
                         passed=self.passed, at=self.at,
                         seconds=None if self.at is None or t0 is None else round(self.at - t0, 3),
                         evidence=self.evidence, last_evidence=self.last, failed=self.failed)



@dataclass
class Targets:
    prometheus: str
    alertmanager: str
    serve: str
    serve_log: Path
    backend: str  # the first fault's backend (named in the evidence lines)
    expect_failover: bool
    ticket_vendor: str | None
    ticket_category: str | None
    pagerduty_receivers: frozenset[str] | None = None  # receivers that notify PagerDuty (None: unknown)
    policies: tuple = ()  # the CompiledPolicy list serve runs (automation/policy.py), to name an unmatched alert
    # The service's matchers (Config.service_matcher, "" when off): on the proxy's series, and on the
    # recorded SLO series (which carry `service`), so another service's burn never shows here.
    scope: str = ""
    recorded_scope: str = ""
    # every fault's backend, the first's first (decisions/0351): a page, an incident or a burn of any
    # of them is the drill's; empty: `backend` alone
    backends: tuple[str, ...] = ()

    @property
    def watched(self) -> tuple[str, ...]:
        return self.backends or (self.backend,)
