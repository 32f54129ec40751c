"""The drill's automation: the policy engine `opsctl serve` runs, in-process, on the drill's world.

A drill's responses come from `automation.policies`, not from the scenario: every page- or
ticket-severity alert the drill evaluates reaches `PolicyEngine.handle_alert` the way Alertmanager's
`opsctl` routes deliver it to `serve` (each alert its own group, `paging.automation-group-wait`
after it starts firing, `paging.fast-automation-group-wait` for the fast tier, a resolved
notification when it stops), and the due restores are swept
every tick as `serve` sweeps them. The executor is serve's own (`LiveExecutor`: the same mapping of
controller results to outcomes) on the drill's traffic front door, pager and ticket desks, so
what it changes is marked as a drill and lands in the drill's ledgers, where the expectations read
it. An alert no policy matches is said on the timeline ("no policy matched"): a drill whose policies
would do nothing fails its failover and ticket expectations instead of passing on a script.
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING

from opsctl.automation.actions import Outcome
from opsctl.automation.executors import LiveExecutor
from opsctl.drills.context import DrillRun

if TYPE_CHECKING:
    from opsctl.automation.actions import FailoverRequest, PageRequest, RestoreRequest, TicketRequest
    from opsctl.automation.policy import Taken
    from opsctl.automation.policy_engine import PolicyEngine

ROUTED_SEVERITIES = ("page", "ticket")  # deploy/alertmanager.yml: the opsctl route's matcher
RETRIES = 3  # a delivery whose action failed is retried on the next ticks, as serve retries it (bounded)


def fingerprint(labels: dict) -> str:
    """Stable per label set, as Alertmanager's fingerprint is (a hash of the sorted labels)."""
    text = "\x00".join(f"{k}\x01{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class DrillExecutor(LiveExecutor):
    """serve's executor on the drill's world: its traffic service (drill actor, audit fields, drill
    change events), pager and ticket desks. Pages and tickets are marked as a drill and recorded in
    the run's state, so the rollbacks resolve them and the expectations see them."""

    def __init__(self, run: DrillRun, responders):
        super().__init__(run.env.cfg, clock=run.env.clock)
        self.run = run
        self.responders = responders
        self.traffic = run.env.traffic()
        self.controller = self.traffic.controller

    @property
    def pager(self):
        return self.run.env.pager()

    def failover(self, request: "FailoverRequest") -> Outcome:
        return self._written(super().failover(request))

    def restore(self, request: "RestoreRequest") -> Outcome:
        return self._written(super().restore(request))

    def readiness(self, backend: str):
        """The simulated pods as the Deployment's status would count them: the environment's capacity
        follows the pods ready now (env/embedded.py), of the fleet the drill's config declares."""
        from opsctl.traffic.canary import Readiness

        now, fleet = self.run.env.cfg.capacity, self.run.user_cfg.capacity
        if now is None or fleet is None or now.backend != backend or self.run.mode != "embedded":
            return super().readiness(backend)
        desired = fleet.replicas if fleet.replicas is not None else fleet.max_replicas  # as embedded_config counts them
        return Readiness(backend, ready=now.replicas or 0, desired=desired, where="simulated pods")

    def _written(self, outcome: Outcome) -> Outcome:
        from opsctl.traffic.split import Split

        after = outcome.data.get("after") if outcome.status == "applied" else None
        if after:  # the world routes by what the automation wrote from now on; the rollback restores it
            self.run.save_split(Split.from_dict(after, self.order, "the split the automation wrote"))
        return outcome

    def page(self, request: "PageRequest") -> Outcome:
        from opsctl.paging.base import PageEvent

        run = self.run
        key = request.dedup_key[:255]
        if not any(p["dedup_key"] == key for p in run.state.data["pages"]):
            run.state.data["pages"].append({"dedup_key": key, "at": run.now(), "resolved": False, "by": "automation"})
            run.state.save()  # before the page exists: a crash from here on is cleaned up
        result = self.pager.trigger(PageEvent(
            summary=request.summary[:1000], source="opsctl serve (drill)", severity=request.severity, dedup_key=key,
            component=request.context.labels.get("backend"), group=request.context.policy,
            custom_details={**dict(request.details), "drill_run": run.state.run_id}, drill=True, title=request.title,
        ))
        return Outcome("applied", result.detail or f"paged: {request.summary}", {"incident": result.dedup_key or key})

    def file_ticket(self, request: "TicketRequest") -> Outcome:
        vendor = self.cfg.backends[request.backend].vendor
        seen = self.responders.file_ticket_for(
            vendor=vendor, category=request.category, severity=request.severity, subject=request.summary,
            body=request.description, by=f"automation (policy {request.context.policy})",
            key=request.idempotency_key)
        if seen.error is not None:
            raise RuntimeError(seen.error)  # the engine records `failed`, as serve's would
        return Outcome("applied", f"{vendor} ticket {seen.ticket_id}", {"ticket": seen.ticket_id})


class DrillAutomation:
    """Alertmanager's `opsctl` route and `serve`'s policy engine, for one drill run."""

    def __init__(self, run: DrillRun, responders):
        self.run = run
        self.responders = responders
        self.engine: PolicyEngine | None = None  # built when the first alerts are observed
        self.firing: dict[str, tuple[dict, dict, float]] = {}  # fingerprint -> labels, annotations, since

    def _start(self) -> PolicyEngine:
        from opsctl.automation.action_log import ActionLog
        from opsctl.automation.engine_factory import build_engine, incident_store, shape
        from opsctl.automation.fenced import FencedExecutor

        run = self.run
        clock = run.env.clock.now
        # The incidents in the store serve runs (issue 36 item 7): on the configured state backend
        # (the kubernetes one: the cluster's API server, or the loopback one a test stands up), else
        # the file store under the run's state dir, through serve's own builder.
        cfg = run.env.cfg
        state = None
        if cfg.state.backend != "local":
            from opsctl.state import open_state_store

            state = open_state_store(cfg)
        incidents = incident_store(cfg, state=state, directory=run.state.dir, clock=clock)
        # Built by serve's own builder (automation/engine_factory.py), and the executor wrapped as a
        # single serve replica wraps it (operation ids chosen before the write).
        engine = self.engine = build_engine(cfg, incidents, FencedExecutor(DrillExecutor(run, self.responders)),
                                            clock=clock, on_action=self._acted,
                                            actions=ActionLog(run.state.dir / "automation.sqlite"))
        self.responders.observer.obs.engine = shape(engine).to_dict()
        names = ", ".join(p.name for p in engine.policies) or "none"
        dry = " (dry run: nothing changes)" if run.env.cfg.automation.dry_run else ""
        run.say("automation", f"alerts go to the policy engine opsctl serve runs; policies: {names}{dry}")
        return engine

    # -- Alertmanager's opsctl route ------------------------------------------------------------

    def observe(self, alerts: list, now: float) -> None:
        """The alerts firing at `now`: new ones are delivered after the group wait, gone ones resolve."""
        engine = self.engine if self.engine is not None else self._start()
        run = self.run
        paging = run.scenario.paging
        current = {}
        for alert in alerts:
            if alert.severity not in ROUTED_SEVERITIES:
                continue
            fp = fingerprint(alert.labels)
            current[fp] = alert
            # deploy/alertmanager.yml: the fast tier's opsctl route waits a second, the other one 10 s.
            wait = paging.fast_automation_group_wait if alert.labels.get("tier") == "fast" \
                else paging.automation_group_wait
            if fp not in self.firing:
                self.firing[fp] = (dict(alert.labels), dict(alert.annotations), now)
                run.schedule(now + wait, f"alert {alert.alertname} reaches serve",
                             functools.partial(self._deliver, fp, "firing", self.firing[fp], 0))
        for fp in set(self.firing) - set(current):
            item = self.firing.pop(fp)
            wait = paging.fast_automation_group_wait if item[0].get("tier") == "fast" else paging.automation_group_wait
            run.schedule(now + wait, "resolved alert reaches serve",
                         functools.partial(self._deliver, fp, "resolved", item, 0))
        engine.run_due_restores()  # as serve sweeps them; each restore is on the timeline (_acted)

    def _deliver(self, fp: str, status: str, item: tuple[dict, dict, float], attempt: int) -> None:
        from opsctl.automation.policy import ActionFailed, AlertEvent, matching
        from opsctl.clock import format_rfc3339

        run = self.run
        engine = self.engine
        if engine is None:  # observe, which scheduled this delivery, started it
            raise RuntimeError("the drill's policy engine is not started")
        labels, annotations, since = item
        starts_at = format_rfc3339(since)
        event = AlertEvent(key=f"{fp}:{starts_at}:{status}", status=status, labels=labels, annotations=annotations,
                           starts_at=starts_at, fingerprint=fp, group_key=f"{{}}/{{}}:{{{fp}}}", received_at=run.now())
        if not matching(engine.policies, labels):
            if status == "firing":
                obs = self.responders.observer.obs
                obs.unmatched.append((run.now(), event.summary()))
                run.say("automation", f"no policy matched {event.summary()}")
                for action, why in self._cannot_happen(engine, event.summary()).items():
                    if action not in obs.cannot_happen:
                        obs.cannot_happen[action] = why
                        run.say("automation", f"the {action} can no longer happen: {why}")
            return
        try:
            engine.handle_alert(event)
        except ActionFailed as exc:
            if attempt + 1 >= RETRIES:
                run.say("automation", f"gave up on {event.summary()} after {RETRIES} attempts: {exc}")
                return
            run.say("automation", f"retrying {event.summary()} on the next tick: {exc}")
            run.schedule(run.now() + run.env.tick, "alert delivery retried",
                         lambda: self._deliver(fp, status, item, attempt + 1))

    def _cannot_happen(self, engine: "PolicyEngine", unmatched: str) -> dict[str, str]:
        """The actions (failover, ticket) no later alert can bring, once a delivery matched no policy:
        none of the faulted backends' page or ticket rules (any tier, fired or not) matches a policy
        taking the action, and neither the method nor on-call does it by hand. As the chain drill's
        "no policy matched" ends its hops. Quality faults are left to their deadlines (their rules'
        labels are not the burn-rate plans')."""
        from opsctl.automation.policy import matching
        from opsctl.drills.scenario import default_backend
        from opsctl.slo.rule_exprs import alert_labels
        from opsctl.slo.rule_plan import RuleSettings

        run = self.run
        sc, cfg = run.scenario, run.env.cfg
        faulted = {f.backend or default_backend(f.kind, cfg) for f in sc.faults}
        if not faulted or any(f.kind == "quality-regression" for f in sc.faults):
            return {}
        plans = self.responders.observer.plans or []
        settings = RuleSettings.from_config(cfg)
        reachable = [p for plan in plans if plan.slo.backend in faulted for alert in plan.alerts
                     if alert.severity in ROUTED_SEVERITIES
                     for p in matching(engine.policies, alert_labels(plan, alert, settings))]
        by_hand = {a.action for a in sc.activities()}
        out = {}
        for action, hand in (("failover", "failover"), ("ticket", "file-ticket")):
            if hand in by_hand or any(getattr(p.policy.actions, action) is not None for p in reachable):
                continue
            out[action] = (f"automation: no policy matched {unmatched}, and no page or ticket rule of"
                           f" {', '.join(sorted(b for b in faulted if b))} reaches a policy that takes a {action}")
        return out

    def _acted(self, taken: "Taken") -> None:
        run = self.run
        outcome = taken.outcome
        obs = self.responders.observer.obs
        obs.automation.append({"at": run.now(), "policy": taken.policy, "action": taken.action,
                               "status": outcome.status, "detail": outcome.detail, "dry_run": taken.dry_run})
        if taken.action == "failover" and outcome.status in ("refused", "failed"):
            obs.failover_errors.append((run.now(), f"policy {taken.policy}: {outcome.status}: {outcome.detail}"))
        kind = taken.action if taken.action in ("failover", "restore") else "automation"  # the chart marks a failover
        run.say(kind, f"policy {taken.policy}: {taken.action} {outcome.status}"
                              f"{' (dry run)' if taken.dry_run else ''}: {outcome.detail}"[:600])
