"""What a chain drill works out beside the hops: what the burn-rate maths predicts from the first
fault (and the response hops through the drill's routing), what the faults did to the requests
(attribution), and the error budget the drill spent."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from opsctl.drills.chain.progress import ChainProgress
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.report_burn import Prediction


class ChainAnalysis(ChainProgress):
    def _predict(self, first: dict) -> Prediction | None:
        """What the burn-rate maths predicts from the first fault, on the drill's own rules (None if nothing)."""
        from opsctl.drills.prediction import chain_prediction
        from opsctl.slo.loading import load_slos
        from opsctl.slo.rule_plan import RuleSettings, plan_rules

        step = next(s for s in self.scenario.method if s.action == "inject-fault")
        split = getattr(self, "split_at_start", None) or self._split()  # the split before the method ran
        try:
            plans = plan_rules(load_slos([self.cfg.slo_dir], self.cfg.backends, config=self.cfg),
                               RuleSettings.from_config(self.cfg))
        except OpsctlError as exc:
            self._say("prediction", f"none: {exc.message}")
            return None
        from opsctl.drills.scenario import resolve_slo

        detected = next((e.slo for e in self.scenario.expectations if e.expect == "detected" and e.slo), None)
        if detected is not None:
            detected = resolve_slo(detected, [p.slo.name for p in plans], self.cfg.service) or detected
        from opsctl.drills.fault_model import LATENCY_FAULTS

        if self.mode != "chain":  # live: real backends and traffic, not the simulator's latency model or rate
            if step.fault.kind in LATENCY_FAULTS:  # a delay or a scaled-down Deployment: not the simulator's
                return None
            return chain_prediction(plans, step.fault.kind, dict(step.fault.params), first["backend"], split,
                                    slo=detected, group_wait=self.group_wait)
        from opsctl.drills.fault_model import traffic_load

        pred = chain_prediction(plans, step.fault.kind, dict(step.fault.params), first["backend"], split,
                                slo=detected, group_wait=self.group_wait,
                                kinds={n: b.kind for n, b in self.cfg.backends.items()},
                                load=traffic_load(first.get("scenario_at", first["on_at"])), peak_rps=self.scenario.embedded.peak_rps)
        return self._predict_response(pred, plans, step.fault, first["backend"])

    def _predict_response(self, pred: Prediction | None, plans, fault, backend: str) -> Prediction | None:
        """The mitigate and ticket hops (prediction.response_hops): the first tier's alert walked
        down the drill's routing tree to serve's receiver (its group_wait, as shortened), then the
        policy it reaches. The page keeps the prediction's own (the longest group_wait)."""
        import dataclasses

        from opsctl.drills.chain.routes import receivers_for
        from opsctl.drills.prediction import response_hops
        from opsctl.slo.rule_exprs import alert_labels
        from opsctl.slo.rule_plan import RuleSettings

        if pred is None:
            return pred
        plan = next((p for p in plans if p.slo.name == pred.slo), None)
        firing = [(t.predicted_seconds, t) for t in pred.tiers if t.predicted_seconds is not None]
        if plan is None or not firing or self.routing is None:
            return pred
        _, first = min(firing, key=lambda f: f[0])
        alert = next(a for a in plan.alerts if (a.alertname, a.long, a.short) == (first.alert, first.long, first.short))
        labels = alert_labels(plan, alert, RuleSettings.from_config(self.cfg))
        waits = [w for r, w in receivers_for(self.routing["route"], labels) if r in self.serve_receivers]
        if not waits:
            why = f"the drill's routing sends {first.alert} to no opsctl serve receiver"
            return pred.update(hops=tuple(h.update(why=why) if h.hop in ("mitigate", "ticket") else h
                                          for h in pred.hops))
        wait = int(math.ceil(min(waits)))
        paging = dataclasses.replace(self.scenario.paging, automation_group_wait=wait, fast_automation_group_wait=wait)
        response = response_hops(self.cfg, paging, plan, pred.tiers, fault_kind=fault.kind,
                                 params=dict(fault.params), backend_kind=self.cfg.backends[backend].kind)
        if response is None:  # no tier fires: not reached, `firing` above is the same test
            return pred
        hops = tuple(h.update(predicted_seconds=response.hops[h.hop][0], why=response.hops[h.hop][1])
                     if h.hop in ("mitigate", "ticket") else h for h in pred.hops)
        # the chain's page: the prediction's group_wait
        return pred.update(hops=hops, response=response.response.without("page_wait_seconds"))

    # -- what the faults did --------------------------------------------------------------------

    def _attribute(self) -> None:
        from opsctl.drills.chain.faults import symptoms

        for f in self.fault_records:
            before = self._outcomes(f["backend"], f["on_at"] - 3600, f["on_at"])
            during = self._outcomes(f["backend"], f["on_at"], f.get("off_at") or time.time())
            shares = []
            for outcome in symptoms(f["kind"]) or ("server_error", "throttled", "timeout"):
                shares.append(f"{outcome} {_share(during, outcome)} of {f['backend']}'s requests during the fault"
                              f" ({_share(before, outcome)} before)")
            self.attribution.append({"fault": f["id"], "kind": f["kind"], "backend": f["backend"], "hop": f["hop"],
                                     "seen": "; ".join(shares), "during": during, "before": before})
            self._say("attribution", f"{f['kind']} breaks {f['hop']}: " + "; ".join(shares))

    def _outcomes(self, backend: str, start: float, end: float) -> dict:
        """Requests by outcome: the exporter's own count of what it served."""
        return self.exporter.outcomes_between(start, end)[backend]

    def _measure_budget(self, t0: float) -> None:
        from opsctl.drills.measure import BurnMeter
        from opsctl.metrics.base import open_source

        backends = {f["backend"] for f in self.fault_records}
        slos = [s for s in self.slos if s.backend in backends or s.backend == "all"]
        try:
            source = open_source(self.cfg)
            meter = BurnMeter(source, slos, self.user_cfg.slos.period_seconds)
            meter.measure_period(t0, history_seconds=self.history)
            samples = meter.sample(time.time(), [3600], t0)
        except OpsctlError as exc:
            self._say("budget", f"could not measure the budget spent: {exc.message}")
            return
        if self.history:
            meter.basis = (f"period budget estimated from {self.history / 3600:g}h of backfilled baseline traffic"
                           f" scaled to the {meter.period_seconds // 86400}d period")
        from opsctl.drills.report_burn import Budget, BudgetRow

        rows = tuple(BudgetRow(slo=name, spent=meter.spent(name, s), peak_burn_1h=s.burn.get(3600) or 0.0)
                     for name, s in sorted(samples.items()))
        self.budget = Budget(basis=meter.basis, period_days=meter.period_seconds // 86400, slos=rows)



def _share(counts: dict, outcome: str) -> str:
    from opsctl.metrics.schema import OUTCOMES

    valid = sum(v for k, v in counts.items() if k in OUTCOMES and k != "client_error")
    return "-" if not valid else f"{counts.get(outcome, 0) / valid:.1%}"


