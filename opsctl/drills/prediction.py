"""What the burn-rate maths predicts for a drill's fault, beside what happened, and what each hop cost.

For a step fault that burns the error budget at B times the sustainable rate from a clean baseline,
a multi-window alert (long window L, short window S, factor F, for: D) first holds when the long
window's average reaches F: at F x L / B after the onset (the short window, S < L, got there
first), and fires after D more, both on the rule's evaluation grid. B <= F never fires. B is read
from the drill's own alerts: the short-window burn of the SLO's first page alert whose short window
lay wholly inside the fault (a step fault's short window then holds only the fault).

Each hop (detect, page, mitigate, ticket) is set beside the error budget the drill had spent by
then, for the detecting SLO (the drill's burn meter, as in the report's budget section).
"""

from __future__ import annotations

import math

from opsctl.errors import OpsctlError

HOPS = (("detect", "time_to_detect"), ("page", "time_to_page"), ("mitigate", "time_to_mitigate"),
        ("ticket", "time_to_vendor_routing"))


def fault_burn(run, slo: str) -> tuple[float | None, str]:
    """B for `slo`: the short-window burn of its first page alert whose short window lay inside the fault."""
    t0 = run.obs.t0
    found = []
    for (name, severity, _), (at, alert) in run.obs.first_firing.items():
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
               "factor": alert.factor, "for_seconds": alert.for_seconds, "interval_seconds": interval}
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


def prediction(run, measurements: dict) -> dict:
    """The report's `prediction` section; {} when the drill detected nothing to predict against."""
    t0 = run.obs.t0
    if t0 is None or not run.plans:
        return {}
    slo = _detecting_slo(run)
    if slo is None:
        return {}
    if not any(p.name == slo for p in run.plans):  # a quality rule: no burn-rate maths to set beside it
        return {"slo": slo, "burn": None, "burn_basis": "a quality rule, not a burn-rate alert: no prediction",
                "tiers": [], "predicted_detection_seconds": None,
                "measured_detection_seconds": measurements.get("time_to_detect"),
                "hops": _hops(run, slo, measurements)}
    plan = next((p for p in run.plans if p.name == slo), None)
    burn, basis = fault_burn(run, slo)
    tick = run.env.tick if run.mode == "embedded" else None
    tiers = predict(plan, burn, tick) if plan is not None and burn is not None else []
    times = [t["predicted_seconds"] for t in tiers if t["predicted_seconds"] is not None]
    return {"slo": slo, "burn": burn, "burn_basis": basis, "tiers": tiers,
            "predicted_detection_seconds": min(times) if times else None,
            "measured_detection_seconds": measurements.get("time_to_detect"), "hops": _hops(run, slo, measurements)}


def _hops(run, slo: str, measurements: dict) -> list[dict]:
    out = []
    for hop, key in HOPS:
        seconds = measurements.get(key)
        out.append({"hop": hop, "seconds": seconds,
                    "budget_spent": None if seconds is None else _spent_by(run, slo, run.obs.t0 + seconds)})
    return out


def _detecting_slo(run) -> str | None:
    for e in run.scenario.expectations:
        if e.expect == "detected" and e.slo:
            return run.slo_name(e.slo)
    fired = sorted(((at, name) for (name, sev, _), (at, _a) in run.obs.first_firing.items()
                    if sev == "page" and at >= run.obs.t0))
    return fired[0][1] if fired else None


def _spent_by(run, slo: str, at: float) -> float | None:
    """The budget the drill had spent by `at`, measured at that instant by the drill's burn meter
    (its counts at a 10 s step), else the last tick's sample at or before it."""
    meter = run.meter
    if meter is not None and slo in meter.slos:
        try:
            sample = meter.sample(at, [300], run.t_method).get(slo)
        except OpsctlError:  # the source cannot answer for that instant: fall back to the tick's sample
            sample = None
        if sample is not None:
            return meter.spent(slo, sample)
    rows = [r for r in run.samples if r["at"] <= at]
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
}
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


def chain_prediction(plans, fault_kind: str, params: dict, backend: str, split: dict[str, float], *,
                     slo: str | None, group_wait: float) -> dict:
    """The chain report's `prediction`, from the fault: each page tier of the detecting SLO (`slo`, else
    the SLO burning fastest) by `predict`, on each rule group's own interval; detection is the first
    tier to fire, the page `group_wait` later (Alertmanager's wait before the first notification).
    Mitigation and the ticket follow the notification to serve: no maths of their own, so none is
    predicted. {} when the fault fails no share of requests (a latency or capacity fault)."""
    burns = fault_burns(plans, fault_kind, params, backend, split)
    if not burns:
        return {}
    chosen = next((b for b in burns if b["slo"] == slo), None) or max(burns, key=lambda b: b["burn"])
    tiers = predict(chosen["plan"], chosen["burn"], None)
    times = [t["predicted_seconds"] for t in tiers if t["predicted_seconds"] is not None]
    detect = min(times) if times else None
    page = None if detect is None else detect + group_wait
    return {"slo": chosen["slo"], "burn": chosen["burn"], "burn_basis": chosen["basis"], "tiers": tiers,
            "group_wait_seconds": group_wait, "predicted_detection_seconds": detect,
            "predicted_page_seconds": page, "measured_detection_seconds": None,
            "hops": [{"hop": hop, "predicted_seconds": {"detect": detect, "page": page}.get(hop), "seconds": None,
                      "budget_spent": None} for hop, _ in HOPS]}


def derived_timeout(pred: dict, default: int) -> tuple[int, str]:
    """The chain drill's timeout when --chain-timeout is not given: the predicted page + CHAIN_MARGIN,
    within 30 s..1 h; `default` when nothing is predicted."""
    page = (pred or {}).get("predicted_page_seconds")
    if page is None:
        return default, f"no prediction for this fault: the default {default}s"
    seconds = int(min(3600, max(30, math.ceil(page + CHAIN_MARGIN))))
    return seconds, f"predicted page {page:g}s + margin {CHAIN_MARGIN}s"
