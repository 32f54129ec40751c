"""A traffic change as asked (`ChangeRequest`) and as it came out (`ChangeResult`, with a failover's
`PartialMove`): what every caller hands the controller (opsctl/traffic/controller.py) and gets back."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from opsctl.errors import OpsctlError
from opsctl.fencing import Term  # at run time: ChangeRequest's hints name it (foundation, no cost)
from opsctl.model import Model, field as model_field
from opsctl.traffic.guards import GuardResult
from opsctl.traffic.split import Split

Planner = Callable[[Split | None], Split]
Trimmer = Callable[[Split | None, Split, dict[str, int]], Split]  # limit: backend -> share it carries


def new_operation_id(action: str) -> str:
    return f"{action}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.urandom(3).hex()}"


@dataclass
class ChangeRequest:
    action: str  # set | ramp | failover | restore | rollback
    plan: Planner  # the wanted split, given the current one
    reason: str = ""
    incident: str | None = None
    emergency: bool = False
    operation_id: str | None = None  # a ramp's steps share one (the rate limit counts it once)
    trim: Trimmer | None = None  # cuts the plan to capacity limits (failover moves what fits)
    confirm: Callable[["ChangeResult"], bool] | None = None  # asked once, after the policy guards pass
    term: "Term | None" = None  # the leader's term (opsctl serve): refused once a newer one is recorded


class PartialMove(Model):
    """A failover the capacity guard let move only in part (exit 4): what did move, where, and what
    could not. Travels as `ChangeResult.partial`, a return value; the change record holds each step."""

    version: int
    source: str
    asked: int  # points the source carried when the failover began
    moved: dict[str, int]  # receiver -> points it took
    not_moved: int  # points still on the source
    capacity_share: dict[str, int] = model_field(default_factory=dict)  # receiver -> share its capacity carries
    degradation: str | None = None  # the backend answering with no suggestions, when configured
    degraded: int = 0  # points sent there
    scaled: str = ""  # what capacity asked for (e.g. the autoscaler's minimum raised)
    change_ids: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def message(self) -> str:
        moved = ", ".join(f"{p} to {b}" for b, p in self.moved.items() if p) or "nothing"
        carries = "; ".join(f"{b} carries {s}%" for b, s in self.capacity_share.items())
        verb = "would move" if self.dry_run else "moved"
        text = (f"capacity refused part of the failover from {self.source}: {verb} {moved} of its {self.asked}"
                f" points{f' ({carries})' if carries else ''}")
        if self.degraded:
            text += f"; {self.degraded} {'would go' if self.dry_run else 'went'} to {self.degradation} (no suggestions)"
        if self.not_moved:
            text += f"; {self.not_moved} could not move and stay on {self.source}"
        if self.scaled:
            text += f"; {self.scaled}"
        return text

    @property
    def hint(self) -> str:
        done = "a dry run: nothing changed" if self.dry_run else "what moved is applied and recorded"
        more = "" if self.degradation else " or name a no-suggestions backend in traffic.degradation"
        return f"{done}; for more, add GPUs or raise capacity.max_replicas{more}, then fail over again"

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "source": self.source, "asked": self.asked, "moved": dict(self.moved),
                "not_moved": self.not_moved, "capacity_share": dict(self.capacity_share),
                "degradation": self.degradation, "degraded": self.degraded, "scaled": self.scaled,
                "change_ids": list(self.change_ids), "dry_run": self.dry_run, "message": self.message}


@dataclass
class ChangeResult:
    action: str
    operation_id: str
    actor: str
    dry_run: bool
    actuator: str
    target: str
    reason: str
    incident: str | None
    emergency: bool
    attempt: int = 1
    before: Split | None = None
    requested: Split | None = None
    after: Split | None = None
    version_before: str | None = None
    version: str | None = None
    outcome: str = "planned"  # applied | dry-run | unchanged | refused | conflict | declined | failed
    guards: list[GuardResult] = field(default_factory=list)
    message: str = ""
    shortfall: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    audited: bool = False
    change_id: str | None = None  # the id of its entry in the change record, once applied
    topups: list["ChangeResult"] = field(default_factory=list)  # a failover's later steps as replicas became Ready
    term: str | None = None  # the leader's term the change was written under (None: a person)
    degradation: "ChangeResult | None" = None  # a failover's step sending what could not move to traffic.degradation
    partial: PartialMove | None = None  # a failover the capacity guard let move only in part
    # Why the attempt ended without its change (refused, conflict, declined, failed), with its exit
    # code and hint; None when it did what was asked. Never rendered: `message` says it.
    error: OpsctlError | None = field(default=None, repr=False, compare=False)

    @property
    def exit_code(self) -> int:
        """The error's code; else 0, or 4 when the capacity guard refused part of the move (what did
        move is applied and recorded)."""
        if self.error is not None:
            return self.error.exit_code
        return 4 if self.partial is not None else 0

    def raise_for_outcome(self) -> "ChangeResult":
        """Raise the error the attempt ended in (a refusal, a conflict), else return the result:
        `apply(request)`, the default `check=True`, is `apply(request, check=False).raise_for_outcome()`."""
        if self.error is not None:
            raise self.error
        return self

    @property
    def overrides(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.guards if g.overridden)

    def to_dict(self, order: Sequence[str] | None = None) -> dict[str, Any]:
        def split(s: Split | None) -> dict[str, Any] | None:
            return None if s is None else s.to_dict(order)

        out = {
            "action": self.action,
            "operation": self.operation_id,
            "outcome": self.outcome,
            "actor": self.actor,
            "reason": self.reason,
            "incident": self.incident,
            "emergency": self.emergency,
            "dry_run": self.dry_run,
            "actuator": self.actuator,
            "target": self.target,
            "attempt": self.attempt,
            "before": split(self.before),
            "after": split(self.after),
            "version_before": self.version_before,
            "version": self.version,
            "guards": [g.to_dict() for g in self.guards],
            "overrides": list(self.overrides),
        }
        if self.change_id:
            out["change_id"] = self.change_id
        if self.topups:
            out["topups"] = [t.to_dict(order) for t in self.topups]
        if self.degradation is not None:
            out["degradation"] = self.degradation.to_dict(order)
        if self.partial is not None:
            out["partial"] = self.partial.to_dict()
        if self.requested is not None and self.requested != self.after:
            out["requested"] = split(self.requested)
        for key in ("message", "shortfall", "warnings", "recorded"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out
