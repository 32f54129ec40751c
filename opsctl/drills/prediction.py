"""What the burn-rate maths predicts for a drill's fault, beside what happened, and what each hop cost.

For a step fault that burns the error budget at B times the sustainable rate from a clean baseline,
a multi-window alert (long window L, short window S, factor F, for: D) first holds when the long
window's average reaches F: at F x L / B after the onset (the short window, S < L, got there
first), and fires after D more, both on the rule's evaluation grid. B <= F never fires. B is read
from the drill's own alerts: the short-window burn of the SLO's first page alert whose short window
lay wholly inside the fault (a step fault's short window then holds only the fault).

Each hop (detect, page, mitigate, ticket) is set beside the error budget the drill had spent by
then, for the detecting SLO (the drill's burn meter, as in the report's budget section).

After detection the response follows from the config, not from the maths of the burn
(`response_hops`): the first tier predicted to fire names the alert (its labels as the rules write
them, its cause as its annotation would read it from the fault's outcomes); Alertmanager's
PagerDuty route pages after its group_wait, and its `opsctl` route delivers the alert to serve after
its own (the fast tier's routes wait less; deploy/alertmanager.yml, modelled by the scenario's
`paging`); the policy that alert reaches (`automation.policies`, by labels and cause, as serve
chooses) then runs its actions in order as the delivery arrives, with no delay of their own: the
failover (mitigate) and the ticket, in the category the policy or the cause gives. A policy without
the action, no matching policy, or a dry run predicts no such hop, and says why.

The chain drill predicts before anything is measured, from the fault's parameters: the burn B each
SLO sees from it in the simulator's model (drills/fault_model.py), then the same `predict()`.

Both worlds predict the fault that pages first over all of a scenario's faults (`first_page`,
from each fault's parameters before the method runs), not simply the first one: its SLO, its burn,
its cause and ticket, every time after the scenario's first fault (its onset added; the tiers stay
after its own onset), and the section names it when it is not the first (decisions/0314).

What it builds is the report's typed prediction (report_burn.Prediction and its parts), each part
written with the keys, in the order, that the report has always held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from opsctl.drills.fault_model import FaultBurn, fault_burns, latency_burns, outcome_shares
from opsctl.drills.report_burn import PredictedHop, PredictedSlo, Prediction, Response, Tier
from opsctl.drills.report_part import Number
from opsctl.errors import OpsctlError
from opsctl.model import Model

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.drills.expectations import Observations
    from opsctl.drills.phases import Observed
    from opsctl.drills.report_model import Measurements
    from opsctl.drills.scenario import Paging, Scenario
    from opsctl.slo.rule_plan import SloRulePlan

HOPS = (("detect", "time_to_detect"), ("page", "time_to_page"), ("mitigate", "time_to_mitigate"),
        ("ticket", "time_to_vendor_routing"))
# the chain's prediction is written with these keys, in this order (no_page, note and response after)
CHAIN_KEYS = ("slo", "burn", "bad_share", "burn_basis", "tiers", "group_wait_seconds", "predicted_detection_seconds",
              "predicted_page_seconds", "measured_detection_seconds", "slos", "hops")


class PredictedRun(Protocol):
    """What the prediction reads of a drill's run (context.DrillRun, as report.ReportedRun)."""

    scenario: Scenario
    mode: str
    env: Any

    def slo_name(self, name: str) -> str: ...


class ResponseHops(Model):
    """response_hops' answer: the response part of the prediction, and each hop after detection as
    (predicted seconds or None, why)."""

    response: Response
    hops: dict[str, tuple[Number | None, str]]


def fault_burn(obs: Observations, slo: str, onset: float = 0.0) -> tuple[float | None, str]:
    """B for `slo`: the short-window burn of its first page alert whose short window lay inside the
    fault (`obs`: the method's expectations.Observations; `onset`: the fault's, after the first)."""
    t0 = obs.t0
    found: list[tuple[float, Any]] = []
    for (name, severity, _), (at, alert) in obs.first_firing.items():
        short = getattr(alert, "short_window", None)
        seconds = _seconds(short)
        if (name == slo and severity == "page" and seconds and t0 is not None and at - t0 - onset >= seconds
                and hasattr(alert, "short_burn_rate")):
            found.append((at, alert))
    if not found:
        return None, "no page alert of the SLO fired with its short window inside the fault"
    at, alert = min(found, key=lambda f: f[0])
    burn: float | None = alert.short_burn_rate
    return burn, f"{alert.alertname} {alert.long_window}/{alert.short_window} at t0+{at - (t0 or 0.0):g}s"


