"""The people in a drill and the changes they make: the page, on-call's acknowledgement and
escalation, their actions (fail over, file the vendor ticket), the vendor's response, and the
traffic changes a method step asks for. Each goes through the same pager, ticket desk and traffic
controller a real incident would use; a failure is said on the timeline and left for the
expectations to judge (a drill measures what happened, it does not stop at the first error).
"""

from __future__ import annotations

import functools

from opsctl.drills.context import DrillRun
from opsctl.drills.expectations import TicketSeen
from opsctl.drills.text import duration_text
from opsctl.errors import OpsctlError


def drill_page_key(run: DrillRun) -> str:
    """The dedup key of the drill's page. Embedded, it stands for the page Alertmanager's PagerDuty
    receiver sends, so it carries Alertmanager's key for the service's group on the paging route
    (`incident.grouping.page_key`, the one the automation pages with): one outage, one PagerDuty
    incident, as in production (issue 36 item 1). Live, the drill's page goes to the real pager and
    names the run (`opsctl-drill-...`, what `safety.is_drill_incident` recognises), so it never
    joins a production incident."""
    from opsctl.incident.grouping import page_key

    cfg = run.user_cfg
    if run.mode == "embedded":
        return page_key(cfg.automation.incident.paging_route_key, cfg.service)
    return f"opsctl-drill-{cfg.service}-{run.state.run_id}"[:255]


