"""The plan on the calendar: each step's start and end around the change freezes.

A step never starts inside a freeze and its hold / soak / window never runs into one: a step that
would is moved to the end of that freeze (the split stays where the step before left it, paused
through the freeze). Steps run back to back otherwise. Pure: the freeze calendar and the start
instant in, the schedule out.
"""

from __future__ import annotations

import dataclasses

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
    waited_for: tuple[str, ...] = ()  # why it starts later than the step before ends (freezes, working hours)
    held: float = 0.0  # after its own time: how long its load stays until the next step starts
    held_because: tuple[str, ...] = ()  # the next step's waited_for

    @property
    def load(self) -> str:
        return {"shadow": f"{self.share}% mirror", "ab": f"{self.share}% of users (A/B)",
                "ramp": f"{self.share}% of requests", "cost": f"{self.share}% of requests"}[self.stage]

    @property
    def load_held(self) -> str:
        """e.g. '100% mirror for 21.5 days' (its own 3 days and 18.5 held), '' when not held."""
        if not self.held:
            return ""
        return f"{self.load} for {days_text(self.seconds + self.held)} ({days_text(self.held)} held)"

    def to_dict(self) -> dict:
        return {"index": self.index, "stage": self.stage, "step": self.label, "share": self.share,
                "duration": self.seconds, "start": format_rfc3339(self.start), "end": format_rfc3339(self.end),
                "moved_after": list(self.moved_after), "waited_for": list(self.waited_for), "load": self.load,
                "held": self.held, "held_until": format_rfc3339(self.end + self.held),
                "held_because": list(self.held_because), "load_held": self.load_held}


def days_text(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} days" if days >= 1 else f"{seconds / 3600:.1f} hours"


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


