"""A sink that writes nothing: `--dry-run` shows what would be pushed."""

from __future__ import annotations

from typing import Sequence

from opsctl.quality.push.base import Sample


class NopSink:
    description = "nowhere (dry run)"

    def __init__(self):
        self.pushed: list[Sample] = []

    def push(self, samples: Sequence[Sample], at: float) -> None:
        self.pushed.extend(samples)
