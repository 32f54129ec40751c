"""The burn parts of a drill report (`report_model.DrillReport`): the error budget the drill spent,
the burn chart's data (svg.burn_chart draws from it alone) and the burn-rate maths' prediction
(drills/prediction.py) with its tiers, hops and the response predicted after detection.
"""

from __future__ import annotations

from typing import Any

from opsctl.drills.report_part import Number, Part
from opsctl.model import field


class BudgetRow(Part):
    slo: str = ""
    spent: Number | None = None
    peak_burn_1h: Number | None = None


class Budget(Part):
    basis: str = ""
    period_days: int | None = None
    slos: tuple[BudgetRow, ...] = ()


class ChartPoint(Part):
    offset: Number = 0
    values: dict[str, dict[str, Any]] = field(default_factory=dict)  # slo -> burn_5m, burn_1h, spent...

    def value(self, slo: str, key: str) -> Number | None:
        v = self.values.get(slo, {}).get(key) if isinstance(self.values.get(slo), dict) else None
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class Marker(Part):
    offset: Number = 0
    label: str = ""


class Threshold(Part):
    window: str = ""
    factor: Number = 0


class Stop(Part):
    slo: str | None = None
    label: str = ""
    above: Number = 0
    name: str = ""


class Chart(Part):
    """The burn chart's data (svg.burn_chart draws from it alone)."""

    slos: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    points: tuple[ChartPoint, ...] = ()
    markers: tuple[Marker, ...] = ()
    page_factor: Number | None = None
    thresholds: tuple[Threshold, ...] = ()
    stops: tuple[Stop, ...] = ()


class Tier(Part):
    """A page tier's predicted time to fire (prediction.predict)."""

    OPTIONAL = frozenset({"keep_firing_seconds"})
    alert: str = ""
    tier: str = ""
    long: str = ""
    short: str = ""
    factor: Number = 0
    for_seconds: Number = 0
    interval_seconds: Number | None = None
    keep_firing_seconds: Number | None = None
    predicted_seconds: Number | None = None
    why: str = ""


class PredictedHop(Part):
    """A hop's measured time beside its prediction (embedded: and the budget spent by then)."""

    OPTIONAL = frozenset({"predicted_seconds", "why"})
    hop: str = ""
    seconds: Number | None = None
    budget_spent: Number | None = None
    predicted_seconds: Number | None = None
    why: str | None = None


class Response(Part):
    """The hops after detection, predicted from the config and the policy (prediction.response_hops)."""

    alert: str = ""
    tier: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    cause: str = ""
    page_wait_seconds: Number = 0
    delivery_wait_seconds: Number = 0
    policies: tuple[str, ...] = ()
    ticket_category: str | None = None


class PredictedSlo(Part):
    slo: str = ""
    burn: Number | None = None
    bad_share: Number | None = None
    predicted_seconds: Number | None = None


class Prediction(Part):
    """The burn-rate maths beside what happened (drills/prediction.py): embedded and live from the
    fault's measured burn, a chain drill from the fault (`group_wait_seconds`, `slos`, `no_page`)."""

    OPTIONAL = frozenset({"bad_share", "group_wait_seconds", "predicted_page_seconds", "slos", "response",
                          "no_page", "note", "fault", "fault_kind", "onset_seconds"})
    slo: str = ""
    burn: Number | None = None
    bad_share: Number | None = None
    burn_basis: str = ""
    tiers: tuple[Tier, ...] = ()
    group_wait_seconds: Number | None = None
    predicted_detection_seconds: Number | None = None
    predicted_page_seconds: Number | None = None
    measured_detection_seconds: Number | None = None
    slos: tuple[PredictedSlo, ...] | None = None
    hops: tuple[PredictedHop, ...] = ()
    response: Response | None = None
    no_page: str | None = None
    note: str | None = None
    # set when a later fault than the scenario's first pages first (prediction.first_page): its
    # index in the scenario's faults, its kind, its onset after the first fault; every time above
    # is after the first fault
    fault: int | None = None
    fault_kind: str | None = None
    onset_seconds: Number | None = None
