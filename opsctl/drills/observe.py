"""Observation and judgement: what the drill sees every tick, and what it decides from it.

Every tick the run loop asks this part to evaluate the burn-rate (and live quality) alerts, sample
the burn of the tracked SLOs, read the pager's incident, the audit log and the tickets through their
public interfaces, poll the stop conditions (a hit raises `Aborted`) and judge the expectations
still open (expectations.py holds the rules; this part keeps the verdicts).

This part owns what the method observes (`Observations`, the burn samples, the verdicts as they are
decided): the responders and the automation record what they did through it, the method returns it
as `Observed` and the judgement as `Judgement` (lifecycle.py), and the report reads those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.drills.context import Aborted, DrillRun
from opsctl.drills.expectations import Judge, TicketSeen, Verdict
from opsctl.drills.phases import Instrumented, Judgement, Observations, Observed
from opsctl.drills.text import burn_over_threshold, duration_text, rate_text
from opsctl.drills.safety import real_incidents
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.measure import BurnMeter
    from opsctl.quality.live import QualityEvaluator
    from opsctl.quality.rules import QualityPlan
    from opsctl.slo.alerts import AlertEvaluator
    from opsctl.slo.rule_plan import RuleSettings, SloRulePlan


class Observer:
    def __init__(self, run: DrillRun):
        self.run = run
        self.obs = Observations()  # what the method observed; the responders and the automation add to it
        self.samples: list[dict] = []
        self.verdicts: dict[int, Verdict] = {}
        self.meter: BurnMeter | None = None  # from the steady state, set by `begin`
        self.t_method: float | None = None
        # set by plan_alerts, before the first tick
        self.plans: list[SloRulePlan] | None = None
        self.settings: RuleSettings | None = None
        self.evaluator: AlertEvaluator | None = None
        self.quality_plan: QualityPlan | None = None
        self._quality: QualityEvaluator | None = None
        self._last_firing: set = set()
        self._last_samples: dict = {}

    # -- alerts ---------------------------------------------------------------------------------

    def plan_alerts(self, source) -> None:
        from opsctl.quality.rules import plan_quality  # the live quality rules run beside the burn-rate alerts
        from opsctl.slo.alerts import AlertEvaluator
        from opsctl.slo.rule_plan import RuleSettings, plan_rules

        run = self.run
        self.settings = settings = RuleSettings.from_config(run.env.cfg)
        self.plans = plans = plan_rules(run.slos, settings)
        self.evaluator = AlertEvaluator(plans, source, settings) if run.mode == "embedded" else None
        self.quality_plan, self._quality = plan_quality(run.env.cfg), None

    def evaluate_alerts(self, at: float):
        from opsctl.slo.alerts import AlertEvaluator

        # Embedded: the past never changes, so one evaluator remembers every instant it computed.
        # Live: late samples may still arrive, so each tick evaluates afresh.
        if self.plans is None or self.settings is None:
            raise RuntimeError("the drill's alerts are not planned yet")
        evaluator = self.evaluator or AlertEvaluator(self.plans, self.run.env.source(), self.settings)
        return evaluator.evaluate(at)

    def evaluate_quality(self, at: float) -> list:
        if self.quality_plan is None:
            return []
        from opsctl.quality.live import QualityEvaluator

        if self._quality is None or self.run.mode != "embedded":  # embedded: the past never changes
            self._quality = QualityEvaluator(self.quality_plan, self.run.env.source())
        return self._quality.evaluate(at).firing

    def alerts(self, now: float):
        """Evaluate every alert at `now`, record first firings, say what fired and what resolved."""
        run = self.run
        evaluation = self.evaluate_alerts(now)
        quality = self.evaluate_quality(now)
        firing = {(a.slo, a.severity, f"{a.long_window}/{a.short_window}"): a for a in evaluation.firing + quality}
        for key, alert in firing.items():
            if key not in self.obs.first_firing:
                self.obs.first_firing[key] = (now, alert)
            if key not in self._last_firing:
                run.say("alert", f"FIRING {alert.describe()}" if hasattr(alert, "describe") else
                        f"FIRING {alert.alertname} {alert.slo} {key[2]}: {burn_over_threshold(alert)}")
        for key in sorted(self._last_firing - set(firing)):  # in one order whatever the hash seed
            run.say("alert", f"resolved {key[1]} {key[0]} {key[2]}")
        self._last_firing = set(firing)
        return evaluation, quality

    # -- burn -------------------------------------------------------------------------------------

    def measure(self, now: float) -> None:
        run = self.run
        windows = {300, 3600} | {e.window for e in run.scenario.expectations if e.expect == "slo-recovered"}
        meter, obs = self.meter, self.obs
        if meter is None:
            raise RuntimeError("the drill's burn meter is not set (the steady state sets it)")
        samples = meter.sample(now, sorted(windows), self.t_method)
        slos: dict[str, dict] = {}
        row = {"at": now, "slos": slos}
        for name, s in samples.items():
            slos[name] = {"burn_5m": s.burn.get(300), "burn_1h": s.burn.get(3600), "spent": meter.spent(name, s)}
            for w, burn in s.burn.items():
                obs.window_burn[(name, w)] = burn
        self.samples.append(row)
        self._last_samples = samples
        if obs.t0 is None:
            return
        for e in run.scenario.expectations:
            if e.expect != "slo-recovered" or e.slo is None:  # the scenario requires its slo
                continue
            slo = run.slo_name(e.slo)
            burn = obs.window_burn.get((slo, e.window))
            # Recovered: errors back within budget over the window (the burn-rate alerts lag behind:
            # a 6h/30m page keeps firing for half an hour after the errors stop).
            if burn is not None and burn > 1.0:
                obs.burning_since.setdefault(slo, now)
            elif slo in obs.burning_since and slo not in obs.recovered_at and burn is not None:
                obs.recovered_at[slo] = now
                run.say("recovered", f"{slo}: burn {rate_text(burn, 2)} over the last {duration_text(e.window)}")

    # -- the pager, the audit log, the tickets -----------------------------------------------------

    def observe_pager(self) -> None:
        """Every incident the drill opened (its own page and the automation's: distinct dedup keys),
        as the pager has it; the first one opened is the page on-call reads."""
        from opsctl.drills.expectations import PageSeen

        run, obs = self.run, self.obs
        if not run.state.data["pages"]:
            return
        pager = run.env.pager()
        seen = {p.dedup_key: p for p in obs.pages}
        for page in run.state.data["pages"]:
            key = page["dedup_key"]
            if key in seen and seen[key].title is not None:
                continue
            try:
                incident = pager.get_incident(key)
            except OpsctlError:
                continue
            seen[key] = PageSeen(key, incident.created_at, incident.title)
        obs.pages = sorted(seen.values(), key=lambda p: p.at)
        if run.page_key not in seen:
            return
        try:
            incident = pager.get_incident(run.page_key)
        except OpsctlError:
            return
        if obs.paged_at is None:
            obs.paged_at = incident.created_at
        obs.page_title = incident.title  # what on-call reads now: the title follows the incident (paging/title.py)
        if obs.acknowledged_at is None and incident.acknowledged_at is not None:
            obs.acknowledged_at = incident.acknowledged_at
            acked = [r for r in incident.responders if r.acknowledged_at is not None]
            obs.acknowledged_by = acked[0].name if acked else None
            if not run.scenario.on_call.simulated:
                run.say("ack", f"{obs.acknowledged_by or 'on-call'} acknowledged the page")
        if obs.escalated_at is None and incident.escalated_at:
            obs.escalated_at = incident.escalated_at[0]

    def observe_audit(self) -> None:
        from opsctl.audit import AuditLog

        run = self.run
        since = self.t_method
        entries = AuditLog(run.env.cfg.audit_path).find(
            lambda e: e.get("kind") == "traffic" and not e.get("dry_run") and e.get("ts", 0) >= since
            and (run.mode == "embedded" or e.get("drill_run") == run.state.run_id
                 or (not run.scenario.on_call.simulated and e.get("action") == "failover")),
            since=since)
        entries.reverse()
        self.obs.failovers = [e for e in entries if e.get("action") == "failover" and e.get("outcome") == "applied"]
        self.obs.moves = [e for e in entries if e.get("outcome") == "applied"]
        self.obs.changes = [e for e in entries if e.get("action") == "set"]

    def observe_ticket(self, seen: TicketSeen) -> None:
        if seen.ticket_id is None:
            return
        try:
            status = self.run.env.tickets(seen.vendor).status(seen.ticket_id)
        except OpsctlError:
            return
        if not status.readable:
            return
        seen.status_value = status.category_value
        seen.status_category = status.category
        if status.first_response_at is not None and seen.first_response_at is None:
            seen.first_response_at = status.first_response_at

    def observe_all(self) -> None:
        self.observe_pager()
        self.observe_audit()
        for seen in self.obs.tickets:
            self.observe_ticket(seen)

    # -- stop conditions ----------------------------------------------------------------------------

    def check_stop_conditions(self, evaluation) -> None:
        for cond in self.run.scenario.stop_conditions:
            hit = self._stop_hit(cond, evaluation)
            if hit:
                raise Aborted(f"stop condition {cond.name!r}: {hit}")

    def _stop_hit(self, cond, evaluation) -> str | None:
        run = self.run
        if cond.condition == "real-incident-open":
            try:
                found = real_incidents(run.user_cfg)
            except OpsctlError as exc:
                return f"cannot tell whether a real incident is open: {exc.message}"
            if found:
                return f"real incident {found[0].id} {found[0].title!r} is {found[0].status}"
            return None
        if cond.condition == "alert-firing":
            slo = run.slo_name(cond.slo) if cond.slo else None
            for a in evaluation.firing:
                if a.severity == cond.severity and (slo is None or a.slo == slo) and (
                        cond.backend is None or a.backend == cond.backend):
                    return f"{a.alertname} {a.slo} {a.long_window}/{a.short_window} is firing"
            return None
        slo = run.slo_name(cond.slo)
        if cond.condition == "budget-spent":
            sample = self._last_samples.get(slo)
            spent = self.meter.spent(slo, sample) if sample and self.meter is not None else None
            if spent is not None and spent > cond.above:
                return f"{slo} spent {spent:.0%} of its period error budget during the drill (limit {cond.above:.0%})"
            return None
        if cond.condition == "budget-remaining":
            from opsctl.slo.report import build_report

            [result] = build_report([s for s in run.slos if s.name == slo], run.env.source(), run.now(),
                                    run.user_cfg.slos.period_seconds, cross_check=False)
            left = result.error_budget_remaining
            if left is not None and left < cond.below:
                return f"{slo} has {left:.0%} of its error budget left (limit {cond.below:.0%})"
            return None
        return None

    # -- expectations ---------------------------------------------------------------------------------

    def judge_all(self, *, final: bool, stopped: str | None = None) -> None:
        """Judge the expectations still open; `final`: the method is over (what is not met now has
        failed), `stopped`: why the drill stopped early, if it did."""
        run = self.run
        judge = Judge(run.slo_name)
        now = run.now()
        for i, e in enumerate(run.scenario.expectations):
            if i in self.verdicts:
                continue
            cut = final and stopped
            # A stopped drill judges only what was decided before it stopped (met, observed wrong,
            # or past its deadline); the rest was never evaluated, which is not a failure.
            verdict = judge.judge(e, self.obs, now, final=final and not cut)
            if verdict is None and cut:
                when = "before the method began" if self.obs.t0 is None else "before this was decided"
                verdict = Verdict(e.name, e.expect, False, e.within, None, None, "",
                                  f"not evaluated: the drill stopped {when} ({stopped})", evaluated=False)
            if verdict is None:
                continue
            self.verdicts[i] = verdict
            run.say("expect", f"{verdict.mark} {e.name}: " + (verdict.detail if verdict.passed else verdict.reason))

    def settled(self) -> bool:
        return self.obs.method_done and len(self.verdicts) == len(self.run.scenario.expectations)

    # -- the phases' results ------------------------------------------------------------------------

    def begin(self, steady: Instrumented, at: float) -> None:
        """The method starts at `at`, measuring with the steady state's instruments."""
        self.meter = steady.meter
        self.t_method = at

    def mark_t0(self, at: float) -> None:
        """The first fault's onset (or the method's start without one): deadlines count from here."""
        if self.run.mark_t0(at):
            self.obs.t0 = at

    def observed(self) -> Observed:
        """The method's result: what it observed so far (all of it once the method ended)."""
        return Observed(t0=self.obs.t0, obs=self.obs, samples=tuple(self.samples), plans=tuple(self.plans or ()),
                        meter=self.meter, t_method=self.t_method)

    def judgement(self) -> Judgement:
        verdicts = tuple(v for _, v in sorted(self.verdicts.items()))
        return Judgement(verdicts=verdicts, failed=tuple(v.name for v in verdicts if not v.passed))
