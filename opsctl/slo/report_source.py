"""What an SLO report asks of its metric source beside the counts: the instant it evaluates at
(`align_at`), one series per query (`one_series`, the report's refusal of a query answering
several; `series_problems`, `slo validate`'s check of every query on a live server), and what the
source said beside its answers (`source_notes`, `why_no_data`)."""

from __future__ import annotations

from typing import Callable, Sequence

from opsctl.clock import format_rfc3339
from opsctl.metrics.base import MetricSource
from opsctl.slo.model import SloDefinition


def align_at(source: MetricSource, when: float, given: bool, scope: str = "") -> tuple[float, str | None]:
    """An `--at` between two samples evaluates at the sample before it (Prometheus would
    extrapolate past the last one): the embedded store's 10 s steps; on Prometheus the configured
    `metrics.prometheus.step`, else the data's own: its newest request sample at or before `--at`
    (of this service's series: `scope` is the service matcher, Config.service_matcher)."""
    from opsctl.metrics.schema import REQUESTS, STEP_SECONDS

    if not given:
        return when, None
    step = source.step_seconds() if hasattr(source, "step_seconds") else None
    if getattr(source, "speaks_promql", False) and step is None:
        selector = f"{REQUESTS}{{{scope}}}" if scope else REQUESTS
        newest = source.query_many([f"max(timestamp({selector}))"], when)[0]
        if newest is None or newest >= when:
            return when, None
        return float(newest), (f"--at {format_rfc3339(when)} falls between two samples: evaluated at"
                               f" {format_rfc3339(newest)}, the newest sample before it"
                               " (the data's own step; metrics.prometheus.step sets one)")
    step = step or STEP_SECONDS
    if when % step == 0:
        return when, None
    aligned = float(when // step * step)
    return aligned, (f"--at {format_rfc3339(when)} falls between two {step:g} s samples: evaluated at"
                     f" {format_rfc3339(aligned)}, the sample boundary before it")


def source_notes(source: MetricSource) -> list[str]:
    """What the source said beside its answers: Prometheus' warnings, answers read as no data."""
    return list(getattr(source, "warnings", [])) + list(getattr(source, "problems", []))


def why_no_data(source: MetricSource) -> str:
    """The first answer read as no data (NaN, +/-Inf), for the one line of a no-data error."""
    problems = getattr(source, "problems", [])
    return f" ({problems[0]}{f'; {len(problems) - 1} more' if len(problems) > 1 else ''})" if problems else ""


def one_series(ask: Callable[[], list[float | None]], slos: Sequence[SloDefinition],
                windows: dict[str, int]) -> list[float | None]:
    """`ask()`, with a query that answered several series named by the SLO file and key it came
    from: opsctl never keeps one series of several (which one arrives last is chance)."""
    from opsctl.errors import UsageError
    from opsctl.metrics.prometheus import ManySeries

    try:
        return ask()
    except ManySeries as exc:
        for slo in slos:
            for seconds in windows.values():
                for role, query in slo.queries(f"{seconds}s").items():
                    if query == exc.expr:
                        raise UsageError(
                            f"{slo.file}: {slo.key_of(role)}: {exc.message.replace(f'the query {query}', 'its query', 1)}"
                            f" (SLO {slo.name}): one of them would be a wrong SLI", hint=SUM_HINT) from None
        raise


def series_problems(slos: Sequence[SloDefinition], source: MetricSource, at: float, seconds: int = 300) -> list[str]:
    """`slo validate --prometheus-url`: each SLO query's cardinality on a live server, over one
    window; a query that must answer one number (one per group, with a grouping) and answers
    more is a problem named by its file and key."""
    asked: list[tuple[SloDefinition, str, str]] = []
    for slo in slos:
        for role, query in slo.queries(f"{seconds}s").items():
            by = ", ".join(slo.grouping)
            asked.append((slo, role, f"max(count by ({by}) ({query}))" if slo.grouping else f"count({query})"))
    counts = source.query_many([q for _, _, q in asked], at)
    problems = []
    for (slo, role, _), n in zip(asked, counts):
        if n is not None and n > 1:
            per = f" per {', '.join(slo.grouping)}" if slo.grouping else ""
            problems.append(f"{slo.file}: {slo.key_of(role)}: its query answers {int(n)} series{per} at"
                            f" {source.description}, not one (SLO {slo.name}); {SUM_HINT}")
    return problems


SUM_HINT = ("aggregate it to one series, e.g. sum(...) around the expression (or sum by (...) with a"
            " grouping, one SLI per group)")
