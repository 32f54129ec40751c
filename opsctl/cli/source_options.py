"""Shared flags for commands that read the metric source: --source, --prometheus-url, --at."""

from __future__ import annotations

import click

from opsctl.cli.params import TIME, choice


def source_options(fn):
    fn = click.option("--at", "at", type=TIME,
                      help="Evaluate at this instant, with its time zone (default: now; embedded store: its newest"
                           " data).")(fn)
    fn = click.option("--source", "source_kind", type=choice(["embedded", "prometheus"]),
                      help="Metric source (overrides the config).")(fn)
    fn = click.option("--prometheus-url", metavar="URL",
                      help="Query this Prometheus-compatible server (overrides the config).")(fn)
    return fn


def open_checked_source(cfg, source_kind, prometheus_url, at):
    """(source, evaluation instant); a dead source or an empty store fails here, fast.

    `at` is what the TIME parameter type gave (UNIX seconds) or None; text is parsed the same way."""
    from opsctl.cli.params import parse_time
    from opsctl.errors import UsageError
    from opsctl.metrics.base import open_source

    if prometheus_url and source_kind == "embedded":
        raise UsageError("--prometheus-url and --source embedded contradict each other")
    source = open_source(cfg, kind=source_kind, prometheus_url=prometheus_url)
    source.check()
    try:
        when = parse_time(at) if isinstance(at, str) else float(at) if at is not None else source.default_time()
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from exc
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
