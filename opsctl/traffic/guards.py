"""Named checks a traffic change must pass. Each returns a GuardResult: name, ok, message, and what to do.

    bounds    weights 0-100 summing to 100, known backends only            never overridden (exit 2)
    freeze    no routine change inside a freeze window                     emergency overrides, named
    rate      at most N operations per window (a ramp counts once)         emergency overrides; never
                                                                           holds a failover (it counts)
    budget    no routine move toward a backend burning at page level,
              with a spent period budget, or without data; never blocks
              moving away from a backend that burns faster now             emergency overrides
    capacity  the internal backend's ready replicas carry its new share    scales first; a failover
              with headroom (scaling up to max_replicas when short), and   moves only what fits
              a vendor's provisioned throughput (capacity.vendors) its own

A change is routine unless it is an emergency (`--emergency` with an incident; a failover always
is) or the rollback of an aborted ramp. Overrides are recorded in the result and the audit log.
Guards that cannot apply are skipped cheaply: budget only looks at backends whose share of user
traffic grows (shadow answers are thrown away), capacity only at internal backends and vendors with a
provisioned throughput whose load grows; neither at the degradation backend (traffic.degradation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TYPE_CHECKING, Callable

from opsctl.errors import NoDataError, OpsctlError
from opsctl.traffic.slo_health import burn_now, health_problems, slo_results
from opsctl.traffic.split import Split, split_problems
from opsctl.traffic.canary import canary_stage

if TYPE_CHECKING:
    from opsctl.audit import AuditLog
    from opsctl.clock import Clock
    from opsctl.config import Config
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.record import ChangeRecord

ACTIONS = ("set", "ramp", "failover", "restore", "rollback")
PARTIAL_ACTIONS = ("failover",)  # may move less than asked when capacity is short


@dataclass
class GuardResult:
    name: str
    ok: bool
    message: str
    remedy: str = ""
    overridden: bool = False
    skipped: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "ok": self.ok, "message": self.message}
        if self.remedy:
            out["remedy"] = self.remedy
        if self.overridden:
            out["overridden"] = True
        if self.skipped:
            out["skipped"] = True
        if self.details:
            out["details"] = self.details
        return out


DRILL_ROLLBACK = "drill-rollback-"


def drill_rollback_operation(run_id: str) -> str:
    """The operation id of drill `run_id`'s restore-traffic rollback: a restore of the split the
    drill found, which no guard refuses (bounds aside); each guard it passes that way is recorded
    as the drill's override (decisions/0330)."""
    return DRILL_ROLLBACK + run_id


def drill_run_rolled_back(operation: str | None) -> str | None:
    return operation[len(DRILL_ROLLBACK):] or None if operation and operation.startswith(DRILL_ROLLBACK) else None


@dataclass
class GuardContext:
    cfg: "Config"
    action: str
    before: Split | None
    after: Split
    emergency: bool
    incident: str | None
    now: float
    operation_id: str
    dry_run: bool
    audit: "AuditLog"
    reason: str = ""
    clock: "Clock | None" = None
    progress: Callable[[str], None] | None = None
    _source: "MetricSource | None" = None
    _at: float | None = None
    data_age: float | None = None  # seconds, once the source is open
    record: "ChangeRecord | None" = None  # the change record stored with the split, as read
    preview: bool = False  # read only (the confirmation prompt's capacity preview): nothing scaled

    @property
    def drill_rollback(self) -> str | None:
        """The drill run whose own rollback this change is (`drill_rollback_operation`), else None."""
        return drill_run_rolled_back(self.operation_id) if self.action == "restore" else None

    @property
    def overriding(self) -> str | None:
        """Why routine guards may be overridden: None for a routine change."""
        if self.drill_rollback:
            return f"rollback of drill {self.drill_rollback}: it restores the split the drill found"
        if self.action == "rollback":
            return "fail-back of a canary restore's move" if canary_stage(self.operation_id) else "rollback of an aborted ramp"
        if self.emergency:
            return f"emergency for incident {self.incident}"
        return None

    def source(self) -> "MetricSource":
        if self._source is None:
            from opsctl.metrics.base import open_source

            source = open_source(self.cfg)
            if hasattr(source, "bounded"):  # a guard never waits on metrics past a short bound
                source = source.bounded(self.cfg.metrics.prometheus.guard_deadline)
            source.check()
            from opsctl.metrics.base import fresh_data_age

            self.data_age = fresh_data_age(source, self.now, self.cfg.metrics.max_data_age_seconds)
            self._source = source
        return self._source

    def at(self) -> float:
        """The instant the guards read the metrics at: the source's now, or on a simulated clock (a
        rehearsal, a drill in simulated time) the simulated instant, never data ahead of it
        (docs/decisions/0512: a rehearsal of a plan in 2027 reads 2027's simulated data)."""
        if self._at is None:
            from opsctl.clock import SimClock

            simulated = self.now if isinstance(self.clock, SimClock) else None
            self._at = self.source().default_time(simulated)
        return self._at


