"""Shared flags for commands that read the metric source: --source, --prometheus-url, --at."""

from __future__ import annotations

import click

from opsctl.cli.params import TIME, choice


def source_options(fn):
    fn = click.option("--at", "at", type=TIME,
                      help="Evaluate at this instant: RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m (default: now on"
                           " every source; the embedded store: now, or its newest step when its data ends before now;"
                           " data ahead of now is never read).")(fn)
    fn = click.option("--source", "source_kind", type=choice(["embedded", "prometheus"]),
                      help="Metric source (overrides the config).")(fn)
    fn = click.option("--prometheus-url", metavar="URL", envvar="OPSCTL_PROMETHEUS_URL",
                      help="Query this Prometheus-compatible server (overrides the config;"
                           " $OPSCTL_PROMETHEUS_URL).")(fn)
    return fn


def _set_prometheus_url(ctx, param, value):
    if value and ctx.obj is not None:  # cli/main.py's AppContext, made by the group before this parse
        ctx.obj.prometheus_url = value
    return value


# For commands that read metrics through the config (the traffic guards, status, ramps): the URL
# replaces metrics.prometheus.url and makes prometheus the source, for this run only.
prometheus_url_option = click.option(
    "--prometheus-url", metavar="URL", envvar="OPSCTL_PROMETHEUS_URL", expose_value=False,
    callback=_set_prometheus_url,
    help="Read metrics for the guards from this Prometheus-compatible server (overrides the config;"
         " $OPSCTL_PROMETHEUS_URL).")


def with_prometheus_url(cfg, url: str):
    """The config with `url` as its metric source (metrics.source prometheus, metrics.prometheus.url)."""
    from dataclasses import replace

    from opsctl.errors import UsageError

    try:
        prometheus = replace(cfg.metrics.prometheus, url=url.rstrip("/"))
    except ValueError as exc:
        raise UsageError(f"--prometheus-url: {exc}", hint="e.g. --prometheus-url http://127.0.0.1:9090") from None
    return replace(cfg, metrics=replace(cfg.metrics, source="prometheus", prometheus=prometheus))


def open_checked_source(cfg, source_kind, prometheus_url, at):
    """(source, evaluation instant); a dead source or an empty store fails here, fast.

    `at` is what the TIME parameter type gave (UNIX seconds) or None; text is parsed the same way."""
    from opsctl.cli.params import parse_time
    from opsctl.errors import UsageError
    from opsctl.metrics.base import open_source

    if prometheus_url and source_kind == "embedded":
        if _from_environment("prometheus_url"):
            prometheus_url = None  # the flag given on the command line wins over the environment
        else:
            raise UsageError("--prometheus-url and --source embedded contradict each other")
    source = open_source(cfg, kind=source_kind, prometheus_url=prometheus_url)
    source.check()
    try:
        when = parse_time(at) if isinstance(at, str) else float(at) if at is not None else _default_time(source)
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from exc
    return source, when


def _default_time(source) -> float:
    """The source's own instant (`MetricSource.default_time`: now, never past it; the embedded
    store's newest step when its data ends earlier), on the 10 s grid on every source."""
    from opsctl.clock import wall_now
    from opsctl.metrics.schema import STEP_SECONDS

    now = float(int(wall_now()) // STEP_SECONDS * STEP_SECONDS)
    return min(source.default_time(), now)


def _from_environment(name: str) -> bool:
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) == click.core.ParameterSource.ENVIRONMENT


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
