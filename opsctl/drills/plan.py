"""`opsctl drill run --dry-run`: what a drill would do and where, after the read-only preflight checks.

Nothing is created or changed: no run directory, no fault, no page, no ticket, no traffic change.
The plan is typed (`DryRunPlan`, and `chain.plan.ChainPlan` for a chain drill, both a `Plan`): the
CLI shows its `to_dict()` as JSON or YAML and its `text()` as a table, and refuses (exit 4) when
its preflight would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opsctl.drills.report import duration_text
from opsctl.drills.safety import Check, check_real_alerts, check_real_incidents
from opsctl.drills.scenario import LiveScaleFault, Scenario, default_backend
from opsctl.drills.text import weights_text
from opsctl.model import Model

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opsctl.config import Config
    from opsctl.drills.scenario import Activity, Fault
    from opsctl.drills.state import RunState


class Plan(Model):
    """A dry run's plan: the scenario, the mode, and the read-only preflight checks."""

    scenario: str
    file: str
    mode: str
    preflight: tuple[Check, ...]

    @property
    def would_refuse(self) -> bool:
        return any(not c.ok for c in self.preflight)

    def refusals(self) -> list[str]:
        """What the preflight would refuse the drill for."""
        return [c.message for c in self.preflight if not c.ok]

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError


class DryRunPlan(Plan):
    """`drill run --dry-run` of an embedded or live drill: each step, what answers the alerts, the
    stop conditions, expectations and rollbacks, as sentences."""

    max_duration: str
    freeze: str | None
    method: tuple[str, ...]
    responders: tuple[str, ...]
    stop_conditions: tuple[str, ...]
    expectations: tuple[str, ...]
    rollbacks: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "file": self.file, "mode": self.mode, "dry_run": True,
            "preflight": [c.to_dict() for c in self.preflight], "would_refuse": self.would_refuse,
            "max_duration": self.max_duration, "freeze": self.freeze,
            "method": list(self.method), "responders": list(self.responders),
            "stop_conditions": list(self.stop_conditions), "expectations": list(self.expectations),
            "rollbacks": list(self.rollbacks),
        }

    def text(self) -> str:
        """The plan as text (`drill run --dry-run`)."""
        lines = [f"dry run of {self.file} ({self.mode}): {self.scenario}", "preflight:"]
        lines += [f"  {c.status}  {c.name}: {c.message}" for c in self.preflight]
        if self.freeze:
            lines.append(f"freeze: a drill freeze {self.freeze!r} is in force for the whole drill")
        for section in ("method", "responders", "stop_conditions", "expectations", "rollbacks"):
            lines.append(section.replace("_", " ") + ":")
            items: tuple[str, ...] = getattr(self, section)
            lines += [f"  - {item}" for item in items] or ["  - none"]
        lines.append(f"bounded by max-duration {self.max_duration}; nothing was changed")
        return "\n".join(lines)


def dry_run_plan(scenario: Scenario, user_cfg: Config, *, live: bool) -> DryRunPlan:
    from opsctl.drills.cleanup import interrupted_runs

    checks = [check_real_incidents(user_cfg), check_real_alerts(user_cfg, strict=live)]
    if live:
        checks.append(interrupted_check(interrupted_runs(user_cfg)))
    mode = "live" if live else "embedded"
    where = "<state_dir>/drills/<run-id>/" if not live else None
    cfg = user_cfg
    steps = []
    for i, a in enumerate(scenario.method):
        text = f"{a.action}: {a.name}"
        if a.fault is not None:
            text = f"inject {a.fault.describe()} into {_fault_target(a.fault, cfg, live, where)}"
        elif a.action == "file-ticket":
            text = _ticket_text(a, cfg, live, where)
        elif a.action == "traffic-set":
            text = f"routine traffic set {weights_text(a.weights)} through {_actuator(cfg, live, where)} (guards apply)"
        elif a.action == "failover":
            text = f"fail over from {a.backend} through {_actuator(cfg, live, where)}"
        pause = f" after {duration_text(a.pause_before)}" if a.pause_before else ""
        steps.append(f"method[{i}]{pause}: {text}")
    oc = scenario.on_call
    responders = _automation_plan(cfg, live, where)
    pager = f"the local pager ledger in {where}" if not live else f"the {cfg.paging.provider} pager"
    responders.append(f"a firing page-level alert pages on-call after {duration_text(scenario.paging.group_wait)} via"
                      f" {pager}, marked [DRILL] (drill: true in the details)")
    if oc.simulated:
        if oc.acknowledge_after is not None:
            responders.append(f"{oc.name} acknowledges {duration_text(oc.acknowledge_after)} after the page")
        if oc.escalate_after is not None:
            responders.append(f"unacknowledged after {duration_text(oc.escalate_after)} the page escalates; "
                              f"{oc.secondary_name} acknowledges after "
                              f"{duration_text(oc.secondary_acknowledge_after) if oc.secondary_acknowledge_after is not None else 'never'}")
        for a in oc.actions:
            what = (f"fails over from {a.backend} through {_actuator(cfg, live, where)}" if a.action == "failover"
                    else _ticket_text(a, cfg, live, where))
            responders.append(f"{duration_text(a.after)} after acknowledging: {what}")
    else:
        responders.append("on-call is real: the drill watches the pager, the audit log and the ticket records")
    if scenario.vendor.simulated and scenario.vendor.respond_after is not None:
        responders.append(f"the vendor responds {duration_text(scenario.vendor.respond_after)} after the ticket"
                          + ("" if not live else " (only on the local ticket ledger; a real vendor answers for itself)"))
    return DryRunPlan(
        scenario=scenario.title, file=scenario.path, mode=mode, preflight=tuple(checks),
        max_duration=duration_text(scenario.max_duration),
        freeze=scenario.freeze.name if scenario.freeze else None,
        method=tuple(steps), responders=tuple(responders),
        stop_conditions=tuple(f"{s.name} ({s.condition})" for s in scenario.stop_conditions),
        expectations=tuple(f"{e.name} ({e.expect}" + (f", within {duration_text(e.within)})" if e.within else ")")
                           for e in scenario.expectations),
        rollbacks=tuple(scenario.rollbacks),
    )


