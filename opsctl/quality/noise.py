"""The exact-match noise floor: how often a backend agrees with itself.

Batching and floating-point numerics make a model give a different answer to the same prompt now
and then, even at temperature 0, so two backends serving the very same weights agree less than
100%. `probe consistency --repeat N` sends the golden set N times to every backend and measures:

  self-agreement of a backend  the mean, over the N(N-1)/2 pairs of its runs, of the share of
                               prompts answered identically in both runs (the noise floor);
  between two backends         the mean, over the N x N pairs (a's run i, b's run j), of the share
                               answered identically.

A prompt not answered in a run never matches. If the two backends serve the same model, their
between figure sits at about the lower of their floors; `min_exact_match_between_vs_floor` sets the
between-backends threshold relative to that floor (e.g. 0.98 x the floor) instead of as an
absolute share. All pure functions of the answers.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

Run = Sequence[str | None]  # one run's answers, in golden order; None: not answered


def _matches(a: Run, b: Run) -> int:
    if len(a) != len(b) or not a:
        raise ValueError("two runs of the same non-empty golden set are needed")
    return sum(1 for x, y in zip(a, b) if x is not None and x == y)


def agreement(a: Run, b: Run) -> float:
    """Share of prompts answered identically in two runs (None never matches)."""
    return _matches(a, b) / len(a)


def _mean(pairs: list[tuple[Run, Run]]) -> float:
    # Every pair covers the same prompts: matches over all pairs / (pairs x prompts), one division,
    # so nine runs agreeing on 16 of 20 give exactly 0.8.
    return sum(_matches(a, b) for a, b in pairs) / (len(pairs) * len(pairs[0][0]))


def self_agreement(runs: Sequence[Run]) -> float:
    """Mean agreement over every pair of a backend's runs (at least two runs)."""
    pairs = list(combinations(runs, 2))
    if not pairs:
        raise ValueError("self-agreement needs at least two runs")
    return _mean(pairs)


def cross_agreement(runs_a: Sequence[Run], runs_b: Sequence[Run]) -> float:
    """Mean agreement over every pair (a's run i, b's run j)."""
    pairs = [(a, b) for a in runs_a for b in runs_b]
    if not pairs:
        raise ValueError("cross-agreement needs a run of each backend")
    return _mean(pairs)


def between_threshold(floor_a: float, floor_b: float, relative: float | None, absolute: float) -> tuple[float, str]:
    """The between-backends threshold and how it was set: `relative` x the lower floor when given,
    else the absolute share."""
    if relative is None:
        return absolute, f"absolute {absolute:.1%}"
    floor = min(floor_a, floor_b)
    return relative * floor, f"{relative:g} x the lower noise floor {floor:.1%}"
