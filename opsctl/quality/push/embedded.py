"""Probe figures into the gauges table of the embedded store file."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from opsctl.quality.push.base import Sample


class EmbeddedSink:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.description = f"embedded store {self.path} (gauges table)"

    def push(self, samples: Sequence[Sample], at: float) -> None:
        from opsctl.metrics.gauges import GaugeStore

        store = GaugeStore.open(self.path)
        try:
            store.write(((s.name, s.labels, s.value) for s in samples), int(at))
        finally:
            store.close()