def next_opening(plan: RolloutPlan, at: float) -> float:
    """The first instant at or after `at` inside the plan's working hours (in its timezone); `at`
    itself without working hours."""
    from datetime import datetime, timedelta

    from opsctl.freeze import _zone
    from opsctl.rollout.plan import parse_days, parse_hhmm

    hours = plan.working_hours
    if hours is None or plan.timezone is None:
        return at
    tz = _zone(plan.timezone)
    days = parse_days(hours.days)
    opens, closes = parse_hhmm(hours.start, "start"), parse_hhmm(hours.end, "end")
    local = datetime.fromtimestamp(at, tz)
    for offset in range(8):
        day = (local + timedelta(days=offset)).date()
        if day.weekday() not in days:
            continue
        begin = datetime(day.year, day.month, day.day, opens // 60, opens % 60, tzinfo=tz).timestamp()
        end = datetime(day.year, day.month, day.day, closes // 60, closes % 60, tzinfo=tz).timestamp()
        if begin <= at < end:
            return at
        if begin > at:
            return begin
    raise UsageError(f"{plan.name}: working_hours: no working day in a week ({hours.days})")


def hours_text(plan: RolloutPlan) -> str:
    h = plan.working_hours
    return f"working hours ({h.days} {h.start}-{h.end} {plan.timezone})" if h else ""


def first_conflict(calendar: FreezeCalendar, start: float, end: float) -> FreezeSpan | None:
    """The freeze occurrence that [start, end) touches first (in force at start, or starting before end)."""
    active = calendar.active(start)
    if active:
        return max(active, key=lambda s: s.end)
    following = [s for s in calendar.upcoming(start) if s.start < end]
    return min(following, key=lambda s: s.start) if following else None


def schedule(plan: RolloutPlan, calendar: FreezeCalendar, start: float,
             durations: dict[int, int] | None = None, *, first: int = 0) -> Schedule:
    """Place every step from `first` (0-based) on; `durations` overrides a step's length by index
    (step_seconds: the A/B horizons)."""
    steps: list[PlannedStep] = []
    spans: dict[tuple[str, float], FreezeSpan] = {}
    at = start
    for index, (stage, label, share, seconds) in enumerate(step_list(plan)):
        if index < first:
            continue
        seconds = (durations or {}).get(index, seconds)
        moved: list[str] = []
        waited: list[str] = []
        for _ in range(MAX_MOVES):
            span = first_conflict(calendar, at, at + seconds)
            if span is not None:
                spans[(span.name, span.start)] = span
                moved.append(span.name)
                waited.append(f"freeze {span.name}")
                at = max(at, span.end)
                continue
            opened = next_opening(plan, at)
            if opened > at:
                waited.append("working hours")
                at = opened
                continue
            break
        else:
            raise UsageError(f"{plan.name}: step {index + 1} ({label}) finds no gap of {seconds}s between"
                             f" freezes after {MAX_MOVES} moves; shorten it or the freezes")
        steps.append(PlannedStep(index + 1, stage, label, share, seconds, at, at + seconds, tuple(moved),
                                 tuple(dict.fromkeys(waited))))
        at += seconds
    steps = [dataclasses.replace(step, held=after.start - step.end, held_because=after.waited_for)
             if after.start > step.end else step for step, after in zip(steps, steps[1:])] + steps[-1:]
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


def smaller_arm(per_arm: int, share: float) -> int:
    """Trials the smaller arm needs when the arms are unequal: the equal-arm `per_arm` n gives the
    difference a variance of 2 p(1-p)/n; arms n_s and k n_s (k = larger / smaller share) give
    p(1-p)(1 + 1/k)/n_s, equal when n_s = n (1 + 1/k) / 2 (k = 1: n itself)."""
    small = min(share, 1 - share)
    if not 0 < small <= 0.5:
        raise ValueError("share must be between 0 and 1")
    k = (1 - small) / small
    return int(-(-(per_arm * (1 + 1 / k)) // 2))


def horizon_days(per_arm: int, share: float, daily_trials: float) -> float:
    """Days until the smaller arm holds its unequal-arm sample at `daily_trials` trials a day."""
    return smaller_arm(per_arm, share) / (daily_trials * min(share, 1 - share))


def step_seconds(plan: RolloutPlan, measured: dict[int, float] | None = None) -> tuple[dict[int, int], dict[int, list]]:
    """Every step's length by 0-based index, the one answer of `rollout plan`, `rollout run` and
    serve's controller: shadow holds, ramp soaks and cost windows as written; an A/B step the longer
    of `min_duration` and the fixed horizon its metrics need (whole days), the smaller arm sized as
    the smaller of unequal arms, at `measured[index]` trials a day when the controller has measured
    them, else the stage's `daily_trials`. Also the sample sizes behind each A/B step."""
    from opsctl.quality.abtest import sample_size
    from opsctl.rollout.margins import ab_margin

    durations: dict[int, int] = {}
    sizes: dict[int, list] = {}
    ab_stages = iter([s.ab for s in plan.stages if s.ab is not None])
    for index, (stage_kind, _, _, seconds) in enumerate(step_list(plan)):
        durations[index] = seconds
        if stage_kind != "ab":
            continue
        stage = next(ab_stages)
        per_day = (measured or {}).get(index, stage.daily_trials)
        found = []
        for metric in stage.metrics:
            if metric.baseline is None or per_day is None:
                continue
            size = sample_size(metric.baseline, ab_margin(metric).value, alpha=stage.alpha, power=stage.power)
            days = horizon_days(size.per_arm, stage.share / 100, per_day)
            found.append((metric.name, SampleSize(size.per_arm, size.baseline, size.margin, size.alpha, size.power,
                                                  size.delta, size.variance, days, int(per_day),
                                                  min(stage.share, 100 - stage.share) / 100)))
        sizes[index] = found
        days = max((s.days for _, s in found if s.days is not None), default=0.0)
        durations[index] = max(seconds, int(-(-days // 1)) * 86400)
    return durations, sizes


def remaining(plan: RolloutPlan, calendar: FreezeCalendar, at: float, first: int,
              measured: dict[int, float] | None = None) -> Schedule:
    """The steps from `first` (0-based) on, placed from `at` as `schedule` places them: what the
    controller re-plans when it applies a step (and when it measures the A/B's traffic)."""
    durations, _ = step_seconds(plan, measured)
    return schedule(plan, calendar, at, durations, first=first)


class PlannedRollout(Model):
    """`opsctl rollout plan`: the schedule, and the sample sizes behind its A/B steps' horizons."""

    schedule: Schedule
    sizes: tuple[tuple[int, str, SampleSize], ...]  # (the step's 0-based index, the metric, its size)
    hours: str = ""  # the plan's working hours, said in words ("" without)

    def to_dict(self) -> dict:
        data = self.schedule.to_dict()
        data["working_hours"] = self.hours or None
        data["sample_sizes"] = [{"step": i + 1, "metric": name, **size.to_dict(),
                                 "smaller_arm": smaller_arm(size.per_arm, size.share or 0.5)}
                                for i, name, size in self.sizes]
        return data


def check_complete_by(plan: RolloutPlan, result: Schedule, where: str) -> None:
    """GuardRefused (exit 4: the freezes and the horizons refuse the deadline) when the schedule ends
    after the plan's `complete_by`, with the gap and the step that runs past it."""
    deadline = plan.complete_by_at
    if deadline is None or result.end <= deadline:
        return
    from opsctl.errors import GuardRefused

    late = next(s for s in result.steps if s.end > deadline)
    raise GuardRefused(f"{where}: complete_by {plan.complete_by}: the schedule ends {format_rfc3339(result.end)},"
                       f" {days_text(result.end - deadline)} late (step {late.index}, {late.label}, ends"
                       f" {format_rfc3339(late.end)}); start earlier, shorten the steps or move complete_by")


def plan_rollout(plan: RolloutPlan, calendar: FreezeCalendar, start: float | None, plan_file: str) -> PlannedRollout:
    """The plan scheduled from `start` (default: the plan's own; UsageError when neither is given),
    its A/B steps as long as their fixed horizons need."""
    at = start if start is not None else plan.start_at
    if at is None:
        raise UsageError(f"{plan_file}: the plan has no `start`: give --start TIME")
    durations, sizes = step_seconds(plan)
    result = schedule(plan, calendar, at, durations)
    check_complete_by(plan, result, plan_file)
    return PlannedRollout(result, tuple((i, name, size) for i, found in sorted(sizes.items()) for name, size in found),
                          hours_text(plan))
