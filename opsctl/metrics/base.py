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

    def default_time(self) -> float:
        """The instant a report evaluates at when none is given (now, or the newest data)."""
        ...

    def data_start(self, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
        """Per series selector, when its data starts within (at - span, at]; None if it has none."""
        ...


def open_source(cfg: "Config", *, kind: str | None = None, prometheus_url: str | None = None) -> MetricSource:
    """Build the configured source; flags override the config. Unknown kinds fail closed."""
    from dataclasses import replace

    from opsctl.errors import UsageError

    kind = kind or ("prometheus" if prometheus_url else cfg.metrics.source)
    if kind == "embedded":
        from opsctl.metrics.embedded import EmbeddedStore

        return EmbeddedStore.open(cfg.state_path / "metrics.sqlite", create=False)
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