class Responders:
    def __init__(self, run: DrillRun, observer):
        self.run = run
        self.observer = observer  # what the pager and the ticket desks say after each act
        self.started = False

    # -- the page and on-call ---------------------------------------------------------------------

    def page(self, summary: str, alerts: list) -> None:
        from opsctl.paging.base import PageEvent

        run = self.run
        pager = run.env.pager()
        component = alerts[0].backend if alerts else None
        event = PageEvent(
            summary=summary[:1000], source="opsctl drill", severity=run.scenario.paging.severity,
            dedup_key=run.page_key, component=component,
            custom_details={"drill_run": run.state.run_id, "scenario": run.scenario.title,
                            "alerts": [f"{a.alertname} {a.slo} {a.long_window}/{a.short_window}" for a in alerts]},
            drill=True,
        )
        if not any(p["dedup_key"] == run.page_key for p in run.state.data["pages"]):
            run.state.data["pages"].append({"dedup_key": run.page_key, "at": run.now(), "resolved": False})
            run.state.save()
        try:
            result = pager.trigger(event)
            incident = pager.get_incident(result.dedup_key)
        except OpsctlError as exc:
            self.observer.obs.page_error = exc.message
            run.say("page", f"FAILED: {exc.message}")
            return
        if self.observer.obs.paged_at is None:
            self.observer.obs.paged_at = incident.created_at
            self.observer.obs.page_title = incident.title
        run.say("page", f"paged on-call via {pager.name}: incident {incident.id} {incident.title!r}")
        self._start(incident.created_at)

    def _start(self, paged_at: float | None = None) -> None:
        """On-call's clock starts when the PagerDuty incident opened and notified them: embedded, the
        automation's page may have opened it before Alertmanager's (the same dedup key)."""
        run = self.run
        if self.started or not run.scenario.on_call.simulated:
            return
        self.started = True
        oc = run.scenario.on_call
        now = min(run.now(), paged_at) if paged_at is not None else run.now()
        if oc.acknowledge_after is not None:
            run.schedule(now + oc.acknowledge_after, "primary acknowledges", lambda: self._acknowledge(oc.name))
        if oc.escalate_after is not None:
            run.schedule(now + oc.escalate_after, "escalation", self._escalate)

    def _acknowledge(self, who: str) -> None:
        run = self.run
        if self.observer.obs.acknowledged_at is not None:
            return
        pager = run.env.pager()
        kwargs = {"by": who} if pager.name == "local" else {}
        try:
            pager.acknowledge(run.page_key, **kwargs)
        except OpsctlError as exc:
            run.say("ack", f"FAILED ({who}): {exc.message}")
            return
        self.observer.observe_pager()
        run.say("ack", f"{who} acknowledged the page")
        now = run.now()
        for i, action in enumerate(run.scenario.on_call.actions):
            run.schedule(now + action.after, f"on-call action {i} {action.action}",
                         functools.partial(self._act, action, who))

    def _escalate(self) -> None:
        run = self.run
        if self.observer.obs.acknowledged_at is not None:
            return
        pager = run.env.pager()
        escalate = getattr(pager, "escalate", None)
        if escalate is not None:
            try:
                escalate(run.page_key)
            except OpsctlError as exc:
                run.say("escalate", f"FAILED: {exc.message}")
                return
            run.say("escalate", f"not acknowledged after {duration_text(run.scenario.on_call.escalate_after)}:"
                                " escalated to the next on-call level")
        else:
            run.say("escalate", f"{pager.name} escalates by its own policy; the secondary is simulated")
        after = run.scenario.on_call.secondary_acknowledge_after
        if after is not None:
            name = run.scenario.on_call.secondary_name
            run.schedule(run.now() + after, "secondary acknowledges", lambda: self._acknowledge(name))

    def _act(self, action, who: str) -> None:
        if action.action == "failover":
            self.failover(action.backend, f"{who} fails over")
        elif action.action == "file-ticket":
            self.file_ticket(action, by=who)

    # -- traffic ----------------------------------------------------------------------------------------

    def failover(self, source: str, why: str) -> None:
        run = self.run
        try:
            result = run.env.traffic().failover(source, run.state.incident, reason=f"[DRILL {run.state.run_id}] {why}")
        except OpsctlError as exc:
            self.observer.obs.failover_errors.append((run.now(), exc.message))
            run.say("failover", f"FAILED: {exc.message}")
            return
        order = list(run.env.cfg.backends)
        run.save_split(result.after)
        short = f" (short: {result.shortfall})" if result.shortfall else ""
        overrides = f" overriding {', '.join(result.overrides)}" if result.overrides else ""
        run.say("failover", f"{result.outcome}: {result.before.describe(order)} -> {result.after.describe(order)}"
                            f"{overrides}{short}")

    def traffic_set(self, step) -> None:
        from opsctl.traffic.change import ChangeRequest
        from opsctl.traffic.split import Split

        run = self.run
        ctl = run.env.controller()
        order = list(run.env.cfg.backends)
        weights = dict(step.weights)

        def plan(before):
            return Split.of(weights, dict(before.shadow) if before else {})

        request = ChangeRequest("set", plan, reason=f"[DRILL {run.state.run_id}] {step.name}",
                                incident=run.state.incident if step.emergency else None, emergency=step.emergency)
        try:
            result = ctl.apply(request)
        except OpsctlError as exc:
            run.say("traffic", f"set {Split.of(weights).describe(order)}: {exc.message}")
            return
        run.save_split(result.after)
        run.say("traffic", f"set: {result.outcome}: {result.after.describe(order)}")

    # -- the vendor ticket ----------------------------------------------------------------------------

    def file_ticket(self, step, by: str) -> None:
        """A ticket a method step or on-call's manual path files (the automation files its own)."""
        self.file_ticket_for(vendor=step.vendor, category=step.category, severity=step.severity or "Sev2",
                             subject=step.subject or self.run.scenario.title, body=step.body, by=by)

    def file_ticket_for(self, *, vendor: str, category: str, severity: str, subject: str, body: str, by: str,
                        key: str | None = None) -> TicketSeen:
        """File with the vendor's desk, marked as a drill; what was filed is observed (TicketSeen) and,
        with a simulated vendor, answered after `respond-after`."""
        from opsctl.tickets.base import TicketRequest

        run = self.run
        seen = TicketSeen(vendor=vendor, category=category, asked_at=run.now())
        self.observer.obs.tickets.append(seen)
        desk = run.env.tickets(vendor)
        body = (f"{body}\n\n" if body else "") + (
            f"Game-day drill {run.state.run_id}: {run.scenario.title}.\n"
            f"Filed by {by}. No action is needed beyond routing and acknowledging this ticket.")
        try:
            request = TicketRequest(vendor=vendor, category=category, severity=severity,
                                    subject=subject, body=body, drill=True,
                                    idempotency_key=key or f"drill-{run.state.run_id}-{len(self.observer.obs.tickets)}")
            filed = desk.file(request)
        except OpsctlError as exc:
            seen.error = exc.message
            run.say("ticket", f"FAILED to file with {vendor}: {exc.message}")
            return seen
        vendor_cfg = run.env.cfg.tickets.vendor(vendor)
        seen.ticket_id, seen.filed_at = filed.id, filed.filed_at
        seen.routed_value = vendor_cfg.categories.get(filed.category)
        seen.routed_category = filed.category if seen.routed_value is not None else None
        seen.tags = self._ticket_tags(vendor, filed)
        run.state.data["tickets"].append({"id": filed.id, "vendor": vendor, "key": filed.key,
                                          "provider": filed.provider, "filed_at": filed.filed_at})
        run.state.save()
        self.observer.observe_ticket(seen)
        run.say("ticket", f"{by} filed {filed.id} with {vendor} via {filed.provider}:"
                          f" {filed.subject!r} in {seen.routed_value!r} ({filed.severity})")
        ledger = run.env.vendor_ledger(vendor)
        responder = run.scenario.vendor
        if responder.simulated and responder.respond_after is not None and ledger is not None:
            run.schedule(run.now() + responder.respond_after, "vendor responds",
                         lambda: self._vendor_responds(ledger, seen))
        return seen

    def _ticket_tags(self, vendor: str, filed) -> tuple[str, ...]:
        ledger = self.run.env.vendor_ledger(vendor)
        if ledger is not None:
            for record in ledger.tickets():
                if record["id"] == filed.id:
                    return tuple(record.get("tags") or ())
        return ("drill",) if filed.drill else ()

    def _vendor_responds(self, ledger, seen: TicketSeen) -> None:
        vendor = self.run.scenario.vendor
        ledger.respond(seen.ticket_id, assignee=vendor.assignee, status="open", category=vendor.route_to)
        moved = f", moved to {vendor.route_to}" if vendor.route_to else ""
        self.run.say("vendor", f"{seen.vendor} responded to {seen.ticket_id} ({vendor.assignee}{moved})")
        self.observer.observe_ticket(seen)
