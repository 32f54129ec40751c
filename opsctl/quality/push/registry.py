"""The push targets by name: a registry that fails closed (an unknown target is an error)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opsctl.errors import UsageError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.quality.push.base import MetricsSink


def _embedded(cfg: "Config", url: str | None) -> MetricsSink:
    from opsctl.quality.push.embedded import EmbeddedSink

    return EmbeddedSink(cfg.state_path / "metrics.sqlite")


def _pushgateway(cfg: "Config", url: str | None) -> MetricsSink:
    from opsctl.quality.push.pushgateway import PushgatewaySink

    settings = cfg.quality.push
    return PushgatewaySink(url or settings.pushgateway_url, job=settings.job, grouping={"service": cfg.service},
                           timeout=settings.timeout)


def _nop(cfg: "Config", url: str | None) -> MetricsSink:
    from opsctl.quality.push.nop import NopSink

    return NopSink()


SINKS = {"embedded": _embedded, "pushgateway": _pushgateway, "none": _nop}


def open_sink(cfg: "Config", kind: str | None = None, *, url: str | None = None) -> MetricsSink:
    kind = kind or cfg.quality.push.target
    factory = SINKS.get(kind)
    if factory is None:
        raise UsageError(f"unknown push target {kind!r} (known: {', '.join(sorted(SINKS))})")
    return factory(cfg, url)