def _refuse_or_override(ctx: GuardContext, name: str, problem: str, remedy: str, details: dict[str, Any] | None = None) -> GuardResult:
    why = ctx.overriding
    if why:
        return GuardResult(name, True, f"overridden ({why}): {problem}", overridden=True, details=details or {})
    return GuardResult(name, False, problem, remedy, details=details or {})


EMERGENCY_HINT = "for an emergency tied to an incident, re-run with --emergency --incident ID (recorded as an override)"


# ---------------------------------------------------------------------------------------------


def check_bounds(ctx: GuardContext) -> GuardResult:
    problems = split_problems(ctx.after.weights, ctx.after.shadow, ctx.cfg.backends)
    if problems:
        return GuardResult("bounds", False, "; ".join(problems),
                           "give whole percentages 0-100 for configured backends, summing to 100")
    return GuardResult("bounds", True, "weights are 0-100, sum to 100, and name known backends")


def check_freeze(ctx: GuardContext) -> GuardResult:
    from opsctl.errors import ConfigError
    from opsctl.freeze import FreezeCalendar
    from opsctl.traffic.freeze_source import current_freezes

    try:  # the freezes as the config holds them now, not as a long-running process loaded them
        active = FreezeCalendar(current_freezes(ctx.cfg)).active(ctx.now)
    except ConfigError as exc:  # fail closed: a freeze may have been added in the edit that broke it
        if ctx.overriding:
            return GuardResult("freeze", True, f"overrides any freeze ({ctx.overriding}):"
                                               f" {exc.message.splitlines()[0]}", overridden=True)
        return GuardResult("freeze", False, exc.message.splitlines()[0], exc.hint or "fix the config file")
    if not active:
        return GuardResult("freeze", True, "no change freeze in force")
    names = ", ".join(repr(s.name) for s in active)
    details = {"freezes": [s.to_dict() for s in active]}
    if ctx.overriding:
        return GuardResult("freeze", True, f"overrides freeze {names} ({ctx.overriding})", overridden=True,
                           details=details)
    spans = "; ".join(s.describe() for s in active)
    return GuardResult(
        "freeze", False, f"change freeze in force: {spans}; routine traffic changes are refused",
        "wait until it ends, or for an emergency tied to an incident re-run with --emergency --incident ID"
        f" (recorded as overriding {names})", details=details,
    )


def check_rate(ctx: GuardContext) -> GuardResult:
    """Counts the operations in the change record read with the split: the write that follows is a
    compare-and-swap on that read, so a concurrent change makes this attempt re-read and re-count."""
    from opsctl.traffic.record import operations_since

    limit = ctx.cfg.traffic.rate_limit
    window = limit.window_seconds
    first_seen = operations_since(ctx.record, ctx.now - window, exclude=ctx.operation_id)
    count = len(first_seen)
    details = {"changes_in_window": count, "max_changes": limit.max_changes, "window": limit.window}
    if ctx.action == "failover":
        # The limit damps flapping by holding the moves back (restore, set, ramp), never the move
        # away from a failing backend: a long vendor outage otherwise fails over, restores into the
        # outage after each hold-down, and once the window is full its next failover is refused
        # while 80% of requests fail. The failover still counts, so the restore after it waits.
        return GuardResult("rate", True, f"{count} of {limit.max_changes} changes used in the last {limit.window};"
                           " a failover is never held by the rate limit (it holds the moves back)",
                           details=details)
    if ctx.action == "restore" and canary_stage(ctx.operation_id):
        # A canary restore's moves are damped by its own backoff (capped) and judged on their burn;
        # held by the count, a recovered backend would wait out the window behind failed canaries.
        return GuardResult("rate", True, f"{count} of {limit.max_changes} changes used in the last {limit.window};"
                           " a canary restore's move is held by its backoff, not the rate limit", details=details)
    if count < limit.max_changes:
        return GuardResult("rate", True, f"{count} of {limit.max_changes} changes used in the last {limit.window}",
                           details=details)
    from opsctl.audit import timestamp

    free_at = min(first_seen.values()) + window
    return _refuse_or_override(
        ctx, "rate", f"rate limit reached: {count} traffic changes in the last {limit.window} (max {limit.max_changes})",
        f"wait until {timestamp(free_at)}, raise traffic.rate_limit.max_changes, or {EMERGENCY_HINT}", details,
    )


