"""Equivalence margins drawn from the SLO a check protects (docs/decisions/0530).

A margin is the largest difference the rollout calls "the same". Absolute defaults hid what they
meant: 1 point over 1 s is the whole error budget of a 99.9% latency SLO ten times over. Here the
default is MARGIN_FRACTION of the SLO's error budget (1 - goal): the share of slow (or failed)
requests may grow by a tenth of what the SLO allows in all, no more, before the vendor is
"worse"/"different". An explicit margin (`--margin`, `args.margin`, a metric's `margin`) wins and
is said to be given.

  latency judge   the SLO whose latency threshold is the judge's (`le` = threshold), for the
                  candidate backend, else for the whole service (backend all/None); among several,
                  the strictest (smallest budget)
  A/B metric      the metric's `goal`: the SLO goal of the ratio of good trials it protects
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

from opsctl.model import Model

if TYPE_CHECKING:
    from opsctl.rollout.plan import AbMetric
    from opsctl.slo.model import SloDefinition

MARGIN_FRACTION = 0.1  # of the SLO's error budget (1 - goal): the difference still called the same


class Margin(Model):
    """A margin and where it comes from: given, or MARGIN_FRACTION of an SLO's budget."""

    value: float  # absolute difference of shares (0.0001 = 0.01 points)
    source: str  # given | slo | goal
    slo: str | None = None  # the SLO it protects (source slo)
    goal: float | None = None
    fraction: float | None = None

    @property
    def budget(self) -> float | None:
        return None if self.goal is None else round(1 - self.goal, 12)

    def describe(self) -> str:
        points = f"±{self.value * 100:g} points"
        if self.source == "given" or self.budget is None:
            return f"{points} (given)"
        whose = f"SLO {self.slo} ({self.goal:.6g})" if self.slo else f"goal {self.goal:.6g}"
        return f"{points} = {self.fraction:.0%} of the {self.budget * 100:g}-point error budget of {whose}"

    def to_dict(self) -> dict:
        return {"margin": self.value, "margin_source": self.source, "margin_slo": self.slo,
                "margin_goal": self.goal, "margin_fraction": self.fraction, "margin_text": self.describe()}


def given(value: float) -> Margin:
    return Margin(value, "given")


def of_goal(goal: float, slo: str | None = None, fraction: float = MARGIN_FRACTION) -> Margin:
    """fraction x (1 - goal), rounded to 12 digits (0.1 x (1 - 0.999) is 0.0001, not 1.0000000000000897e-04)."""
    return Margin(round(fraction * (1 - goal), 12), "slo" if slo else "goal", slo, goal, fraction)


def latency_margin(slos: Iterable[SloDefinition], backend: str, threshold: float,
                   explicit: float | None = None) -> Margin:
    """The latency judge's margin: `explicit` when given, else from the SLO with the judge's
    threshold protecting `backend` (its own SLO, else the service's). UsageError when none does."""
    if explicit is not None:
        return given(explicit)
    found = [s for s in slos if s.kind == "latency" and s.threshold_seconds is not None
             and math.isclose(s.threshold_seconds, threshold)]
    own = [s for s in found if s.backend == backend] or [s for s in found if s.backend in (None, "all")]
    if not own:
        from opsctl.errors import UsageError

        raise UsageError(f"no latency SLO with a {threshold:g}s threshold covers {backend}, so the judge has no"
                         " margin to draw from it: give the margin (--margin, or args.margin in the plan)"
                         " or add that SLO")
    slo = max(own, key=lambda s: (s.goal, s.name))  # the strictest: the smallest budget
    return of_goal(slo.goal, slo.name)


def ab_margin(metric: AbMetric) -> Margin:
    """An A/B metric's margin: its `margin` when given, else MARGIN_FRACTION of (1 - goal)."""
    if metric.margin is not None:
        return given(metric.margin)
    assert metric.goal is not None  # AbMetric refuses a metric with neither
    return of_goal(metric.goal)
