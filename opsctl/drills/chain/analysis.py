"""What a chain drill works out beside the hops: what the burn-rate maths predicts from the fault
predicted to page first (and the response hops through the drill's routing), what the faults did to the requests
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
        """What the burn-rate maths predicts on the drill's own rules (None if nothing): for the fault
        predicted to page first over all the scenario's faults (prediction.first_page, at the
        scenario's own onsets), its times after the first fault (decisions/0314, 0350)."""
        from opsctl.drills.prediction import chain_prediction, shifted, with_fault
        from opsctl.slo.loading import load_slos
        from opsctl.slo.rule_plan import RuleSettings, plan_rules

        split = getattr(self, "split_at_start", None) or self._split()  # the split before the method ran
        try:
            plans = plan_rules(load_slos([self.cfg.slo_dir], self.cfg.backends, config=self.cfg),
                               RuleSettings.from_config(self.cfg))
        except OpsctlError as exc:
            self._say("prediction", f"none: {exc.message}")
            return None
        from opsctl.drills.scenario import default_backend, resolve_slo

        detected = next((e.slo for e in self.scenario.expectations if e.expect == "detected" and e.slo), None)
        if detected is not None:
            detected = resolve_slo(detected, [p.slo.name for p in plans], self.cfg.service) or detected
        from opsctl.drills.fault_model import LATENCY_FAULTS, traffic_load

        start = first.get("scenario_at", first["on_at"])  # the first fault's instant in the scenario's time
        index, onset = self._first_paging_fault(plans, split, start)
        fault = self.scenario.faults[index]
        backend = first["backend"] if index == 0 else (fault.backend or default_backend(fault.kind, self.cfg) or "")
        if index:  # the page comes from a later fault than the detecting SLO's expectation may name
            detected = None
        if self.mode != "chain":  # live: real backends and traffic, not the simulator's latency model or rate
            if fault.kind in LATENCY_FAULTS:  # a delay or a scaled-down Deployment: not the simulator's
                return None
            pred = chain_prediction(plans, fault.kind, dict(fault.params), backend, split, slo=detected,
                                    group_wait=self.group_wait)
            return None if pred is None else with_fault(shifted(pred, onset), self.scenario, index, onset)
        pred = chain_prediction(plans, fault.kind, dict(fault.params), backend, split,
                                slo=detected, group_wait=self.group_wait,
                                kinds={n: b.kind for n, b in self.cfg.backends.items()},
                                load=traffic_load(start + onset), peak_rps=self.scenario.embedded.peak_rps)
        if pred is None:
            return None
        pred = self._predict_response(shifted(pred, onset), plans, fault, backend, onset)
        return None if pred is None else with_fault(pred, self.scenario, index, onset)

    def _first_paging_fault(self, plans, split: dict[str, float], start: float) -> tuple[int, float]:
        """The index of the fault predicted to page first (prediction.first_page on the scenario's
        own onsets, which the chain keeps after the first fault, the rules' own grid) and its onset
        after the first fault; the first fault when none is predicted to page. Each fault's
        predicted page is kept (`fault_pages`): the drill does not settle before the latest."""
        from opsctl.drills.prediction import first_page

        try:
            pages = first_page(self.cfg, self.scenario, plans, split, start=start)
        except OpsctlError:  # a fault the simulator's model cannot say: the first fault, as before
            return 0, 0.0
        self.fault_pages = [p.page_seconds for p in pages.faults]
        return (pages.first.fault, pages.first.onset_seconds) if pages.first is not None else (0, 0.0)

    def _predict_response(self, pred: Prediction | None, plans, fault, backend: str,
                          onset: float = 0.0) -> Prediction | None:
        """The mitigate and ticket hops (prediction.response_hops): the first tier's alert walked
        down the drill's routing tree to serve's receiver (its group_wait, as shortened), then the
        policy it reaches; `onset` later (the fault's, after the first). The page keeps the
        prediction's own (the longest group_wait)."""
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
                                 params=dict(fault.params), backend_kind=self.cfg.backends[backend].kind,
                                 onset=onset)
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