def check_budget(ctx: GuardContext) -> GuardResult:
    # The degradation backend answers with no suggestions: it has no error budget to protect.
    receiving = [b for b in ctx.after.increased(ctx.before) if b != ctx.cfg.traffic.degradation]
    if not receiving:
        return GuardResult("budget", True, "no backend with an error budget gets a bigger share of user traffic",
                           skipped=True)
    if ctx.action == "restore" and canary_stage(ctx.operation_id):
        judged = _canary_budget(ctx, receiving)
        if judged is not None:
            return judged
    before = ctx.before
    losing = [] if before is None else [b for b in before.weights if ctx.after.weight(b) < before.weight(b)]
    try:
        results, missing = slo_results(ctx.cfg, ctx.source, ctx.at, receiving + losing)
    except NoDataError as exc:
        return _refuse_or_override(
            ctx, "budget", f"no data to judge {', '.join(receiving)}'s error budget: {exc.message}",
            f"make the metric source answer (no data is never healthy), or {EMERGENCY_HINT}",
        )
    # Restoring after an incident returns to the normal split: a budget the incident spent does not
    # block it, a page-level burn or missing data does.
    toward = [r for r in results if r.slo.backend in receiving]
    problems = health_problems(toward, [b for b in missing if b in receiving], budget_spent_counts=ctx.action != "restore")
    details: dict[str, object] = {"backends": receiving, "slos": {r.slo.name: r.status.level for r in toward}}
    if problems and losing and not any(r.status.level == "unknown" for r in toward) and not set(missing) & set(receiving):
        # Moving traffic off a backend that burns faster than the ones receiving it only lowers the
        # burn: a spent budget or a page-level burn on the receiver must not keep users on the worse one.
        away = {b: burn_now(results, b) for b in losing}
        toward_now = {b: burn_now(results, b) for b in receiving}
        fastest_away = max((x for x in away.values() if x is not None), default=None)
        toward_known = [x for x in toward_now.values() if x is not None]
        if fastest_away is not None and len(toward_known) == len(toward_now) and fastest_away > max(toward_known):
            details.update({"burn_now_away": away, "burn_now_toward": toward_now})
            return GuardResult(
                "budget", True,
                f"moving away from {', '.join(losing)} (burning {fastest_away:.4g}x now) toward {', '.join(receiving)}"
                f" (burning {max(toward_known):.4g}x now) lowers the burn; not blocked by: " + "; ".join(problems),
                details=details,
            )
    if problems:
        return _refuse_or_override(
            ctx, "budget", f"moving traffic toward {', '.join(receiving)}: " + "; ".join(problems),
            f"wait for the burn to stop or move traffic toward a healthy backend; or {EMERGENCY_HINT}", details,
        )
    from opsctl.metrics.base import age_text

    age = f" (newest sample {age_text(ctx.data_age)} old)" if ctx.data_age is not None else ""
    details["data_age_seconds"] = ctx.data_age
    return GuardResult("budget", True, f"{', '.join(receiving)}: no page-level burn, budget left, data present{age}",
                       details=details)


def _canary_budget(ctx: GuardContext, receiving: list[str]) -> GuardResult | None:
    """A canary restore's move (opsctl/traffic/canary.py) toward a backend is judged on its burn over
    the fast tier's windows, not on its slower pages (the 6h/30m pair keeps firing half an hour on
    the errors from before the failover): refused where an SLO of it burns at its canary threshold
    or more, or without data; a canary toward a backend no traffic reaches is its only probe. None:
    no canary restore configured (the routine budget check applies)."""
    from opsctl.traffic.canary import CanarySettings
    from opsctl.traffic.slo_health import read_health

    settings = CanarySettings.from_config(ctx.cfg)
    if settings is None:
        return None
    stage = canary_stage(ctx.operation_id)
    windows = (settings.fast_long, settings.fast_short)
    try:
        ctx.source()
    except NoDataError as exc:
        return _refuse_or_override(ctx, "budget", f"no data to judge {', '.join(receiving)} for the canary restore:"
                                   f" {exc.message}", f"make the metric source answer (no data is never healthy), or {EMERGENCY_HINT}")
    health = {b: read_health(ctx.cfg, b, windows, ctx.at(), settings, source=ctx.source) for b in receiving}
    details: dict[str, object] = {"backends": receiving, "burn_fast": {b: h.burn for b, h in health.items()},
                                  "fail_factor": settings.fail_factor, "latency_fail_factor": settings.latency_fail_factor}
    bad = {b: h for b, h in health.items() if not h.known or h.fails(settings) or (h.burn is None and stage != "canary")}
    if bad:
        problem = "; ".join(f"{b}: {h.describe()}" for b, h in bad.items())
        return _refuse_or_override(ctx, "budget", f"canary restore toward {', '.join(receiving)}: {problem}",
                                   f"wait for the canary restore's next try, or {EMERGENCY_HINT}", details)
    shown = "; ".join(f"{b}: {h.describe()}" for b, h in health.items())
    return GuardResult("budget", True, f"canary restore ({stage}): below its thresholds over the fast windows"
                       f" ({shown}); the slower pages are the canary's to prove", details=details)