def predict(plan: SloRulePlan, burn: float, tick: int | None) -> list[Tier]:
    """Each page tier's predicted time to fire; `tick`: the world evaluates every rule on its own grid
    (the embedded drill, every alerting.interval), else each rule's group interval."""
    out = []
    for alert in plan.alerts:
        if alert.severity != "page":
            continue
        interval = tick or alert.interval or plan.interval
        predicted: int | None
        if burn <= alert.factor:
            predicted = None
            why = f"burn {burn:.1f}x does not exceed the factor {alert.factor:g}x: never fires"
        else:
            holds = alert.factor * alert.long_seconds / burn
            pending = math.ceil(holds / interval) * interval
            predicted = pending + math.ceil(alert.for_seconds / interval) * interval
            why = (f"{alert.factor:g} x {alert.long} / {burn:.1f} = {holds:.0f}s on a {interval}s grid,"
                   f" + for {alert.for_seconds}s")
        out.append(Tier(alert=alert.alertname, tier=alert.tier or "standard", long=alert.long, short=alert.short,
                        factor=alert.factor, for_seconds=alert.for_seconds, interval_seconds=interval,
                        keep_firing_seconds=alert.keep_firing_seconds, predicted_seconds=predicted,
                        why=why).written_as(*Tier.field_names()))
    return out


def prediction(run: PredictedRun, seen: Observed, measurements: Measurements) -> Prediction | None:
    """The report's `prediction` section, from the method's result (`seen`: observe.Observed), for
    the fault predicted to page first (first_page on the split the drill started from); None when
    the drill detected nothing to predict against."""
    t0 = seen.obs.t0
    if t0 is None or not seen.plans:
        return None
    slo = _detecting_slo(run, seen.obs)
    if slo is None:
        return None
    if not any(p.name == slo for p in seen.plans):  # a quality rule: no burn-rate maths to set beside it
        return Prediction(slo=slo, burn=None, burn_basis="a quality rule, not a burn-rate alert: no prediction",
                          tiers=(), predicted_detection_seconds=None,
                          measured_detection_seconds=measurements.time_to_detect,
                          hops=_hops(seen, t0, slo, measurements))
    tick = run.env.tick if run.mode == "embedded" else None
    first = _first_page(run, seen, t0, tick)
    if first is not None and first.slo is not None and any(p.name == first.slo for p in seen.plans):
        slo = first.slo  # the SLO of the earliest page over all faults (decisions/0314)
    index, onset = (first.fault, first.onset_seconds) if first is not None else (0, 0.0)
    plan: SloRulePlan | None = next((p for p in seen.plans if p.name == slo), None)
    burn, basis = fault_burn(seen.obs, slo, onset)
    tiers = predict(plan, burn, tick) if plan is not None and burn is not None else []
    times = [t.predicted_seconds for t in tiers if t.predicted_seconds is not None]
    response = _response(run, plan, tiers, index, onset) if plan is not None else None
    out = Prediction(slo=slo, burn=burn, burn_basis=basis, tiers=tuple(tiers),
                     predicted_detection_seconds=after_first(min(times), onset) if times else None,
                     measured_detection_seconds=measurements.time_to_detect,
                     hops=_hops(seen, t0, slo, measurements, response.hops if response else None),
                     response=response.response if response else None)
    return with_fault(out, run.scenario, index, onset)


def _first_page(run: PredictedRun, seen: Observed, t0: float, tick: int | None) -> FaultPage | None:
    """first_page's earliest page for the run's scenario, on the split the drill started from (the
    state's original split; the config's default when the state holds none)."""
    cfg: Config = run.env.cfg
    state = getattr(run, "state", None)
    stored = state.data.get("split", {}).get("original") if state is not None else None
    split = ({k: float(v) for k, v in stored.items() if isinstance(v, (int, float))} if isinstance(stored, dict)
             else {})
    if not split:
        split = {k: float(v) for k, v in cfg.traffic.default_split.items()}
    if not split:
        return None
    try:
        return first_page(cfg, run.scenario, seen.plans, split, start=t0, tick=tick).first
    except OpsctlError:  # a fault the simulator's model cannot say: the first fault, as before
        return None


