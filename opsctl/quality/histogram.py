"""Percentiles from cumulative histogram buckets, interpolated the way PromQL's histogram_quantile is."""

from __future__ import annotations

import math
from typing import Sequence


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """`buckets` are (upper bound, cumulative count) pairs and must include +Inf.

    Like Prometheus: find the first bucket whose count reaches rank = q x total and interpolate
    linearly inside it (from 0 for the first bucket); a rank in the +Inf bucket gives the highest
    finite bound. None when there are no observations.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be between 0 and 1, got {q}")
    ordered = sorted(buckets)
    if len(ordered) < 2 or ordered[-1][0] != math.inf:
        raise ValueError("a histogram needs at least one finite bucket and the +Inf bucket")
    # Counts must not decrease with the bound (they can, slightly, across scrapes): as Prometheus does.
    counts, running = [], 0.0
    for _, count in ordered:
        running = max(running, count)
        counts.append(running)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, c in enumerate(counts) if c >= rank)
    if index == len(ordered) - 1:
        return ordered[-2][0]
    upper = ordered[index][0]
    if index == 0 and upper <= 0:
        return upper
    lower, below = (0.0, 0.0) if index == 0 else (ordered[index - 1][0], counts[index - 1])
    inside = counts[index] - below
    if inside <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / inside
