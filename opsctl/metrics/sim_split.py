"""The simulator's traffic split: `--split databricks=80,internal=20` parsed and checked, and the
default share per backend kind. Split from opsctl.metrics.simulator, which re-exports it."""

from __future__ import annotations

import math
from typing import Mapping

from opsctl.errors import UsageError

DEFAULT_SPLIT_BY_KIND = {"vendor": 80.0, "internal": 20.0}


def parse_split(text: str) -> dict[str, float]:
    """'databricks=80,internal=20' -> {'databricks': 80.0, 'internal': 20.0} (validated by `check_split`)."""
    split: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--split: {item!r} is not BACKEND=PERCENT", hint="e.g. --split databricks=80,internal=20")
        if name in split:
            raise UsageError(f"--split: backend {name!r} given twice")
        try:
            split[name] = float(value)
        except ValueError:
            raise UsageError(f"--split: {value.strip()!r} for {name!r} is not a number") from None
    if not split:
        raise UsageError("--split is empty", hint="e.g. --split databricks=80,internal=20")
    return split


def default_split(backends: Mapping[str, str]) -> dict[str, float]:
    """Vendors share 80%, internal backends 20% (each kind alone takes 100%), equally within a kind."""
    kinds = {k for k in backends.values()}
    shares = DEFAULT_SPLIT_BY_KIND if kinds >= {"vendor", "internal"} else {k: 100.0 for k in kinds}
    count = {k: sum(1 for v in backends.values() if v == k) for k in kinds}
    return {name: shares[kind] / count[kind] for name, kind in backends.items()}


def check_split(split: Mapping[str, float], backends: Mapping[str, str]) -> dict[str, float]:
    """Every name known, shares non-negative, sum 100; backends left out get 0%."""
    unknown = [n for n in split if n not in backends]
    if unknown:
        raise UsageError(f"--split: unknown backend {', '.join(map(repr, unknown))} (known: {', '.join(sorted(backends))})")
    negative = [n for n, v in split.items() if not v >= 0 or math.isinf(v)]
    if negative:
        raise UsageError(f"--split: the share of {', '.join(negative)} must be between 0 and 100")
    total = sum(split.values())
    if abs(total - 100.0) > 1e-6:
        raise UsageError(f"--split: the shares must sum to 100, got {total:g}")
    return {name: float(split.get(name, 0.0)) for name in backends}