def with_fault(pred: Prediction, scenario: Scenario, index: int, onset: float) -> Prediction:
    """`pred` naming the fault it predicts when that is not the scenario's first (`fault`: its
    index, its kind and backend; `onset_seconds`: after the first fault)."""
    if index == 0:
        return pred
    fault = scenario.faults[index]
    return pred.update(fault=index, fault_kind=fault.kind, onset_seconds=onset,
                       note=(pred.note + "; " if pred.note else "")
                       + f"fault {index + 1} ({fault.kind}) pages first, {onset:g}s after the first fault")


def shifted(pred: Prediction, onset: float) -> Prediction:
    """A chain prediction made for a fault (its times after that fault's onset) with its times after
    the scenario's first fault: detection, the page and each predicted hop `onset` later."""
    if not onset:
        return pred
    return pred.update(predicted_detection_seconds=later(pred.predicted_detection_seconds, onset),
                       predicted_page_seconds=later(pred.predicted_page_seconds, onset),
                       hops=tuple(h.update(predicted_seconds=later(h.predicted_seconds, onset)) for h in pred.hops))


def later(value: Number | None, onset: float) -> Number | None:
    """`value` seconds after a fault's onset as seconds after the first fault (`onset` after it):
    unchanged at 0, whole seconds kept whole; None stays None."""
    return None if value is None else after_first(value, onset)


def after_first(value: Number, onset: float) -> Number:
    """later() for a known time."""
    if not onset:
        return value
    total = value + onset
    return int(total) if float(total).is_integer() and isinstance(value, int) else total


def _hops(seen: Observed, t0: float, slo: str, measurements: Measurements,
          predicted: dict[str, tuple[Number | None, str]] | None = None) -> tuple[PredictedHop, ...]:
    """Each hop's measured time and the budget spent by then; with `predicted` (hop -> (seconds,
    why), from response_hops) the prediction beside it."""
    out = []
    for hop, key in HOPS:
        seconds = measurements.seconds(key)
        row = PredictedHop(hop=hop, seconds=seconds,
                           budget_spent=None if seconds is None else _spent_by(seen, slo, t0 + seconds))
        if predicted is not None:
            at, why = predicted.get(hop, (None, "no page tier is predicted to fire"))
            row = row.update(predicted_seconds=at, why=why)
        out.append(row)
    return tuple(out)


def _response(run: PredictedRun, plan: SloRulePlan, tiers: Sequence[Tier], index: int = 0,
              onset: float = 0.0) -> ResponseHops | None:
    """response_hops for the embedded or live drill: its config's policies, its scenario's paging
    and the fault predicted to page first (`index`, injected `onset` seconds after the first)."""
    from opsctl.drills.scenario import default_backend

    cfg: Config = run.env.cfg
    faults = run.scenario.faults
    fault = faults[index] if index < len(faults) else None
    backend = (fault.backend or default_backend(fault.kind, cfg)) if fault is not None else None
    backend_kind = cfg.backends[backend].kind if backend in cfg.backends else None
    return response_hops(cfg, run.scenario.paging, plan, tiers, fault_kind=fault.kind if fault else None,
                         params=dict(fault.params) if fault else {}, backend_kind=backend_kind, onset=onset)


def fault_cause(plan: SloRulePlan, fault_kind: str | None, params: dict[str, Any], backend_kind: str | None) -> str:
    """The `cause` annotation the plan's alerts would carry under the fault: a latency or quality
    alert's fixed cause; an availability alert's dominant bad outcome class (slo.conventions
    CAUSE_OUTCOMES) of the faulted backend's requests in the simulator's model (outcome_shares)."""
    from opsctl.slo import conventions as cv

    if plan.category != "availability":
        return plan.category
    if fault_kind is None or backend_kind is None:
        return cv.DEFAULT_AVAILABILITY_CAUSE
    shares = outcome_shares(backend_kind, fault_kind, params)
    ratios: dict[str, float | None] = {c: sum(shares.get(o, 0.0) for o in outs) for c, outs in cv.CAUSE_OUTCOMES.items()}
    return cv.dominant_cause(ratios) or cv.DEFAULT_AVAILABILITY_CAUSE


