"""The plan on the calendar: each step's start and end around the change freezes.

A step never starts inside a freeze and its hold / soak / window never runs into one: a step that
would is moved to the end of that freeze (the split stays where the step before left it, paused
through the freeze). Steps run back to back otherwise. Pure: the freeze calendar and the start
instant in, the schedule out.
"""

from __future__ import annotations

from opsctl.clock import format_rfc3339
from opsctl.errors import UsageError
from opsctl.freeze import FreezeCalendar, FreezeSpan
from opsctl.model import Model
from opsctl.quality.abtest import SampleSize
from opsctl.rollout.plan import RolloutPlan

MAX_MOVES = 1000  # freeze occurrences one step may be pushed past before the plan is refused


class PlannedStep(Model):
    index: int
    stage: str  # shadow | ab | ramp | cost
    label: str  # e.g. "mirror 5%", "A/B 10% of users", "weight 30%"
    share: int  # mirror share (shadow) or the new backend's share of users / requests
    seconds: int
    start: float
    end: float
    moved_after: tuple[str, ...]  # freezes this step was moved past

    def to_dict(self) -> dict:
        return {"index": self.index, "stage": self.stage, "step": self.label, "share": self.share,
                "duration": self.seconds, "start": format_rfc3339(self.start), "end": format_rfc3339(self.end),
                "moved_after": list(self.moved_after)}


class Schedule(Model):
    plan: str
    start: float
    steps: tuple[PlannedStep, ...]
    freezes: tuple[FreezeSpan, ...]  # the occurrences between the start and the completion

    @property
    def end(self) -> float:
        return self.steps[-1].end if self.steps else self.start

    def to_dict(self) -> dict:
        return {"plan": self.plan, "start": format_rfc3339(self.start), "completion": format_rfc3339(self.end),
                "steps": [s.to_dict() for s in self.steps], "freezes": [f.to_dict() for f in self.freezes]}


def step_list(plan: RolloutPlan) -> list[tuple[str, str, int, int]]:
    """(stage, label, share, seconds) for every step, in order."""
    out = []
    for stage in plan.stages:
        body = stage.body
        if stage.kind == "shadow":
            out += [("shadow", f"mirror {s.mirror}%", s.mirror, s.hold.seconds) for s in body.steps]
        elif stage.kind == "ramp":
            out += [("ramp", f"weight {s.weight}%", s.weight, s.soak.seconds) for s in body.steps]
        elif stage.kind == "ab":
            out.append(("ab", f"A/B {body.share}% of users", body.share, body.min_duration.seconds))
        else:
            out.append(("cost", f"cost at {body.share}%", body.share, body.window.seconds))
    return out


def first_conflict(calendar: FreezeCalendar, start: float, end: float) -> FreezeSpan | None:
    """The freeze occurrence that [start, end) touches first (in force at start, or starting before end)."""
    active = calendar.active(start)
    if active:
        return max(active, key=lambda s: s.end)
    following = [s for s in calendar.upcoming(start) if s.start < end]
    return min(following, key=lambda s: s.start) if following else None


def schedule(plan: RolloutPlan, calendar: FreezeCalendar, start: float,
             durations: dict[int, int] | None = None) -> Schedule:
    """Place every step; `durations` overrides a step's length by index (e.g. an A/B horizon)."""
    steps: list[PlannedStep] = []
    spans: dict[tuple[str, float], FreezeSpan] = {}
    at = start
    for index, (stage, label, share, seconds) in enumerate(step_list(plan)):
        seconds = (durations or {}).get(index, seconds)
        moved: list[str] = []
        for _ in range(MAX_MOVES):
            span = first_conflict(calendar, at, at + seconds)
            if span is None:
                break
            spans[(span.name, span.start)] = span
            moved.append(span.name)
            at = max(at, span.end)
        else:
            raise UsageError(f"{plan.name}: step {index + 1} ({label}) finds no gap of {seconds}s between"
                             f" freezes after {MAX_MOVES} moves; shorten it or the freezes")
        steps.append(PlannedStep(index + 1, stage, label, share, seconds, at, at + seconds, tuple(moved)))
        at += seconds
    for span in calendar.upcoming(start):  # freezes that fall in a gap of the plan are shown too
        if span.start < at:
            spans.setdefault((span.name, span.start), span)
    # recurring freezes may occur more than once within the plan
    probe = start
    for _ in range(MAX_MOVES):
        later = [s for s in calendar.upcoming(probe) if s.start < at and s.start >= probe]
        if not later:
            break
        for s in later:
            spans.setdefault((s.name, s.start), s)
        probe = min(s.start for s in later) + 1
    ordered = tuple(sorted(spans.values(), key=lambda s: s.start))
    return Schedule(plan.name, start, tuple(steps), ordered)


def ab_horizons(plan: RolloutPlan) -> tuple[dict[int, int], dict[int, list]]:
    """For each A/B step: its length, the longer of `min_duration` and the fixed horizon the
    declared metrics need at `daily_trials` (whole days), and the sample sizes behind it."""
    from opsctl.quality.abtest import sample_size
    from opsctl.rollout.margins import ab_margin

    durations: dict[int, int] = {}
    sizes: dict[int, list] = {}
    for index, (stage_kind, _, _, seconds) in enumerate(step_list(plan)):
        if stage_kind != "ab":
            continue
        stage = [s.ab for s in plan.stages if s.ab is not None][len(sizes)]
        found = []
        for metric in stage.metrics:
            if metric.baseline is None or stage.daily_trials is None:
                continue
            size = sample_size(metric.baseline, ab_margin(metric).value, alpha=stage.alpha, power=stage.power,
                               daily_trials=stage.daily_trials, share=stage.share / 100)
            found.append((metric.name, size))
        sizes[index] = found
        days = max((s.days for _, s in found if s.days is not None), default=0.0)
        durations[index] = max(seconds, int(-(-days // 1)) * 86400)
    return durations, sizes


class PlannedRollout(Model):
    """`opsctl rollout plan`: the schedule, and the sample sizes behind its A/B steps' horizons."""

    schedule: Schedule
    sizes: tuple[tuple[int, str, SampleSize], ...]  # (the step's 0-based index, the metric, its size)

    def to_dict(self) -> dict:
        data = self.schedule.to_dict()
        data["sample_sizes"] = [{"step": i + 1, "metric": name, **size.to_dict()} for i, name, size in self.sizes]
        return data


def plan_rollout(plan: RolloutPlan, calendar: FreezeCalendar, start: float | None, plan_file: str) -> PlannedRollout:
    """The plan scheduled from `start` (default: the plan's own; UsageError when neither is given),
    its A/B steps as long as their fixed horizons need."""
    at = start if start is not None else plan.start_at
    if at is None:
        raise UsageError(f"{plan_file}: the plan has no `start`: give --start TIME")
    durations, sizes = ab_horizons(plan)
    result = schedule(plan, calendar, at, durations)
    return PlannedRollout(result, tuple((i, name, size) for i, found in sorted(sizes.items()) for name, size in found))
