"""What an in-process alert evaluation returns (alerts.py evaluates): the burn-rate alerts firing
at an instant (`FiringAlert`), the SLOs whose metrics are absent (`AbsentAlert`), and the
evaluation around them with its notes (`AlertEvaluation`), each with its JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsctl.clock import format_rfc3339
from opsctl.slo import conventions as cv


@dataclass(frozen=True)
class FiringAlert:
    alertname: str
    severity: str
    slo: str
    backend: str | None  # None: an SLO without a backend label
    service: str
    long_window: str
    short_window: str
    factor: float
    burn_rate: float  # over the long window: the alert's value
    short_burn_rate: float
    request_rate: float | None  # valid events per second over the short window (None: no counts)
    at: float
    labels: dict[str, str] = field(compare=False)
    annotations: dict[str, str] = field(compare=False)
    cause: str = ""  # the `cause` annotation: the dominant bad outcome class, or the SLO's fixed cause
    category: str = "availability"
    tier: str = ""  # "fast": the fast-burn tier

    def to_dict(self) -> dict[str, Any]:
        return {
            "alertname": self.alertname,
            "severity": self.severity,
            "category": self.category,
            "cause": self.cause,
            "tier": self.tier or "standard",
            "slo": self.slo,
            "backend": self.backend,
            "service": self.service,
            "long_window": self.long_window,
            "short_window": self.short_window,
            "factor": self.factor,
            "burn_rate": self.burn_rate,
            "short_burn_rate": self.short_burn_rate,
            "request_rate": self.request_rate,
            "at": format_rfc3339(self.at),
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True)
class AbsentAlert:
    """SloMetricsAbsent firing: the SLI's series had no sample at every evaluation over its `for:`."""

    slo: str
    severity: str
    selector: str
    for_seconds: int
    at: float
    labels: dict[str, str] = field(compare=False)
    annotations: dict[str, str] = field(compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"alertname": cv.ABSENT_ALERT_NAME, "severity": self.severity, "category": "absent",
                "cause": "absent", "slo": self.slo, "selector": self.selector, "for_seconds": self.for_seconds,
                "at": format_rfc3339(self.at), "labels": dict(self.labels), "annotations": dict(self.annotations)}


@dataclass(frozen=True)
class AlertEvaluation:
    at: float
    firing: list[FiringAlert]
    unknown: dict[str, str]  # SLO name -> why it could not be evaluated (no data is never "quiet")
    # SLO name -> ("recorded" | "raw", why), for SLOs with windows derived from recorded increases,
    # on a source that could hold them (PromQL); empty elsewhere
    long_windows: dict[str, tuple[str, str]] = field(default_factory=dict)
    absent: list[AbsentAlert] = field(default_factory=list)  # SloMetricsAbsent, apart: it has no burn rate
    # SLO name -> the alert windows derived from the recorded increases (its period's: 1d and 3d at
    # 28 days, 6h and 18h at 7), named in the notes
    derived_windows: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per way the long windows were read: recorded (one line per set of windows, as
        periods differ), or raw and why; each names the windows it is about."""
        by_windows: dict[str, int] = {}
        for n, (used, _) in sorted(self.long_windows.items()):
            if used == "recorded":
                text = self._windows_text(n)
                by_windows[text] = by_windows.get(text, 0) + 1
        lines = [f"{text} from the recorded increases for {count} SLO(s)" for text, count in by_windows.items()]
        lines += [f"{self._windows_text(n)} from raw queries for {n}: {why}"
                  for n, (used, why) in sorted(self.long_windows.items()) if used == "raw"]
        return lines

    def _windows_text(self, name: str) -> str:
        windows = self.derived_windows.get(name, ())
        if not windows:
            return "the long windows"
        joined = windows[0] if len(windows) == 1 else f"{', '.join(windows[:-1])} and {windows[-1]}"
        return f"{joined} window{'s' if len(windows) > 1 else ''}"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "at": format_rfc3339(self.at),
            "firing": [a.to_dict() for a in self.firing],
            "unknown": [{"slo": name, "reason": why} for name, why in self.unknown.items()],
            "absent": [a.to_dict() for a in self.absent],
        }
        if self.long_windows:
            out["long_windows"] = [{"slo": n, "from": used, "why": why}
                                   for n, (used, why) in sorted(self.long_windows.items())]
        return out