def check_capacity(ctx: GuardContext) -> GuardResult:
    """Internal replicas and vendor provisioned throughput: every growing backend with a capacity
    model must carry its new share with headroom. One result; `details.limit` holds the share each
    short backend carries (a failover is trimmed to it)."""
    growing = ctx.after.load_increased(ctx.before)
    degradation = ctx.cfg.traffic.degradation
    internal = [b for b in growing if ctx.cfg.backends[b].kind == "internal" and b != degradation]
    vendors = ctx.cfg.capacity.vendors if ctx.cfg.capacity is not None else {}
    vendor = [b for b in growing if b in vendors]
    if not internal and not vendor:
        return GuardResult("capacity", True, "no capacity-modelled backend gets more load", skipped=True)
    parts = []
    if internal:
        parts.append(_internal_capacity(ctx, internal))
    for backend in vendor:
        parts.append(_vendor_capacity(ctx, backend))
    if len(parts) == 1:
        return parts[0]
    details: dict[str, Any] = {}
    limit: dict[str, int] = {}  # backend -> the share it carries
    for p in parts:
        limit.update(p.details.get("limit") or {})
        details[p.details.get("backend") or p.name] = p.details
    if limit:
        details["limit"] = limit
    failed = [p for p in parts if not p.ok]
    message = "; ".join(p.message for p in (failed or parts))
    if failed:
        return GuardResult("capacity", False, message, " | ".join(p.remedy for p in failed if p.remedy),
                           details=details)
    return GuardResult("capacity", True, message, overridden=any(p.overridden for p in parts), details=details)


def _vendor_capacity(ctx: GuardContext, backend: str) -> GuardResult:
    from opsctl.traffic.capacity import vendor_reading

    share = ctx.after.load_share(backend)
    try:
        reading = vendor_reading(ctx.cfg, backend, ctx.source(), ctx.at())
    except NoDataError as exc:
        reading = None
        problem = exc.message
    fits = reading.max_share() if reading is not None else None
    details = {**(reading.to_dict() if reading else {"backend": backend}), "share": share, "fits": fits}
    if fits is None or reading is None:  # fits is None without a reading
        problem = reading.summary(share) if reading is not None else problem
        if ctx.overriding:
            return GuardResult("capacity", True, f"WARNING vendor capacity unverified ({ctx.overriding}): {problem};"
                                                 " moving the full share", overridden=True, details=details)
        return GuardResult("capacity", False, f"cannot tell whether {backend} can carry {share}% of traffic: {problem}",
                           f"make the metric source answer (no data is never healthy), or {EMERGENCY_HINT}",
                           details=details)
    summary = reading.summary(share)
    if fits >= share:
        return GuardResult("capacity", True, f"{backend} carries {share}% within its provisioned throughput: {summary}",
                           details=details)
    details["limit"] = {backend: fits}
    short = (f"{backend}'s provisioned throughput carries only {fits}% of current traffic, {share}% asked: {summary}")
    if ctx.drill_rollback:
        return GuardResult("capacity", True, f"overridden ({ctx.overriding}): {short}", overridden=True, details=details)
    if ctx.action in PARTIAL_ACTIONS:
        return GuardResult("capacity", True, f"limited: {short}", details=details)
    return GuardResult("capacity", False, short,
                       f"ask for at most {fits}% on {backend}, or raise its provisioned throughput"
                       f" (capacity.vendors.{backend}), then retry", details=details)


