"""The MetricsSink protocol and the Sample it takes (the registry is registry.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Sample:
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


class MetricsSink(Protocol):
    description: str

    def push(self, samples: Sequence[Sample], at: float) -> None:
        """Write every sample as a gauge at instant `at`; raise OpsctlError when it cannot."""
        ...
