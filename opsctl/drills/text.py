"""How drills write burn rates, thresholds and durations: one formatter each, so the timeline,
the verdicts, the reports and the chart say the same number the same way."""

from __future__ import annotations


def rate_text(value: float, digits: int = 1) -> str:
    """A burn rate: `14.4x` (how many times faster than sustainable the budget burns)."""
    return f"{value:.{digits}f}x"


def threshold_text(factor: float) -> str:
    """A burn-rate threshold as every output prints it: `13.44x`, `0.9333x`, `6x` (4 significant digits)."""
    from opsctl.slo.conventions import format_factor

    return f"{format_factor(factor)}x"


def burn_over_threshold(alert) -> str:
    """A burn-rate alert's evidence: `burn 20.3x > 14.4x`."""
    return f"burn {rate_text(alert.burn_rate)} > {threshold_text(alert.factor)}"


def duration_text(seconds: float | None) -> str:
    """`4m30s`, `1h02m00s`; `-` when unknown."""
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h}h{m:02d}m{s:02d}s" if h else f"{sign}{m}m{s:02d}s"


def offset_text(seconds: float) -> str:
    """An offset from the first fault, signed: `+4m30s`, `-0m10s`."""
    text = duration_text(seconds)
    return text if text.startswith("-") else "+" + text


def tolerance_text(value) -> str:
    """A probe's tolerance as text: `databricks 80, internal 20`, `ok`, `0` (never raw JSON)."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {tolerance_text(v)}" for k, v in value.items()) or "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(tolerance_text(v) for v in value) or "-"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def params_text(params) -> str:
    """A fault's parameters as the timeline says them: `rate=0.1, auth_rate=0.2` (the simulator's
    `--incident` spelling; never a Python dict); `no parameters` when there are none."""
    from collections.abc import Mapping

    if not isinstance(params, Mapping):
        return tolerance_text(params)
    return ", ".join(f"{k}={tolerance_text(v)}" for k, v in params.items()) or "no parameters"


def weights_text(weights) -> str:
    """A split's weights as every plan says them: `databricks 70, internal 30` (the traffic-split
    probe's tolerance spelling; never a Python dict); `no weights` when there are none."""
    from collections.abc import Mapping

    if not isinstance(weights, Mapping):
        return tolerance_text(weights)
    return tolerance_text(dict(weights)) if weights else "no weights"


def rel_path(path: object) -> str:
    """A path as short as it can be said: relative to the working directory when under it."""
    import os

    text = str(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:
        return text
    return relative if not relative.startswith("..") else text
