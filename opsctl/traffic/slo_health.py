"""What a backend's own SLOs say about its health, for a traffic change: `slo_results` (evaluated at the
metric source's instant), `health_problems` (why a routine move toward it is refused) and `burn_now`
(its fastest burn over the short windows); `read_health` what the canary restore judges a move by
(each event-counting SLO's burn over the windows it asks for, against its threshold). The budget
guard (traffic/guards.py), the ramp's checks, the rollout's analyses and the canary restore read them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.metrics.base import MetricSource
    from opsctl.slo.model import SloDefinition
    from opsctl.slo.report import SloResult
    from opsctl.traffic.canary import BackendHealth, CanarySettings


def slo_results(cfg: "Config", source: Callable[[], "MetricSource"], at: Callable[[], float],
                backends: list[str]) -> "tuple[list[SloResult], list[str]]":
    """The backends' own SLOs evaluated at the source's evaluation instant (status only, no
    slo-generator cross-check). Returns (results, backends without any SLO). Raises NoDataError
    when the metric source cannot answer."""
    from opsctl.slo.loading import load_slos
    from opsctl.slo.report import build_report

    slos = [s for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg) if s.backend in backends]
    missing = [b for b in backends if not any(s.backend == b for s in slos)]
    if not slos:
        return [], missing
    results = build_report(slos, source(), at(), cfg.slos.period_seconds, cross_check=False,
                           recorded_interval=cfg.alerting.interval_seconds, service=cfg.service, grouped_reads=False)
    return results, missing


def health_problems(results: "Sequence[SloResult]", missing: list[str], *, budget_spent_counts: bool) -> list[str]:
    problems = [f"{b}: no SLO defined, so its error budget is unknown" for b in missing]
    for r in results:
        level = r.status.level
        if level == "page":
            problems.append(f"{r.slo.name} burns at page level ({r.status.reason})")
        elif level == "unknown":
            problems.append(f"{r.slo.name} has no data ({r.status.reason})")
        elif budget_spent_counts and r.error_budget_remaining is not None and r.error_budget_remaining <= 0:
            problems.append(f"{r.slo.name} has spent its error budget ({r.error_budget_remaining * 100:.1f}% left)")
    return problems


NOW_WINDOWS = ("5m", "30m", "1h")  # "burns now": the short windows, not the period's spent budget


def burn_now(results: "Sequence[SloResult]", backend: str) -> float | None:
    """The backend's fastest burn over the short windows (each SLO's own, scaled with its period),
    across its SLOs; None without data."""
    from opsctl.slo.conventions import scaled_label

    rates = [r.burn_rate.get(scaled_label(w, r.period_seconds))
             for r in results if r.slo.backend == backend for w in NOW_WINDOWS]
    known = [x for x in rates if x is not None]
    return max(known) if known else None



def backend_burns(cfg: "Config", source: "MetricSource", at: float, backend: str,
                  windows: Sequence[int]) -> "list[tuple[SloDefinition, float | None]]":
    """Each of the backend's event-counting SLOs (availability and latency) with its fastest burn
    over `windows` (seconds ending at `at`), from the raw counts in one batch: what the canary
    restore judges a move by. A burn is None where no request reached the backend in any window.
    Raises NoDataError when the source cannot answer, or the backend has no such SLO."""
    from opsctl.errors import NoDataError
    from opsctl.slo import budget
    from opsctl.slo.loading import load_slos
    from opsctl.slo.report import window_counts

    slos = [s for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg) if s.backend == backend and s.counts_events]
    if not slos:
        raise NoDataError(f"{backend} has no event-counting SLO to judge a restore by")
    queries = list(dict.fromkeys(q for s in slos for w in windows for q in s.queries(f"{w}s").values()))
    answers = dict(zip(queries, source.query_many(queries, at)))
    out: list[tuple[SloDefinition, float | None]] = []
    for slo in slos:
        known = [b for b in (budget.burn_rate(window_counts(slo, w, answers), slo.goal) for w in windows) if b is not None]
        out.append((slo, max(known) if known else None))
    return out


def read_health(cfg: "Config", backend: str, windows: tuple[int, ...], at: float, settings: "CanarySettings",
                source: "Callable[[], MetricSource] | None" = None) -> "BackendHealth":
    """The backend's burn over `windows` ending at `at` (the caller's instant), each of its
    event-counting SLOs against its threshold (availability: `fail_factor`, latency:
    `latency_fail_factor`); a source that does not answer is `BackendHealth.unknown` (no data is
    never healthy)."""
    from opsctl.errors import NoDataError
    from opsctl.traffic.canary import BackendHealth

    if not windows:
        return BackendHealth(None, windows=windows)
    try:
        opened = source() if source is not None else _guard_source(cfg)
        burns = backend_burns(cfg, opened, at, backend, windows)
    except NoDataError:
        return BackendHealth.unknown(windows)
    known = [(slo, b, settings.latency_fail_factor if slo.kind == "latency" else settings.fail_factor)
             for slo, b in burns if b is not None]
    if not known:
        return BackendHealth(None, windows=windows)
    slo, burn, limit = max(known, key=lambda k: k[1] / k[2])
    return BackendHealth(max(b for _, b, _ in known), windows=windows, failing=burn >= limit,
                         worst=f"{slo.name} {burn:.4g}x, fails at {limit:.4g}x")


def _guard_source(cfg: "Config") -> "MetricSource":
    from opsctl.metrics.base import open_source

    source = open_source(cfg)
    if hasattr(source, "bounded"):  # as the guards: never wait on metrics past a short bound
        source = source.bounded(cfg.metrics.prometheus.guard_deadline)
    source.check()
    return source