def response_hops(cfg: Config, paging: Paging, plan: SloRulePlan, tiers: Sequence[Tier], *, fault_kind: str | None,
                  params: dict[str, Any], backend_kind: str | None, onset: float = 0.0) -> ResponseHops | None:
    """The page, mitigate and ticket hops predicted from the config and the policy once the first
    tier of `tiers` (predict()'s rows for `plan`) fires: the page after the PagerDuty route's
    group_wait; serve's delivery after the opsctl route's (each the fast tier's when the fast tier
    fires first: `paging`'s waits, deploy/alertmanager.yml's by default); then the policy the alert
    reaches, by its labels and its cause as serve matches them, takes its failover and files its
    ticket as the delivery arrives; every hop `onset` seconds later (the fault's onset after the
    scenario's first fault: the hops are timed from the first). None when no tier fires."""
    from opsctl.automation.policy import CompiledPolicy, matching
    from opsctl.slo.rule_exprs import alert_labels
    from opsctl.slo.rule_plan import RuleSettings

    firing = [(t.predicted_seconds, t) for t in tiers if t.predicted_seconds is not None]
    if not firing:
        return None
    detect, first = min(firing, key=lambda f: f[0])
    detect = after_first(detect, onset)
    fast = first.tier == "fast"
    page_wait = paging.fast_group_wait if fast else paging.group_wait
    delivery_wait = paging.fast_automation_group_wait if fast else paging.automation_group_wait
    route = "the fast tier's" if fast else "the"
    alert = next(a for a in plan.alerts if (a.alertname, a.long, a.short) == (first.alert, first.long, first.short))
    labels = alert_labels(plan, alert, RuleSettings.from_config(cfg))
    cause = fault_cause(plan, fault_kind, params, backend_kind)
    candidates = matching([CompiledPolicy.of(p) for p in cfg.automation.policies], labels)
    if any(p.causes for p in candidates):  # serve narrows by the cause the episode opens with
        candidates = [p for p in candidates if not p.causes or cause in p.causes]
    delivered = detect + delivery_wait
    named = f"{first.alert} {first.long}/{first.short} (cause {cause})"
    hops: dict[str, tuple[Number | None, str]] = {
        "detect": (detect, f"{first.alert} {first.long}/{first.short} fires first"
                           + (f", its fault injected {onset:g}s after the first" if onset else "")),
        "page": (detect + page_wait, f"detect + {route} PagerDuty route's group_wait {page_wait:g}s"),
    }
    via = f"detect + {route} opsctl route's group_wait {delivery_wait:g}s to serve"
    category: str | None = None
    for hop, action in (("mitigate", "failover"), ("ticket", "ticket")):
        taking = next((p for p in candidates if getattr(p.policy.actions, action) is not None), None)
        if action == "ticket" and backend_kind is not None and backend_kind != "vendor":
            hops[hop] = (None, "an internal fault: no vendor to file a ticket with")
        elif not candidates:
            hops[hop] = (None, f"no policy matches {named}: serve does nothing")
        elif taking is None:
            hops[hop] = (None, f"policy {candidates[0].name} takes no {action}")
        elif cfg.automation.dry_run or taking.policy.dry_run:
            hops[hop] = (None, f"policy {taking.name} is a dry run: it decides, changes nothing")
        else:
            hops[hop] = (delivered, f"{via}; policy {taking.name} acts as it arrives (no delay of its own)")
            if action == "ticket":
                fixed = taking.policy.actions.ticket.category if taking.policy.actions.ticket else None
                category = fixed or cfg.runbooks.tickets.category_for(cause)
                hops[hop] = (delivered, f"{hops[hop][1]}, filed in {category!r}")
    response = Response(alert=first.alert, tier=first.tier, labels=labels, cause=cause, page_wait_seconds=page_wait,
                        delivery_wait_seconds=delivery_wait, policies=tuple(p.name for p in candidates),
                        ticket_category=category)
    return ResponseHops(response=response, hops=hops)


