"""A rollout plan's steps and the objects they drive: `plan_steps` flattens the plan's stages
into `PlanStep`s (the new backend's weight, the mirror share and the hold of each), and
`starting_point` reads where a rollout starts from (the assignment object's split, the shadow
object's, and both objects' standing at step 0)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.errors import NoDataError
from opsctl.model import Model
from opsctl.rollout.document import ObjectStep

if TYPE_CHECKING:
    from opsctl.rollout.plan import RolloutPlan
    from opsctl.traffic.service import TrafficService
    from opsctl.traffic.split import Split

ONCE_AT_END = ("ab-equivalence", "cost")  # measured once, at the step's end (fixed horizon, a window)


class PlanStep(Model):
    index: int  # 0-based, over every stage's steps
    stage: int  # index of its stage in the plan
    kind: str  # shadow | ab | ramp | cost
    label: str
    weight: int  # the new backend's share of requests (or users, A/B) during the step
    mirror: int  # the share mirrored to it (shadow)
    seconds: int


def plan_steps(plan: "RolloutPlan", start_weight: int = 0) -> list[PlanStep]:
    steps: list[PlanStep] = []
    weight = start_weight
    for i, stage in enumerate(plan.stages):
        body = stage.body
        if stage.kind == "shadow":
            for s in body.steps:
                steps.append(PlanStep(len(steps), i, "shadow", f"mirror {s.mirror}%", weight, s.mirror, s.hold.seconds))
        elif stage.kind == "ramp":
            for s in body.steps:
                weight = max(weight, s.weight)
                steps.append(PlanStep(len(steps), i, "ramp", f"weight {s.weight}%", weight, 0, s.soak.seconds))
        else:
            weight = max(weight, body.share)
            seconds = (body.min_duration if stage.kind == "ab" else body.window).seconds
            label = f"A/B {body.share}% of users" if stage.kind == "ab" else f"cost at {body.share}%"
            steps.append(PlanStep(len(steps), i, stage.kind, label, weight, 0, seconds))
    return steps


def shadow_service(cfg, traffic: "TrafficService") -> "TrafficService | None":
    """The shadow object's change path (`traffic.shadow_actuator`), acting like `traffic` (its clock,
    actor, hooks, audit fields); None when the assignment object carries the mirror too."""
    from opsctl.traffic.registry import open_shadow_actuator
    from opsctl.traffic.service import TrafficService

    actuator = open_shadow_actuator(cfg, dry_run=traffic.controller.dry_run)
    if actuator is None:
        return None
    c = traffic.controller
    return TrafficService(cfg, dry_run=c.dry_run, clock=c.clock, actor=c.actor, hooks=list(c.hooks),
                          progress=c.progress, audit_fields=c.audit_fields, actuator=actuator)


def object_steps(traffic: "TrafficService", shadow: "TrafficService | None", order: list[str]) -> list[ObjectStep]:
    """The objects a rollout drives, as found at its start (step 0)."""
    out = []
    for role, svc in (("assignment", traffic), ("shadow", shadow)):
        if svc is None:
            continue
        split = svc.read().split
        actuator = svc.controller.actuator
        out.append(ObjectStep(role, actuator.kind, actuator.target, 0, split.describe(order) if split else "unset"))
    return out


def starting_point(cfg, traffic: "TrafficService | None" = None) -> "tuple[Split | None, Split | None, list[ObjectStep]]":
    """What a rollout starts from (read only): the assignment object's split, the shadow object's
    (None without one) and both objects' standing at step 0. NoDataError: the shadow object holds none."""
    from opsctl.traffic.service import TrafficService

    traffic = traffic or TrafficService(cfg, hooks=[])
    shadow = shadow_service(cfg, traffic)
    mirror = None
    if shadow is not None:
        mirror = shadow.read().split
        if mirror is None:
            raise NoDataError(f"{shadow.controller.actuator.target}: holds no split to mirror from",
                              hint="the shadow object (traffic.shadow_actuator) must route the baseline first")
    return traffic.read().split, mirror, object_steps(traffic, shadow, list(cfg.backends))
