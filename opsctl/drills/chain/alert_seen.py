"""A firing alert as a chain drill saw it in Prometheus' rules API (`ChainAlert`, `alert_of`): what the
collector keeps of each and the chain's judge (observed.py) reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChainAlert:
    """A firing alert as Prometheus' rules API holds it: the labels the Judge reads, and its cause."""

    alertname: str
    slo: str
    backend: str | None
    severity: str
    cause: str | None
    windows: str

    def describe(self) -> str:
        return (f"{self.alertname} {self.slo} {self.windows} on {self.backend or 'all'}"
                + (f" (cause {self.cause})" if self.cause else ""))


def alert_of(labels: dict, annotations: dict) -> ChainAlert:
    windows = f"{labels.get('long_window', '')}/{labels.get('short_window', '')}".strip("/")
    backend = labels.get("backend")
    return ChainAlert(alertname=labels.get("alertname", ""), slo=labels.get("slo", ""),
                      backend=None if backend in (None, "all") else backend, severity=labels.get("severity", ""),
                      cause=annotations.get("cause") or labels.get("cause"), windows=windows)