def _detecting_slo(run: PredictedRun, obs: Observations) -> str | None:
    for e in run.scenario.expectations:
        if e.expect == "detected" and e.slo:
            return run.slo_name(e.slo)
    fired = sorted(((at, name) for (name, sev, _), (at, _a) in obs.first_firing.items()
                    if sev == "page" and obs.t0 is not None and at >= obs.t0))
    return fired[0][1] if fired else None


def _spent_by(seen: Observed, slo: str, at: float) -> float | None:
    """The budget the drill had spent by `at`, measured at that instant by the drill's burn meter
    (its counts at a 10 s step), else the last tick's sample at or before it."""
    meter = seen.meter
    if meter is not None and slo in meter.slos:
        try:
            sample = meter.sample(at, [300], seen.t_method).get(slo)
        except OpsctlError:  # the source cannot answer for that instant: fall back to the tick's sample
            sample = None
        if sample is not None:
            spent: float | None = meter.spent(slo, sample)
            return spent
    rows = [r for r in seen.samples if r["at"] <= at]
    if not rows:
        return None
    slos = rows[-1]["slos"]
    value = slos.get(slo)
    if value is None:
        return None
    tick: float | None = value.get("spent")
    return tick


def _seconds(window: str | None) -> int | None:
    if not window:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        return int(window[:-1]) * units[window[-1]]
    except (KeyError, ValueError):
        return None


# -- the chain drill: the prediction from the fault, before anything is measured ------------------

CHAIN_MARGIN = 180  # seconds past the predicted page: scrapes, serve's actions, the ticket, the on-call's ack


def _tiers(burn: FaultBurn, request_rate: float | None, tick: int | None = None) -> list[Tier]:
    """predict()'s tiers for one SLO's burn; with the SLO's expected requests/s, a tier whose
    minimum-traffic guard that rate does not clear never fires, unless its short window counts its
    minimum of bad events (`min_bad_events`): then it fires once both that count and its factor
    are reached, whichever comes later, plus its `for:`."""
    tiers = predict(burn.plan, burn.burn, tick)
    if request_rate is None:
        return tiers
    by_name = {(a.alertname, a.long, a.short): a for a in burn.plan.alerts}
    out = []
    for row in tiers:
        alert = by_name.get((row.alert, row.long, row.short))
        if alert is not None and row.predicted_seconds is not None and request_rate < alert.min_request_rate:
            bad_rate = request_rate * burn.bad_share
            if alert.min_bad_events > 0 and bad_rate * alert.short_seconds >= alert.min_bad_events:
                grid = tick or alert.interval or burn.plan.interval
                counted = math.ceil(alert.min_bad_events / bad_rate / grid) * grid + alert.for_seconds
                if counted > row.predicted_seconds:
                    row = row.update(predicted_seconds=counted, why=(
                        f"{request_rate:.3g} requests/s is under {alert.min_request_rate:g}/s: fires once {alert.short}"
                        f" counts {alert.min_bad_events:g} bad events ({bad_rate:.3g}/s), + for {alert.for_seconds}s"))
            else:
                row = row.update(predicted_seconds=None, why=(
                    f"{request_rate:.3g} requests/s is under the minimum-traffic guard {alert.min_request_rate:g}/s"
                    + (f" and {alert.short} counts fewer than {alert.min_bad_events:g} bad events" if alert.min_bad_events else "")
                    + ": never fires"))
        out.append(row)
    return out