def _internal_capacity(ctx: GuardContext, growing: list[str]) -> GuardResult:
    from opsctl.traffic.capacity import Capacity

    cap = ctx.cfg.capacity
    unmodelled = [b for b in growing if cap is None or cap.backend != b]
    if unmodelled or cap is None:
        return _refuse_or_override(
            ctx, "capacity", f"no capacity model for internal backend(s) {', '.join(unmodelled or growing)}",
            f"configure the `capacity:` section for it, or {EMERGENCY_HINT}",
        )
    backend = cap.backend
    share = ctx.after.load_share(backend)
    capacity = Capacity(ctx.cfg, ctx.source, ctx.at, clock=ctx.clock)
    # A failover does not wait for new replicas: it moves what the ready ones carry now and tops up
    # as they become Ready (TrafficService.failover); other changes wait, up to ready_timeout.
    result = capacity.ensure(share, dry_run=ctx.dry_run, reason=ctx.reason, progress=ctx.progress,
                             wait=ctx.action not in PARTIAL_ACTIONS and not ctx.drill_rollback, preview=ctx.preview)
    r = result.reading
    details = {**r.to_dict(), "share": share, "fits": result.fits, "notes": result.notes}
    if result.scaled_to is not None:
        details["scaled"] = {"from": result.scaled_from, "to": result.scaled_to, "dry_run": ctx.dry_run or ctx.preview}
    if result.fits is None:
        if ctx.overriding:
            return GuardResult(
                "capacity", True,
                f"WARNING capacity unverified ({ctx.overriding}): no request-rate data, so whether {backend}"
                f" can carry {share}% is unknown; moving the full share", overridden=True, details=details,
            )
        return GuardResult(
            "capacity", False, f"no request-rate data: cannot tell whether {backend} can carry {share}% of traffic",
            f"make the metric source answer (no data is never healthy), or {EMERGENCY_HINT}", details=details,
        )
    needed = r.needed_rps(share)
    summary = (f"{r.ready} ready x {r.rps_per_replica:g} rps = {r.capacity_rps:g} rps; {share}% of"
               f" {r.total_rps:.1f} rps with {r.headroom:.0%} headroom needs {needed:.1f} rps")
    if result.enough:
        scaled = f" (scaled {result.scaled_from} -> {result.scaled_to})" if result.scaled_to is not None else ""
        return GuardResult("capacity", True, f"{backend} carries {share}%{scaled}: {summary}", details=details)
    details["limit"] = {backend: result.fits}
    short = (f"{backend} can carry only {result.fits}% of current traffic, {share}% asked: {summary};"
             f" at max_replicas {cap.max_replicas} it would carry {r.max_share(cap.max_replicas)}%")
    if ctx.drill_rollback:
        return GuardResult("capacity", True, f"overridden ({ctx.overriding}): {short}", overridden=True, details=details)
    if ctx.action in PARTIAL_ACTIONS:
        return GuardResult("capacity", True, f"limited: {short}", details=details)
    return GuardResult(
        "capacity", False, short,
        f"ask for at most {result.fits}%, raise capacity.max_replicas or add GPUs, then retry", details=details,
    )


GUARDS: dict[str, Callable[[GuardContext], GuardResult]] = {
    "bounds": check_bounds,
    "freeze": check_freeze,
    "rate": check_rate,
    "budget": check_budget,
    "capacity": check_capacity,
}
# Cheap guards first; capacity last, and only when they pass, because it may scale the Deployment.
POLICY_GUARDS = ("bounds", "freeze", "rate", "budget")
CAPACITY_GUARD = "capacity"


def capacity_preview(cfg: "Config", action: str, before: Split | None, after: Split, *, emergency: bool = False,
                     incident: str | None = None, operation_id: str = "", reason: str = "",
                     clock: "Clock | None" = None) -> GuardResult:
    """The capacity guard on the change `before` -> `after`, read only (GuardContext.preview: no
    scaling, not even a server-side dry run): what the confirmation prompt shows beside the four
    policy guards, which the controller checks again, scaling if it must, once confirmed."""
    from opsctl.audit import AuditLog
    from opsctl.clock import WallClock

    clock = clock or WallClock()
    ctx = GuardContext(cfg, action, before, after, emergency, incident, clock.now(), operation_id, True,
                       AuditLog(cfg.audit_path), reason, clock, preview=True)
    try:
        return check_capacity(ctx)
    except OpsctlError as exc:  # a capacity model that cannot be read: said, the real check decides
        return GuardResult("capacity", False, f"cannot preview: {exc.message}")


def guard(name: str) -> Callable[[GuardContext], GuardResult]:
    try:
        return GUARDS[name]
    except KeyError:
        raise KeyError(f"unknown guard {name!r} (known: {', '.join(GUARDS)})") from None
