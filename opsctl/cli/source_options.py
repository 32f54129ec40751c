"""Shared flags for commands that read the metric source: --source, --prometheus-url, --at."""

from __future__ import annotations

import click


def source_options(fn):
    fn = click.option("--at", "at", metavar="RFC3339",
                      help="Evaluate at this instant (default: now; embedded store: its newest data).")(fn)
    fn = click.option("--source", "source_kind", type=click.Choice(["embedded", "prometheus"]),
                      help="Metric source (overrides the config).")(fn)
    fn = click.option("--prometheus-url", metavar="URL",
                      help="Query this Prometheus-compatible server (overrides the config).")(fn)
    return fn


def open_checked_source(cfg, source_kind, prometheus_url, at):
    """(source, evaluation instant); a dead source or an empty store fails here, fast."""
    from opsctl.clock import parse_rfc3339
    from opsctl.errors import UsageError
    from opsctl.metrics.base import open_source

    if prometheus_url and source_kind == "embedded":
        raise UsageError("--prometheus-url and --source embedded contradict each other")
    source = open_source(cfg, kind=source_kind, prometheus_url=prometheus_url)
    source.check()
    try:
        when = parse_rfc3339(at) if at else source.default_time()
    except ValueError as exc:
        raise UsageError(f"--at: not an RFC 3339 time: {at!r}") from exc
    return source, when


def parse_window(value: str, flag: str = "--window") -> int:
    from opsctl.clock import parse_duration
    from opsctl.errors import UsageError

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from exc
    if seconds < 60:
        raise UsageError(f"{flag}: must be at least 1m, got {value!r}")
    return seconds