def chain_prediction(plans: Sequence[SloRulePlan], fault_kind: str, params: dict[str, Any], backend: str,
                     split: dict[str, float], *, slo: str | None, group_wait: float, kinds: dict[str, str] | None = None,
                     load: float | None = None, peak_rps: float | None = None,
                     tick: int | None = None) -> Prediction | None:
    """The chain report's `prediction`, from the fault: the burn of every SLO the fault touches
    (fault_burns for an error share; latency_burns for a slowdown, which needs the backends' `kinds`
    and the traffic `load`), each page tier of the detecting SLO (`slo`, else the SLO predicted to
    page first, else the one burning fastest) by `predict`, on each rule group's own interval;
    detection is the first tier to fire, the page `group_wait` later (Alertmanager's wait before
    the first notification). With `peak_rps` a tier whose minimum-traffic guard the SLO's expected
    rate does not clear never fires. Mitigation and the ticket follow the notification to serve: the
    chain runner adds them from its routing tree and the policy (response_hops), not predicted here.
    When the fault burns but no tier of any SLO fires,
    `no_page` says why ("no page predicted"). None when the fault touches no SLO's bad events."""
    burns = fault_burns(plans, fault_kind, params, backend, split)
    if kinds is not None and load is not None:
        burns += latency_burns(plans, fault_kind, params, backend, split, kinds, load)
    if not burns:
        return None
    total = sum(split.values()) or 1.0
    rows: list[tuple[FaultBurn, list[Tier], Number | None]] = []
    for b in burns:
        rate = None
        if peak_rps is not None and load is not None:
            own = b.plan.slo.backend
            rate = peak_rps * load * (1.0 if own in (None, "all") else split.get(own or "", 0.0) / total)
        tiers = _tiers(b, rate, tick)
        times = [t.predicted_seconds for t in tiers if t.predicted_seconds is not None]
        rows.append((b, tiers, min(times) if times else None))
    firing = [(r, r[2]) for r in rows if r[2] is not None]
    chosen = next((r for r in rows if r[0].slo == slo and r[2] is not None), None)
    if chosen is None:  # the named SLO does not page (or none named): the page comes from the first that does
        chosen = (min(firing, key=lambda f: (f[1], -f[0][0].burn))[0] if firing
                  else next((r for r in rows if r[0].slo == slo), None) or max(rows, key=lambda r: r[0].burn))
    b, tiers, detect = chosen
    page = None if detect is None else detect + group_wait
    at = {"detect": detect, "page": page}
    out = Prediction(
        slo=b.slo, burn=b.burn, bad_share=b.bad_share, burn_basis=b.basis, tiers=tuple(tiers),
        group_wait_seconds=group_wait, predicted_detection_seconds=detect, predicted_page_seconds=page,
        measured_detection_seconds=None,
        slos=tuple(PredictedSlo(slo=r[0].slo, burn=r[0].burn, bad_share=r[0].bad_share, predicted_seconds=r[2])
                   for r in rows),
        hops=tuple(PredictedHop(hop=hop, predicted_seconds=at.get(hop), seconds=None, budget_spent=None)
                   .written_as("hop", "predicted_seconds", "seconds", "budget_spent") for hop, _ in HOPS),
    ).written_as(*CHAIN_KEYS)
    if detect is None:
        fastest = max(rows, key=lambda r: r[0].burn)[0]
        out = out.update(no_page=f"no page predicted: {fault_kind} burns at most {fastest.burn:.3g}x"
                                 f" ({fastest.slo}), which no page tier's factor or guard lets fire")
    elif slo is not None and b.slo != slo:
        out = out.update(note=f"{slo} is not predicted to page: the page comes from {b.slo}")
    return out


def derived_timeout(pred: Prediction | None, default: int) -> tuple[int, str]:
    """The chain drill's timeout when --chain-timeout is not given: the predicted page + CHAIN_MARGIN,
    within 30 s..1 h; when the fault burns but no page is predicted, CHAIN_MARGIN alone (long enough
    to see the rules stay quiet, no longer: waiting cannot bring the page); `default` when nothing is
    predicted."""
    page = pred.predicted_page_seconds if pred is not None else None
    if page is None:
        if pred is not None and pred.no_page:
            return CHAIN_MARGIN, f"{pred.no_page}: the margin {CHAIN_MARGIN}s alone"
        return default, f"no prediction for this fault: the default {default}s"
    seconds = int(min(3600, max(30, math.ceil(page + CHAIN_MARGIN))))
    return seconds, f"predicted page {page:g}s + margin {CHAIN_MARGIN}s"


# -- every fault of a scenario, before the method runs ---------------------------------------------


