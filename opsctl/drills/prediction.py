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

The chain drill predicts before anything is measured, from the fault's parameters: an error fault's
share of failed requests (ERROR_SHARE); a latency or capacity fault's share of requests over each
latency SLO's threshold, from the simulator's own latency model (`slow_share`: the lognormal, its
load slope, the fault's shift or tail mixture, fast rejections, timeouts), by the normal tail, not
by drawing; B is that share over (1 - goal), then the same `predict()`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.report_model import Measurements

HOPS = (("detect", "time_to_detect"), ("page", "time_to_page"), ("mitigate", "time_to_mitigate"),
        ("ticket", "time_to_vendor_routing"))


def fault_burn(obs, slo: str) -> tuple[float | None, str]:
    """B for `slo`: the short-window burn of its first page alert whose short window lay inside the
    fault (`obs`: the method's expectations.Observations)."""
    t0 = obs.t0
    found = []
    for (name, severity, _), (at, alert) in obs.first_firing.items():
        short = getattr(alert, "short_window", None)
        seconds = _seconds(short)
        if name == slo and severity == "page" and seconds and at - t0 >= seconds and hasattr(alert, "short_burn_rate"):
            found.append((at, alert))
    if not found:
        return None, "no page alert of the SLO fired with its short window inside the fault"
    at, alert = min(found, key=lambda f: f[0])
    return alert.short_burn_rate, f"{alert.alertname} {alert.long_window}/{alert.short_window} at t0+{at - t0:g}s"


def predict(plan, burn: float, tick: int | None) -> list[dict]:
    """Each page tier's predicted time to fire; `tick`: the world evaluates every rule on its own grid
    (the embedded drill, every alerting.interval), else each rule's group interval."""
    out = []
    for alert in plan.alerts:
        if alert.severity != "page":
            continue
        interval = tick or alert.interval or plan.interval
        row = {"alert": alert.alertname, "tier": alert.tier or "standard", "long": alert.long, "short": alert.short,
               "factor": alert.factor, "for_seconds": alert.for_seconds, "interval_seconds": interval,
               "keep_firing_seconds": alert.keep_firing_seconds}
        if burn <= alert.factor:
            row["predicted_seconds"] = None
            row["why"] = f"burn {burn:.1f}x does not exceed the factor {alert.factor:g}x: never fires"
        else:
            holds = alert.factor * alert.long_seconds / burn
            pending = math.ceil(holds / interval) * interval
            row["predicted_seconds"] = pending + math.ceil(alert.for_seconds / interval) * interval
            row["why"] = (f"{alert.factor:g} x {alert.long} / {burn:.1f} = {holds:.0f}s on a {interval}s grid,"
                          f" + for {alert.for_seconds}s")
        out.append(row)
    return out


def prediction(run, seen, measurements: Measurements) -> dict:
    """The report's `prediction` section, from the method's result (`seen`: observe.Observed); {}
    when the drill detected nothing to predict against."""
    t0 = seen.obs.t0
    if t0 is None or not seen.plans:
        return {}
    slo = _detecting_slo(run, seen.obs)
    if slo is None:
        return {}
    if not any(p.name == slo for p in seen.plans):  # a quality rule: no burn-rate maths to set beside it
        return {"slo": slo, "burn": None, "burn_basis": "a quality rule, not a burn-rate alert: no prediction",
                "tiers": [], "predicted_detection_seconds": None,
                "measured_detection_seconds": measurements.time_to_detect,
                "hops": _hops(seen, slo, measurements)}
    plan = next((p for p in seen.plans if p.name == slo), None)
    burn, basis = fault_burn(seen.obs, slo)
    tick = run.env.tick if run.mode == "embedded" else None
    tiers = predict(plan, burn, tick) if plan is not None and burn is not None else []
    times = [t["predicted_seconds"] for t in tiers if t["predicted_seconds"] is not None]
    response = _response(run, plan, tiers) if plan is not None else {}
    out = {"slo": slo, "burn": burn, "burn_basis": basis, "tiers": tiers,
           "predicted_detection_seconds": min(times) if times else None,
           "measured_detection_seconds": measurements.time_to_detect,
           "hops": _hops(seen, slo, measurements, response.get("hops"))}
    if response:
        out["response"] = {k: v for k, v in response.items() if k != "hops"}
    return out


def _hops(seen, slo: str, measurements: Measurements, predicted: dict | None = None) -> list[dict]:
    """Each hop's measured time and the budget spent by then; with `predicted` (hop -> (seconds,
    why), from response_hops) the prediction beside it."""
    out = []
    for hop, key in HOPS:
        seconds = measurements.seconds(key)
        row = {"hop": hop, "seconds": seconds,
               "budget_spent": None if seconds is None else _spent_by(seen, slo, seen.obs.t0 + seconds)}
        if predicted is not None:
            at, why = predicted.get(hop, (None, "no page tier is predicted to fire"))
            row.update(predicted_seconds=at, why=why)
        out.append(row)
    return out


def _response(run, plan, tiers: list[dict]) -> dict:
    """response_hops for the embedded or live drill: its config's policies, its scenario's paging
    and first fault."""
    from opsctl.drills.scenario import default_backend

    cfg = run.env.cfg
    faults = run.scenario.faults
    fault = faults[0] if faults else None
    backend = (fault.backend or default_backend(fault.kind, cfg)) if fault is not None else None
    backend_kind = cfg.backends[backend].kind if backend in cfg.backends else None
    return response_hops(cfg, run.scenario.paging, plan, tiers, fault_kind=fault.kind if fault else None,
                         params=dict(fault.params) if fault else {}, backend_kind=backend_kind)


def fault_cause(plan, fault_kind: str | None, params: dict, backend_kind: str | None) -> str:
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


def response_hops(cfg, paging, plan, tiers: list[dict], *, fault_kind: str | None, params: dict,
                  backend_kind: str | None) -> dict:
    """The page, mitigate and ticket hops predicted from the config and the policy once the first
    tier of `tiers` (predict()'s rows for `plan`) fires: the page after the PagerDuty route's
    group_wait; serve's delivery after the opsctl route's (each the fast tier's when the fast tier
    fires first: `paging`'s waits, deploy/alertmanager.yml's by default); then the policy the alert
    reaches, by its labels and its cause as serve matches them, takes its failover and files its
    ticket as the delivery arrives. {} when no tier fires."""
    from opsctl.automation.policy import CompiledPolicy, matching
    from opsctl.slo.rule_exprs import alert_labels
    from opsctl.slo.rule_plan import RuleSettings

    firing = [t for t in tiers if t["predicted_seconds"] is not None]
    if not firing:
        return {}
    first = min(firing, key=lambda t: t["predicted_seconds"])
    detect = first["predicted_seconds"]
    fast = first["tier"] == "fast"
    page_wait = paging.fast_group_wait if fast else paging.group_wait
    delivery_wait = paging.fast_automation_group_wait if fast else paging.automation_group_wait
    route = "the fast tier's" if fast else "the"
    alert = next(a for a in plan.alerts if (a.alertname, a.long, a.short) == (first["alert"], first["long"], first["short"]))
    labels = alert_labels(plan, alert, RuleSettings.from_config(cfg))
    cause = fault_cause(plan, fault_kind, params, backend_kind)
    candidates = matching([CompiledPolicy.of(p) for p in cfg.automation.policies], labels)
    if any(p.causes for p in candidates):  # serve narrows by the cause the episode opens with
        candidates = [p for p in candidates if not p.causes or cause in p.causes]
    delivered = detect + delivery_wait
    named = f"{first['alert']} {first['long']}/{first['short']} (cause {cause})"
    hops: dict[str, tuple[float | None, str]] = {
        "detect": (detect, f"{first['alert']} {first['long']}/{first['short']} fires first"),
        "page": (detect + page_wait, f"detect + {route} PagerDuty route's group_wait {page_wait:g}s"),
    }
    via = f"detect + {route} opsctl route's group_wait {delivery_wait:g}s to serve"
    out = {"alert": first["alert"], "tier": first["tier"], "labels": labels, "cause": cause,
           "page_wait_seconds": page_wait, "delivery_wait_seconds": delivery_wait,
           "policies": [p.name for p in candidates], "ticket_category": None}
    for hop, action in (("mitigate", "failover"), ("ticket", "ticket")):
        taking = next((p for p in candidates if getattr(p.policy.actions, action) is not None), None)
        if not candidates:
            hops[hop] = (None, f"no policy matches {named}: serve does nothing")
        elif taking is None:
            hops[hop] = (None, f"policy {candidates[0].name} takes no {action}")
        elif cfg.automation.dry_run or taking.policy.dry_run:
            hops[hop] = (None, f"policy {taking.name} is a dry run: it decides, changes nothing")
        else:
            hops[hop] = (delivered, f"{via}; policy {taking.name} acts as it arrives (no delay of its own)")
            if action == "ticket":
                fixed = taking.policy.actions.ticket.category if taking.policy.actions.ticket else None
                out["ticket_category"] = fixed or cfg.runbooks.tickets.category_for(cause)
                hops[hop] = (delivered, f"{hops[hop][1]}, filed in {out['ticket_category']!r}")
    out["hops"] = hops
    return out


def _detecting_slo(run, obs) -> str | None:
    for e in run.scenario.expectations:
        if e.expect == "detected" and e.slo:
            return run.slo_name(e.slo)
    fired = sorted(((at, name) for (name, sev, _), (at, _a) in obs.first_firing.items()
                    if sev == "page" and at >= obs.t0))
    return fired[0][1] if fired else None


def _spent_by(seen, slo: str, at: float) -> float | None:
    """The budget the drill had spent by `at`, measured at that instant by the drill's burn meter
    (its counts at a 10 s step), else the last tick's sample at or before it."""
    meter = seen.meter
    if meter is not None and slo in meter.slos:
        try:
            sample = meter.sample(at, [300], seen.t_method).get(slo)
        except OpsctlError:  # the source cannot answer for that instant: fall back to the tick's sample
            sample = None
        if sample is not None:
            return meter.spent(slo, sample)
    rows = [r for r in seen.samples if r["at"] <= at]
    if not rows:
        return None
    slos = rows[-1]["slos"]
    value = slos.get(slo)
    return None if value is None else value.get("spent")


def _seconds(window: str | None) -> int | None:
    if not window:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        return int(window[:-1]) * units[window[-1]]
    except (KeyError, ValueError):
        return None


# -- the chain drill: the prediction from the fault, before anything is measured ------------------

# fault kind -> the share of the faulted backend's requests it fails, from its parameters (the
# outcomes every availability SLO counts bad: server_error, throttled, auth_error)
ERROR_SHARE = {
    "vendor-5xx": lambda p: p.get("rate", 0.2),
    "oauth-token-failure": lambda p: p.get("rate", 1.0),
    "auth-throttling": lambda p: p.get("rate", 0.3) + p.get("auth_rate", 0.0),
    # lost GPU pods: the simulator sheds `rate` of the internal requests, 4/5 as timeouts and 1/5 as
    # 503s, whatever the load (the rest are queued: `factor` times slower, see latency_burns)
    "gpu-capacity-loss": lambda p: p.get("rate", 0.1),
}
# fault kinds that change the latency of the faulted backend's requests (the simulator's log_shift,
# tail_share/tail_shift or timeouts): latency_burns reads their bad share off the latency model
LATENCY_FAULTS = ("latency-spike", "latency-tail", "gpu-capacity-loss")
CHAIN_MARGIN = 180  # seconds past the predicted page: scrapes, serve's actions, the ticket, the on-call's ack


def fault_burns(plans, fault_kind: str, params: dict, backend: str, split: dict[str, float]) -> list[dict]:
    """The burn B each availability SLO sees from a step fault failing a share of `backend`'s requests
    from a clean baseline: share / (1 - goal) on the backend's own SLO, share x the backend's traffic
    share / (1 - goal) on a service-wide one (backend `all` or none). [] for a fault with no error share."""
    share_of = ERROR_SHARE.get(fault_kind)
    if share_of is None:
        return []
    share = float(share_of(params))
    total = sum(split.values()) or 1.0
    traffic = split.get(backend, 0.0) / total
    out = []
    for plan in plans:
        slo = plan.slo
        if slo.kind != "availability":
            continue
        budget = 1.0 - slo.goal
        if slo.backend == backend:
            bad, basis = share, f"{fault_kind} fails {share:.4g} of {backend}'s requests"
        elif slo.backend in (None, "all"):
            bad, basis = share * traffic, f"{fault_kind} fails {share:.4g} of {backend}'s {traffic:.4g} of the traffic"
        else:
            continue
        out.append({"slo": slo.name, "plan": plan, "bad_share": bad,
                    "burn": bad / budget, "basis": f"{basis}, against a budget of {budget:.4g}"})
    return out


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def outcome_shares(backend_kind: str, fault_kind: str | None = None, params: dict | None = None) -> dict[str, float]:
    """One backend's per-request parameters in the simulator (opsctl.metrics.sim_draw): its profile's
    baseline shares, changed by the fault as the simulator's own incident changes them (its `apply`
    on a single step; nothing is drawn)."""
    import numpy as np

    from opsctl.metrics.simulator import PROFILES, _StepParams

    p = PROFILES[backend_kind]
    one = {"client_error": p.client_error, "throttled": p.throttled, "server_error": p.server_error,
           "timeout": p.timeout, "log_shift": 0.0, "prompt_shift": 0.0, "changed": 0.0, "suggestions": 1.0,
           "completion": 1.0, "auth_error": p.auth_error, "tail_share": 0.0, "tail_shift": 0.0}
    step = _StepParams(**{f: np.full(1, float(one[f])) for f in _StepParams.fields()})
    if fault_kind is not None:
        from opsctl.drills.chain.faults import incident

        incident(fault_kind, "faulted", dict(params or {}), 0.0, 1.0).apply(step, np.ones(1, dtype=bool))
    return {f: float(getattr(step, f)[0]) for f in _StepParams.fields()}


def slow_share(backend_kind: str, shares: dict[str, float], load: float, threshold: float) -> float:
    """The share of one backend's requests slower than `threshold` seconds, from the simulator's
    latency model: answered requests (ok and 5xx) lognormal with log-median ln(median) + load_slope x
    load + the fault's log_shift and shape sigma, `tail_share` of them from a second lognormal
    `tail_shift` slower; rejected ones (4xx, 429, 401) lognormal(ln 25 ms, 0.5); timeouts land only
    in the +Inf bucket, over any finite bound. The latency SLOs count every request (`_count`) and the answers
    within the bound as good, so this is their bad share."""
    from opsctl.metrics.simulator import PROFILES, REJECTED_MEDIAN_SECONDS, REJECTED_SIGMA

    profile = PROFILES[backend_kind]
    bad = sum(shares[k] for k in ("client_error", "throttled", "server_error", "timeout", "auth_error"))
    scale = 1.0 / bad if bad > 1.0 else 1.0  # as the draw does: shares over 1 are scaled to 1
    rejected = (shares["client_error"] + shares["throttled"] + shares["auth_error"]) * scale
    server, timeout = shares["server_error"] * scale, shares["timeout"] * scale
    answered = min(max(1.0 - (rejected + server + timeout), 0.0), 1.0) + server
    mu = math.log(profile.median_seconds) + profile.load_slope * load + shares["log_shift"]
    bound = math.log(threshold)
    tail = min(max(shares["tail_share"], 0.0), 1.0)
    answered_slow = ((1.0 - tail) * normal_sf((bound - mu) / profile.sigma)
                     + tail * normal_sf((bound - mu - shares["tail_shift"]) / profile.sigma))
    rejected_slow = normal_sf((bound - math.log(REJECTED_MEDIAN_SECONDS)) / REJECTED_SIGMA)
    return answered * answered_slow + rejected * rejected_slow + timeout  # timeouts: only in the +Inf bucket


def latency_burns(plans, fault_kind: str, params: dict, backend: str, split: dict[str, float],
                  kinds: dict[str, str], load: float) -> list[dict]:
    """The burn B each latency SLO sees from a step fault that slows `backend` (LATENCY_FAULTS):
    its bad share (slow_share at the SLO's threshold, the fault applied to `backend` only) over
    (1 - goal); a service-wide SLO's bad share is each backend's weighted by its traffic share, the
    others at their baseline. [] for a fault that does not touch latency."""
    if fault_kind not in LATENCY_FAULTS or backend not in kinds:
        return []
    faulted = outcome_shares(kinds[backend], fault_kind, params)
    total = sum(split.values()) or 1.0
    out = []
    for plan in plans:
        slo = plan.slo
        threshold = getattr(slo, "threshold_seconds", None)
        if slo.kind != "latency" or not threshold:
            continue
        budget = 1.0 - slo.goal
        if slo.backend == backend:
            bad = slow_share(kinds[backend], faulted, load, threshold)
            basis = f"{fault_kind} makes {bad:.4g} of {backend}'s requests slower than {threshold:g}s"
        elif slo.backend in (None, "all"):
            bad = sum(split.get(b, 0.0) / total * slow_share(k, faulted if b == backend else outcome_shares(k),
                                                              load, threshold) for b, k in kinds.items())
            basis = (f"{fault_kind} on {backend} ({split.get(backend, 0.0) / total:.4g} of the traffic) makes"
                     f" {bad:.4g} of the service's requests slower than {threshold:g}s")
        else:
            continue
        out.append({"slo": slo.name, "plan": plan, "bad_share": bad, "burn": bad / budget,
                    "basis": f"{basis} (load {load:.3g} of peak), against a budget of {budget:.4g}"})
    return out


def traffic_load(at: float) -> float:
    """The simulator's share of peak traffic at `at` (its weekly profile and holidays, before its 3%
    day and 2% five-minute noise), which moves the latency median with load_slope."""
    import numpy as np

    from opsctl.metrics.sim_calendar import traffic_shape

    step = 10 * (int(at) // 10 + 1)
    return float(min(traffic_shape(np.array([step], dtype=np.int64))[0], 1.0))


def _tiers(burn: dict, request_rate: float | None) -> list[dict]:
    """predict()'s tiers for one SLO's burn; with the SLO's expected requests/s, a tier whose
    minimum-traffic guard that rate does not clear never fires."""
    tiers = predict(burn["plan"], burn["burn"], None)
    if request_rate is None:
        return tiers
    by_name = {(a.alertname, a.long, a.short): a for a in burn["plan"].alerts}
    for row in tiers:
        alert = by_name.get((row["alert"], row["long"], row["short"]))
        if alert is not None and row["predicted_seconds"] is not None and request_rate < alert.min_request_rate:
            row["predicted_seconds"] = None
            row["why"] = (f"{request_rate:.3g} requests/s is under the minimum-traffic guard"
                          f" {alert.min_request_rate:g}/s: never fires")
    return tiers


def chain_prediction(plans, fault_kind: str, params: dict, backend: str, split: dict[str, float], *,
                     slo: str | None, group_wait: float, kinds: dict[str, str] | None = None,
                     load: float | None = None, peak_rps: float | None = None) -> dict:
    """The chain report's `prediction`, from the fault: the burn of every SLO the fault touches
    (fault_burns for an error share; latency_burns for a slowdown, which needs the backends' `kinds`
    and the traffic `load`), each page tier of the detecting SLO (`slo`, else the SLO predicted to
    page first, else the one burning fastest) by `predict`, on each rule group's own interval;
    detection is the first tier to fire, the page `group_wait` later (Alertmanager's wait before
    the first notification). With `peak_rps` a tier whose minimum-traffic guard the SLO's expected
    rate does not clear never fires. Mitigation and the ticket follow the notification to serve: the
    chain runner adds them from its routing tree and the policy (response_hops), not predicted here.
    When the fault burns but no tier of any SLO fires,
    `no_page` says why ("no page predicted"). {} when the fault touches no SLO's bad events."""
    burns = fault_burns(plans, fault_kind, params, backend, split)
    if kinds is not None and load is not None:
        burns += latency_burns(plans, fault_kind, params, backend, split, kinds, load)
    if not burns:
        return {}
    total = sum(split.values()) or 1.0
    rows = []
    for b in burns:
        rate = None
        if peak_rps is not None and load is not None:
            own = b["plan"].slo.backend
            rate = peak_rps * load * (1.0 if own in (None, "all") else split.get(own, 0.0) / total)
        tiers = _tiers(b, rate)
        times = [t["predicted_seconds"] for t in tiers if t["predicted_seconds"] is not None]
        rows.append((b, tiers, min(times) if times else None))
    firing = [r for r in rows if r[2] is not None]
    chosen = next((r for r in rows if r[0]["slo"] == slo and r[2] is not None), None)
    if chosen is None:  # the named SLO does not page (or none named): the page comes from the first that does
        chosen = (min(firing, key=lambda r: (r[2], -r[0]["burn"])) if firing
                  else next((r for r in rows if r[0]["slo"] == slo), None) or max(rows, key=lambda r: r[0]["burn"]))
    b, tiers, detect = chosen
    page = None if detect is None else detect + group_wait
    out = {"slo": b["slo"], "burn": b["burn"], "bad_share": b["bad_share"], "burn_basis": b["basis"],
           "tiers": tiers, "group_wait_seconds": group_wait, "predicted_detection_seconds": detect,
           "predicted_page_seconds": page, "measured_detection_seconds": None,
           "slos": [{"slo": r[0]["slo"], "burn": r[0]["burn"], "bad_share": r[0]["bad_share"],
                     "predicted_seconds": r[2]} for r in rows],
           "hops": [{"hop": hop, "predicted_seconds": {"detect": detect, "page": page}.get(hop), "seconds": None,
                     "budget_spent": None} for hop, _ in HOPS]}
    if detect is None:
        fastest = max(rows, key=lambda r: r[0]["burn"])[0]
        out["no_page"] = (f"no page predicted: {fault_kind} burns at most {fastest['burn']:.3g}x"
                          f" ({fastest['slo']}), which no page tier's factor or guard lets fire")
    elif slo is not None and b["slo"] != slo:
        out["note"] = f"{slo} is not predicted to page: the page comes from {b['slo']}"
    return out


def derived_timeout(pred: dict, default: int) -> tuple[int, str]:
    """The chain drill's timeout when --chain-timeout is not given: the predicted page + CHAIN_MARGIN,
    within 30 s..1 h; when the fault burns but no page is predicted, CHAIN_MARGIN alone (long enough
    to see the rules stay quiet, no longer: waiting cannot bring the page); `default` when nothing is
    predicted."""
    page = (pred or {}).get("predicted_page_seconds")
    if page is None:
        if (pred or {}).get("no_page"):
            return CHAIN_MARGIN, f"{pred['no_page']}: the margin {CHAIN_MARGIN}s alone"
        return default, f"no prediction for this fault: the default {default}s"
    seconds = int(min(3600, max(30, math.ceil(page + CHAIN_MARGIN))))
    return seconds, f"predicted page {page:g}s + margin {CHAIN_MARGIN}s"
