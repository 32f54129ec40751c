"""One home for SLO names: windows, alert pairs, recording-rule names and label names."""

from __future__ import annotations

from dataclasses import dataclass

# Burn-rate windows, shortest first, in seconds.
WINDOWS: dict[str, int] = {
    "5m": 300,
    "30m": 1800,
    "1h": 3600,
    "2h": 7200,
    "6h": 21600,
    "1d": 86400,
    "3d": 259200,
}


@dataclass(frozen=True)
class AlertPair:
    """Google's multi-window multi-burn-rate pair: fire when both windows burn above the factor.

    `budget_share` is the share of the period's budget spent over `long` at the threshold rate;
    the factor is derived from it and the period, so a 28-day period gets its own numbers.
    """

    severity: str  # page | ticket
    long: str
    short: str
    budget_share: float

    def factor(self, period_seconds: int) -> float:
        return self.budget_share * period_seconds / WINDOWS[self.long]


ALERT_PAIRS: tuple[AlertPair, ...] = (
    AlertPair("page", "1h", "5m", 0.02),     # 14.4x on a 30-day period
    AlertPair("page", "6h", "30m", 0.05),    # 6x
    AlertPair("ticket", "1d", "2h", 0.10),   # 3x
    AlertPair("ticket", "3d", "6h", 0.10),   # 1x
)

SEVERITIES = ("page", "ticket")
STATUS_ORDER = {"ok": 0, "ticket": 1, "page": 2, "unknown": 3}

# Label names carried by generated rules and reports.
LABEL_SLO = "slo"
LABEL_BACKEND = "backend"
LABEL_SERVICE = "service"
LABEL_SEVERITY = "severity"

ALL_BACKENDS = "all"  # the `backend` label value of an SLO over the whole service
