"""The MetricSource protocol every metric backend implements, and the factory that picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence

if TYPE_CHECKING:
    from opsctl.config import Config


class MetricSource(Protocol):
    """Answers instant PromQL queries at one evaluation instant.

    `query_many` returns one value per expression, or None where no series matched (no data,
    never zero). Implementations raise SourceUnavailable when they cannot answer at all.
    """

    description: str

    def check(self) -> None: ...

    def query_many(self, exprs: Sequence[str], at: float) -> list[float | None]: ...

    def default_time(self, now: float | None = None) -> float:
        """The instant a report evaluates at when none is given (now, or the newest data); `now` is
        the caller's simulated clock when it has one (None: the wall clock)."""
        ...

    def data_start(self, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
        """Per series selector, when its data starts within (at - span, at]; None if it has none."""
        ...

    def newest_sample(self, at: float) -> float | None:
        """The instant of the newest sample at or before `at` (None when none is in reach)."""
        ...


def fresh_data_age(source: MetricSource, now: float, max_age_seconds: int) -> float:
    """How old the source's newest sample is at `now`; NoDataError when older than the bound.

    One rule for every source: the embedded store's newest step and Prometheus' newest sample are
    judged alike, so stale data never passes a guard as "data present"."""
    from opsctl.clock import format_duration, format_rfc3339
    from opsctl.errors import NoDataError

    newest = source.newest_sample(now)
    bound = format_duration(max_age_seconds)
    hint = "check that the proxy's metrics are still being collected (or raise metrics.max_data_age)"
    if newest is None:
        reach = "the last day" if source.description.startswith("Prometheus") else "the store"
        raise NoDataError(f"no metrics from {source.description} in {reach} before {format_rfc3339(now)}"
                          f" (guards need a sample newer than {bound})", hint=hint)
    age = max(0.0, now - newest)
    if age > max_age_seconds:
        raise NoDataError(f"stale metrics: the newest sample in {source.description} is {age_text(age)}"
                          f" old ({format_rfc3339(newest)}), more than metrics.max_data_age {bound}", hint=hint)
    return age


def open_source(cfg: "Config", *, kind: str | None = None, prometheus_url: str | None = None) -> MetricSource:
    """Build the configured source; flags override the config. Unknown kinds fail closed."""
    from dataclasses import replace

    from opsctl.errors import UsageError

    kind = kind or ("prometheus" if prometheus_url else cfg.metrics.source)
    if kind == "embedded":
        from opsctl.metrics.embedded import EmbeddedStore

        return EmbeddedStore.open(cfg.state_path / "metrics.sqlite", create=False, labels=cfg.service_labels)
    if kind == "prometheus":
        from opsctl.metrics.prometheus import PrometheusSource

        settings = cfg.metrics.prometheus
        if prometheus_url:
            try:
                settings = replace(settings, url=prometheus_url.rstrip("/"))
            except ValueError as exc:
                raise UsageError(f"--prometheus-url: {exc}", hint="e.g. --prometheus-url http://127.0.0.1:9090") from None
        return PrometheusSource(settings)
    raise UsageError(f"unknown metric source {kind!r} (known: embedded, prometheus)")


def age_text(seconds: float) -> str:
    """A data age for people: '12s', '4m 10s', '11h 2m', '3d 4h'."""
    s = int(round(seconds))
    for big, big_name, small, small_name in ((86400, "d", 3600, "h"), (3600, "h", 60, "m"), (60, "m", 1, "s")):
        if s >= big:
            rest = (s % big) // small
            return f"{s // big}{big_name}" + (f" {rest}{small_name}" if rest else "")
    return f"{s}s"
