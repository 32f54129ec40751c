"""How a runbook writes its figures: percentages, durations, "1 in N", latency thresholds.
Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations


def pct(ratio: float) -> str:
    """0.9999 -> '99.99%', 0.001344 -> '0.1344%'."""
    return f"{ratio * 100:.4g}%"


def human_duration(seconds: float) -> str:
    """A duration as a person reads it: '4.84 s', '4 min 2 s', '50 hours', '5 days'."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.3g} hours"
    return f"{seconds / 86400:.3g} days"


def one_in(ratio: float) -> str:
    """0.001344 -> '1 in 744'."""
    return f"1 in {1 / ratio:,.0f}" if ratio > 0 else "none"


def seconds_text(seconds: float) -> str:
    """A latency threshold: 0.5 -> '500 ms', 1.0 -> '1 s'."""
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"
