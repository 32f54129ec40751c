"""What a fault does to the requests in the simulator's model, and the burn B each SLO sees from it:
the chain drill predicts from these before anything is measured (prediction.chain_prediction), and
the embedded drill's response prediction reads an availability alert's cause from them
(prediction.fault_cause).

An error fault's share of failed requests (ERROR_SHARE); a latency or capacity fault's share of
requests over each latency SLO's threshold, from the simulator's own latency model (`slow_share`:
the lognormal, its load slope, the fault's shift or tail mixture, fast rejections, timeouts), by the
normal tail, not by drawing; B is that share over (1 - goal).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opsctl.model import Model

if TYPE_CHECKING:
    from opsctl.slo.rule_plan import SloRulePlan


class FaultBurn(Model):
    """The burn B one SLO sees from a step fault (fault_burns, latency_burns)."""

    slo: str
    plan: SloRulePlan
    bad_share: float
    burn: float
    basis: str


# fault kind -> the share of the faulted backend's requests it fails, from its parameters (the
# outcomes every availability SLO counts bad: server_error, throttled, auth_error)
ERROR_SHARE: dict[str, Callable[[dict[str, Any]], float]] = {
    "vendor-5xx": lambda p: p.get("rate", 0.2),
    "oauth-token-failure": lambda p: p.get("rate", 1.0),
    "auth-throttling": lambda p: p.get("rate", 0.3) + p.get("auth_rate", 0.0),
    # lost GPU pods: the simulator sheds `rate` of the internal requests, `timeout_share` (4/5) as
    # timeouts and the rest as 503s, whatever the load (the rest are queued: `factor` times slower)
    "gpu-capacity-loss": lambda p: p.get("rate", 0.1),
    "vendor-throttling": lambda p: p.get("rate", 0.3),  # 503/429 with Retry-After: throttled
    "vendor-timeout": lambda p: p.get("rate", 0.1),
    "slow-token-endpoint": lambda p: p.get("auth_rate", 0.1) + p.get("timeout_rate", 0.03),
}
# fault kinds that change the latency of the faulted backend's requests (the simulator's log_shift,
# tail_share/tail_shift or timeouts): latency_burns reads their bad share off the latency model
LATENCY_FAULTS = ("latency-spike", "latency-tail", "gpu-capacity-loss", "vendor-timeout", "slow-token-endpoint")
def fault_burns(plans: Sequence[SloRulePlan], fault_kind: str, params: dict[str, Any], backend: str,
                split: dict[str, float]) -> list[FaultBurn]:
    """The burn B each availability SLO sees from a step fault failing a share of `backend`'s requests
    from a clean baseline: share / (1 - goal) on the backend's own SLO, share x the backend's traffic
    share / (1 - goal) on a service-wide one (backend `all` or none). [] for a fault with no error share."""
    share_of = ERROR_SHARE.get(fault_kind)
    if share_of is None:
        return []
    share = float(share_of(params))
    total = sum(split.values()) or 1.0
    traffic = split.get(backend, 0.0) / total
    out: list[FaultBurn] = []
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
        out.append(FaultBurn(slo=slo.name, plan=plan, bad_share=bad, burn=bad / budget,
                             basis=f"{basis}, against a budget of {budget:.4g}"))
    return out


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def outcome_shares(backend_kind: str, fault_kind: str | None = None,
                   params: dict[str, Any] | None = None) -> dict[str, float]:
    """One backend's per-request parameters in the simulator (opsctl.metrics.sim_draw): its profile's
    baseline shares, changed by the fault as the simulator's own incident changes them (its `apply`
    on a single step; nothing is drawn)."""
    import numpy as np

    from opsctl.metrics.sim_draw import PROFILES
    from opsctl.metrics.sim_incidents import _StepParams

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
    from opsctl.metrics.sim_draw import PROFILES, REJECTED_MEDIAN_SECONDS, REJECTED_SIGMA

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


def latency_burns(plans: Sequence[SloRulePlan], fault_kind: str, params: dict[str, Any], backend: str,
                  split: dict[str, float], kinds: dict[str, str], load: float) -> list[FaultBurn]:
    """The burn B each latency SLO sees from a step fault that slows `backend` (LATENCY_FAULTS):
    its bad share (slow_share at the SLO's threshold, the fault applied to `backend` only) over
    (1 - goal); a service-wide SLO's bad share is each backend's weighted by its traffic share, the
    others at their baseline. [] for a fault that does not touch latency."""
    if fault_kind not in LATENCY_FAULTS or backend not in kinds:
        return []
    faulted = outcome_shares(kinds[backend], fault_kind, params)
    total = sum(split.values()) or 1.0
    out: list[FaultBurn] = []
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
        out.append(FaultBurn(slo=slo.name, plan=plan, bad_share=bad, burn=bad / budget,
                             basis=f"{basis} (load {load:.3g} of peak), against a budget of {budget:.4g}"))
    return out


def traffic_load(at: float) -> float:
    """The simulator's share of peak traffic at `at` (its weekly profile and holidays, before its 3%
    day and 2% five-minute noise), which moves the latency median with load_slope."""
    import numpy as np

    from opsctl.metrics.sim_calendar import traffic_shape

    step = 10 * (int(at) // 10 + 1)
    return float(min(traffic_shape(np.array([step], dtype=np.int64))[0], 1.0))