class FaultPage(Model):
    """One fault's predicted page, from its parameters in the simulator's model (chain_prediction
    on the rules' own grid or the embedded tick): seconds after the scenario's first fault."""

    fault: int  # its index in Scenario.faults
    kind: str
    backend: str
    onset_seconds: float  # when the method injects it, after the first fault
    slo: str | None = None  # the SLO predicted to page first for it
    cause: str | None = None  # the `cause` that page's alert carries (fault_cause)
    detect_seconds: float | None = None
    page_seconds: float | None = None
    ticket_category: str | None = None  # the category that cause files; None: an internal fault files none
    why: str = ""


class FirstPage(Model):
    """The earliest page over all of a scenario's faults (`first`), and each fault's own."""

    faults: tuple[FaultPage, ...] = ()
    first: FaultPage | None = None


def fault_onsets(scenario: Scenario) -> list[float]:
    """Each inject-fault step's onset after the first, from the method's pauses and waits as written:
    both worlds run them so after the first fault (a chain drill caps only what comes before it:
    chain/polling.py, decisions/0350)."""
    t, onsets = 0.0, []
    for step in scenario.method:
        t += step.pause_before
        if step.action == "inject-fault" and step.fault is not None:
            onsets.append(t)
        elif step.action == "wait":
            t += step.duration
        t += step.pause_after
    return [o - onsets[0] for o in onsets] if onsets else []


def first_page(cfg: Config, scenario: Scenario, plans: Sequence[SloRulePlan], split: dict[str, float], *,
               start: float, tick: int | None = None, onsets: Sequence[float] | None = None) -> FirstPage:
    """Every fault of `scenario` predicted from its parameters before the method runs, on the split
    the scenario starts from (`split`), the load at each fault's onset (`start`: the first fault's
    instant) and the scenario's peak rate: its first page (detection + the PagerDuty route's
    group_wait, the fast tier's when it fires first), the cause of that page and the ticket that
    cause files (runbooks.tickets; none for an internal backend: no vendor to file with). `first`
    is the earliest page over all faults. `onsets`: each fault's after the first (fault_onsets'
    by default)."""
    import dataclasses

    from opsctl.drills.fault_model import traffic_load
    from opsctl.drills.scenario import default_backend

    kinds: dict[str, str] = {n: b.kind for n, b in cfg.backends.items()}
    rows: list[FaultPage] = []
    for index, (fault, onset) in enumerate(zip(scenario.faults, onsets if onsets is not None else fault_onsets(scenario))):
        backend = fault.backend or default_backend(fault.kind, cfg)
        if backend is None or backend not in kinds:
            continue
        row = FaultPage(fault=index, kind=fault.kind, backend=backend, onset_seconds=onset)
        pred = chain_prediction(plans, fault.kind, dict(fault.params), backend, split, slo=None, group_wait=0.0,
                                kinds=kinds, load=traffic_load(start + onset), peak_rps=scenario.embedded.peak_rps,
                                tick=tick)
        if pred is None or pred.predicted_detection_seconds is None:
            rows.append(dataclasses.replace(row, why=pred.no_page if pred is not None and pred.no_page
                                   else f"{fault.kind} touches no SLO's bad events"))
            continue
        firing = [t for t in pred.tiers if t.predicted_seconds is not None]
        tier = min(firing, key=lambda t: t.predicted_seconds or 0.0)
        wait = scenario.paging.fast_group_wait if tier.tier == "fast" else scenario.paging.group_wait
        plan = next(p for p in plans if p.slo.name == pred.slo)
        cause = fault_cause(plan, fault.kind, dict(fault.params), kinds[backend])
        internal = kinds[backend] != "vendor"
        category = None if internal else cfg.runbooks.tickets.category_for(cause)
        detect = onset + float(pred.predicted_detection_seconds)
        rows.append(dataclasses.replace(
            row, slo=pred.slo, cause=cause, detect_seconds=detect, page_seconds=detect + wait, ticket_category=category,
            why=(f"{tier.alert} {tier.long}/{tier.short} of {pred.slo} fires {pred.predicted_detection_seconds:g}s"
                 f" after the fault's onset at {onset:g}s, + the PagerDuty route's group_wait {wait:g}s"
                 + ("; an internal fault: no vendor ticket" if internal else f"; cause {cause} files in {category!r}"))))
    paged = [r for r in rows if r.page_seconds is not None]
    return FirstPage(faults=tuple(rows), first=min(paged, key=lambda r: r.page_seconds or 0.0) if paged else None)
