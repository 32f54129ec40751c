"""Failover (the emergency move off a failing backend, in one step) and the split it saved.

A failover moves the failing backend's whole share to the others, in proportion to their current
weights (equally when they have none), and stops shadow traffic: mirrored copies cost the internal
GPUs capacity the failover needs and probe a backend that is failing. When the receiving internal
backend cannot carry its new share even after scaling, only what fits moves; the rest stays on the
failing backend and is reported.

The split to restore is the one the change record (stored with the split, opsctl/traffic/record.py)
saved at the incident's first applied failover, so every laptop and replica restores the same way;
an incident older than the record falls back to this host's audit log.

A move capacity allows only in part is a partial move (`PartialMove`, exit 4): what moved is
applied and recorded, what could not is said. With `traffic.degradation` (a backend answering with
no suggestions, so users see no red underlines rather than errors) the remainder goes there at once,
as its own recorded change of the same operation; top-ups then take it back from there first.

When the stored split is unknown or corrupt, a failover still works: it plans from the configured
backends (traffic.default_split, else an even split), because an emergency must not wait on a repair.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable, Sequence

from opsctl.errors import NoDataError, UsageError
from opsctl.model import Model
from opsctl.traffic.change import ChangeRequest, ChangeResult, PartialMove
from opsctl.traffic.record import OpenFailover
from opsctl.traffic.split import Split, largest_remainder

if TYPE_CHECKING:
    from opsctl.audit import AuditLog
    from opsctl.config import Config
    from opsctl.traffic.controller import TrafficController
    from opsctl.traffic.record import ChangeRecord


def configured_split(cfg: "Config") -> Split:
    """The split the config describes: traffic.default_split, else an even split over the backends."""
    if cfg.traffic.default_split:
        return Split.of(cfg.traffic.default_split)
    names = list(cfg.backends)
    return Split.of(largest_remainder({b: 100 / len(names) for b in names}))


def failover_plan(source: str, receivers: Sequence[str], fallback: Split | None = None) -> Callable[[Split | None], Split]:
    def plan(before: Split | None) -> Split:
        if before is None:
            if fallback is None:
                raise NoDataError("the current split is unknown, so there is nothing to fail over from",
                                  hint="set it with `opsctl traffic set ... --emergency --incident ID`")
            before = fallback  # unknown or corrupt: plan from the configured backends
        moved = before.weight(source)
        if moved == 0:
            return Split.of(before.weights)  # nothing to move; still stop shadow traffic
        base = {b: before.weight(b) for b in receivers}
        total = sum(base.values())
        exact = {b: (moved * base[b] / total if total else moved / len(receivers)) for b in receivers}
        exact["\0kept"] = 100 - moved
        gained = largest_remainder(exact)
        gained.pop("\0kept")
        weights = {b: w for b, w in before.weights.items() if b != source and b not in receivers}
        for b in receivers:
            weights[b] = before.weight(b) + gained[b]
        return Split.of(weights)

    return plan


def failover_trim(source: str) -> Callable[[Split | None, Split, dict[str, int]], Split]:
    """Cut each capacity-limited receiver to the share it carries; the rest stays on `source`."""

    def trim(before: Split | None, requested: Split, limit: dict[str, int]) -> Split:
        weights = dict(requested.weights)
        kept = 0
        for backend, fits in limit.items():
            floor = before.weight(backend) if before else 0  # a failover never takes traffic away from it
            allowed = max(fits - requested.shadow_of(backend), floor)
            if weights.get(backend, 0) > allowed:
                kept += weights[backend] - allowed
                weights[backend] = allowed
        weights[source] = weights.get(source, 0) + kept
        return Split.of(weights, requested.shadow)

    return trim


def receivers_of(cfg: "Config", source: str, to: Sequence[str]) -> list[str]:
    backends = list(cfg.backends)
    if source not in cfg.backends:
        raise UsageError(f"--from: unknown backend {source!r} (known: {', '.join(backends)})")
    # The degradation backend takes only what capacity leaves over, never a proportional share.
    receivers = list(to) or [b for b in backends if b != source and b != cfg.traffic.degradation]
    for b in receivers:
        if b not in cfg.backends:
            raise UsageError(f"--to: unknown backend {b!r} (known: {', '.join(backends)})")
        if b == source:
            raise UsageError(f"--to: {b!r} is the backend being failed over from")
    if not receivers:
        raise UsageError(f"there is no other backend to fail {source!r} over to")
    return receivers


def failover(ctl: "TrafficController", source: str, incident: str, *, to: Sequence[str] = (), reason: str = "",
             confirm: Callable[[ChangeResult], bool] | None = None, emergency: bool = True,
             check: bool = True) -> ChangeResult:
    receivers = receivers_of(ctl.cfg, source, to)
    if not incident:
        raise UsageError("a failover needs --incident ID: it is an emergency tied to an incident")
    return ctl.apply(ChangeRequest(
        "failover", failover_plan(source, receivers, configured_split(ctl.cfg)), reason=reason or f"failover from {source}",
        incident=incident, emergency=emergency, trim=failover_trim(source), confirm=confirm,
    ), check=check)


def topup_source(cfg: "Config", source: str, receivers: Sequence[str], before: Split | None) -> str:
    """Where a top-up takes traffic from: the degradation backend while it holds some, else the source."""
    degradation = cfg.traffic.degradation
    if degradation and degradation not in receivers and before is not None and before.weight(degradation) > 0:
        return degradation
    return source


def topup_plan(cfg: "Config", source: str, receivers: Sequence[str]) -> Callable[[Split | None], Split]:
    return lambda before: failover_plan(topup_source(cfg, source, receivers, before), receivers)(before)


def topup_trim(cfg: "Config", source: str,
               receivers: Sequence[str]) -> Callable[[Split | None, Split, dict[str, int]], Split]:
    return lambda before, requested, limit: failover_trim(topup_source(cfg, source, receivers, before))(
        before, requested, limit)


def degrade(ctl: "TrafficController", first: ChangeResult, source: str, *, reason: str = "",
            emergency: bool = True) -> ChangeResult | None:
    """Send what the failover could not move off `source` to traffic.degradation, as its own change
    (same operation and incident, so the rate guard counts it once and restore returns from it).
    None when nothing is left on the source or no degradation backend is configured; a step that
    failed returns with its `error`."""
    degradation = ctl.cfg.traffic.degradation
    expected = first.after
    if degradation is None or degradation == source or expected is None or expected.weight(source) == 0:
        return None
    left = expected.weight(source)

    def plan(before: Split | None) -> Split:
        if before != expected:
            raise UsageError("the split changed since the failover's first step; not degrading")
        weights = dict(before.weights)
        weights[degradation] = weights.get(degradation, 0) + weights.pop(source)
        weights[source] = 0
        return Split.of(weights, before.shadow)

    return ctl.apply(ChangeRequest(
        "failover", plan, reason=f"{reason or 'failover from ' + source} (degradation: {left} points capacity could"
                                 f" not carry go to {degradation}, no suggestions)",
        incident=first.incident, emergency=emergency, operation_id=first.operation_id), check=False)


def partial_move(cfg: "Config", result: ChangeResult, source: str, started: Split | None) -> PartialMove | None:
    """The partial move a finished failover made, or None when it moved the whole share (or nothing
    was on the source). Figures come from the splits themselves: before the first step, after the last."""
    after = result.after
    if started is None or after is None or result.outcome not in ("applied", "dry-run"):
        return None
    asked = started.weight(source)
    degradation = cfg.traffic.degradation
    degraded = after.weight(degradation) - started.weight(degradation) if degradation else 0
    left = after.weight(source)
    if asked == 0 or (left == 0 and degraded <= 0):
        return None
    if result.dry_run and result.shortfall and degradation:
        degraded, left = left, 0  # what the degradation step would take
    receivers = [b for b in after.weights if b not in (source, degradation)]
    moved = {b: after.weight(b) - started.weight(b) for b in receivers if after.weight(b) != started.weight(b)}
    shares: dict[str, int] = {}
    steps = [result, *result.topups] + ([result.degradation] if result.degradation else [])
    scaled = ""
    for step in steps:
        for g in step.guards:
            if g.name != "capacity":
                continue
            shares.update(g.details.get("limit") or {})
            how = g.details.get("scaled")
            if how and not scaled:
                what = (f"raised the {cfg.capacity.autoscaler.upper() if cfg.capacity.autoscaler == 'hpa' else 'KEDA'}"
                        f" minimum" if cfg.capacity and cfg.capacity.autoscaler != "none" else "scaled")
                scaled = f"{what} {how['from']} -> {how['to']} replicas" + (" (dry run)" if how.get("dry_run") else "")
    ids = tuple(s.change_id for s in steps if s.change_id)
    return PartialMove(1, source, asked, moved, left, shares, degradation, max(degraded, 0), scaled, ids,
                       result.dry_run)


class SavedSplit(Model):
    """The split to restore after an incident's failover, and where it was found: the shared change
    record's open failover (`failover`), else this host's audit log (`audit_entry`, the entry of the
    incident's first applied failover, as the log holds it)."""

    split: Split
    source: str  # "record" | "audit"
    time: str | None = None  # when that failover was applied
    failover: OpenFailover | None = None
    audit_entry: dict[str, Any] | None = None


def saved_split(record: "ChangeRecord | None", audit: "AuditLog", incident: str, backends: Sequence[str]) -> SavedSplit:
    """The split before the incident's first applied failover, and where it was found: the shared
    change record's open failover, else (an incident older than the record) this host's audit log."""
    opened = record.failovers.get(incident) if record is not None else None
    if opened is not None:
        if opened.saved is None:
            raise NoDataError(f"the failover for incident {incident!r} started from an unknown split; nothing to restore",
                              hint="set the split with `opsctl traffic set`")
        return SavedSplit(Split.from_dict(opened.saved, backends, f"the change record's failover of {incident}"),
                          "record", opened.opened_at, failover=opened)
    entries = audit.find(lambda e: e.get("kind") == "traffic" and e.get("action") == "failover"
                         and e.get("outcome") == "applied" and e.get("incident") == incident)
    if not entries:
        raise NoDataError(f"no applied failover is recorded for incident {incident!r}",
                         hint="see `opsctl traffic history`; to set a split directly use `opsctl traffic set`")
    first = entries[-1]  # newest first
    if first.get("before") is None:
        raise NoDataError(f"the failover for incident {incident!r} started from an unknown split; nothing to restore",
                          hint="set the split with `opsctl traffic set`")
    return SavedSplit(Split.from_dict(first["before"], backends, f"audit entry of {first.get('time')}"), "audit",
                      first.get("time"), audit_entry=first)