def interrupted_check(runs: Sequence[RunState]) -> Check:
    if runs:
        ids = ", ".join(r.run_id for r in runs[:3])
        return Check("no interrupted drill awaiting cleanup", False,
                     f"{len(runs)} drill(s) stopped without rolling back ({ids}): run `opsctl drill cleanup` first")
    return Check("no interrupted drill awaiting cleanup", True, "none")


def _fault_target(fault: Fault, cfg: Config, live: bool, where: str | None) -> str:
    backend = fault.backend or default_backend(fault.kind, cfg)
    if not live:
        return f"the simulated traffic of {backend} in the drill's own store ({where}metrics.sqlite)"
    if fault.live is None:
        return "(no live target: the scenario needs fault.live)"
    if isinstance(fault.live, LiveScaleFault):
        replicas = fault.live.replicas if fault.live.replicas is not None else "current x (1 - rate)"
        return f"Deployment {fault.live.namespace}/{fault.live.deployment} scaled to {replicas} replicas"
    route = fault.live.route or "its first HTTP route"
    return f"an Istio fault on VirtualService {fault.live.namespace}/{fault.live.virtual_service} ({route})"


def _actuator(cfg: Config, live: bool, where: str | None) -> str:
    if not live:
        return f"the drill's own split file ({where}traffic/split.json)"
    return f"the {cfg.traffic.actuator} actuator (audited with drill: true)"


def _automation_plan(cfg: Config, live: bool, where: str | None) -> list[str]:
    """What answers the drill's alerts: the policies `opsctl serve` runs (automation.py)."""
    policies = cfg.automation.policies
    if not policies:
        return ["automation.policies is empty: no alert moves traffic or files a ticket (the drill will say so)"]
    out = []
    dry = " (dry run: decides, changes nothing)" if cfg.automation.dry_run else ""
    for p in policies:
        acts = p.actions
        what = [f"fail over from the alert's backend through {_actuator(cfg, live, where)}"] if acts.failover else []
        if acts.page:
            what.append(f"page ({acts.page.severity})")
        if acts.ticket:
            # The policy's category, else the alert's cause's (runbooks.tickets: auth -> auth_category).
            fixed = acts.ticket.category
            categories = [fixed] if fixed else list(dict.fromkeys(
                cfg.runbooks.tickets.category_for(c) for c in ("server_error", "auth")))
            routes = sorted({f"{b.vendor}: category {c} -> " + repr(_vendor_category(cfg, b.vendor, c))
                             for b in cfg.backends.values() if b.kind == "vendor" and b.vendor for c in categories})
            how = "" if fixed else " by the alert's cause"
            what.append(f"file a [DRILL] {acts.ticket.severity} ticket{how} ({'; '.join(routes)})")
        if acts.restore:
            what.append("restore after the hold-down")
        match = ", ".join([f"{k}={v}" for k, v in sorted(p.match.items())] + [f"{k}=~{v}" for k, v in sorted(p.match_re.items())])
        out.append(f"automation policy {p.name}{dry} on {match}: " + ", ".join(what))
    return out


def _vendor_category(cfg: Config, vendor: str, category: str) -> str | None:
    """The vendor's queue for a ticket category (tickets.vendors), None when not mapped."""
    vendor_cfg = cfg.tickets.vendors.get(vendor)
    return vendor_cfg.categories.get(category) if vendor_cfg else None


def _ticket_text(a: Activity, cfg: Config, live: bool, where: str | None) -> str:
    vendor_cfg = cfg.tickets.vendors.get(a.vendor) if a.vendor is not None else None
    if vendor_cfg is None:
        return f"file a {a.severity} ticket with unknown vendor {a.vendor!r}"
    value = vendor_cfg.categories.get(a.category) if a.category is not None else None
    routed = repr(value) if value is not None else "NOT MAPPED (the drill will report it)"
    channel = f"the local ticket ledger in {where}" if not live else (vendor_cfg.provider or cfg.tickets.provider)
    return f"file a [DRILL] {a.severity} ticket with {a.vendor} via {channel}, category {a.category} -> {routed}"
