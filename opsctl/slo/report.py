"""An SLO report: every count fetched at one instant, each SLO computed, status per SLO."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from opsctl.clock import format_duration, format_rfc3339
from opsctl.metrics.base import MetricSource
from opsctl.slo import budget
from opsctl.slo.conventions import base_window, derived_windows, period_windows
from opsctl.slo.model import SloDefinition, counts_from
from opsctl.slo.recorded import (
    GroupedRecorded,
    Recorded,
    RecordedReads,
    coverage_selector,
    coverage_step,
    data_starts,
    grouped_plan,
    recorded_plan,
    slo_key,
)
from opsctl.slo.report_source import one_series

PERIOD = "period"


@dataclass
class SloResult:
    slo: SloDefinition
    at: float
    period_seconds: int
    counts: dict[str, budget.WindowCounts]
    burn_rate: dict[str, float | None]
    status: budget.Status
    sli: float | None = None
    error_budget_remaining: float | None = None
    missing: list[str] = field(default_factory=list)
    data_since: float | None = None  # where the period's data starts, when it starts inside the period
    long_windows: str | None = None  # recorded | raw, where recorded series were looked for
    long_windows_why: str = ""
    bucket_hint: str | None = None  # an exact `le` matching no bucket where a numerically equal one has data

    @property
    def covered_seconds(self) -> float | None:
        if self.data_since is None:
            return None
        return min(float(self.period_seconds), max(0.0, self.at - self.data_since))

    def notes(self) -> list[str]:
        """What a reader must know to read the figures right."""
        out = [f"{self.slo.name}: {n}" for n in self.slo.notes]
        if self.long_windows:
            out.append(f"{self.long_windows}: {self.long_windows_why}")
        covered = self.covered_seconds
        if covered is not None and self.data_since is not None and covered < self.period_seconds:
            out.append(f"only {_days(covered)} of the {round(self.period_seconds / 86400)}-day period have data"
                       f" (since {format_rfc3339(self.data_since)}): SLI and budget cover that span alone")
        if self.bucket_hint:
            out.append(f"{self.slo.name}: {self.bucket_hint}")
        return out

    @property
    def events(self) -> float | None:
        return self.counts[PERIOD].valid if self.slo.counts_increases else None

    @property
    def bad_events(self) -> float | None:
        return self.counts[PERIOD].bad if self.slo.counts_increases else None

    def worst_burn(self) -> tuple[str, float] | None:
        rated = [(w, r) for w, r in self.burn_rate.items() if r is not None]
        return max(rated, key=lambda item: item[1]) if rated else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.slo.name,
            "backend": self.slo.backend,
            "kind": self.slo.kind,
            "goal": self.slo.goal,
            "period": format_duration(self.period_seconds),
            "at": format_rfc3339(self.at),
            "sli": self.sli,
            "error_budget_remaining": self.error_budget_remaining,
            "burn_rate": dict(self.burn_rate),
            "status": self.status.level,
            "reason": self.status.reason,
            "alerts": list(self.status.fired),
            "events": _count(self.events),
            "bad_events": _count(self.bad_events),
            "long_windows": self.long_windows,
            "period_covered": None if self.covered_seconds is None else self.covered_seconds / self.period_seconds,
            "data_since": None if self.data_since is None else format_rfc3339(self.data_since),
            "notes": self.notes(),
            "file": self.slo.file,
        }


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} days" if abs(days - round(days)) > 0.05 else f"{round(days)} days"


def _count(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(round(value)) if abs(value - round(value)) < 1e-9 else value


def report_windows(period_seconds: int) -> dict[str, int]:
    """The period's own burn-rate windows (WINDOWS at 28-30 days, scaled otherwise) and the period."""
    return {**period_windows(period_seconds), PERIOD: period_seconds}


def plan_queries(slos: Sequence[SloDefinition], windows: dict[str, int]) -> list[str]:
    """Every distinct query a report needs, each with the SLO's own matchers."""
    seen: dict[str, None] = {}
    for slo in slos:
        for seconds in windows.values():
            for query in slo.queries(f"{seconds}s").values():
                seen.setdefault(query)
    return list(seen)


def _with_newest_edge(slo: SloDefinition, recorded: Recorded, seconds: int,
                      answers: dict[str, float | None]) -> budget.WindowCounts:
    """A long window from the recorded sums, plus what they lack where the data are younger than
    the window (`Recorded.newest_edge`): the raw counts over the newest intervals, over per_base."""
    counts = recorded.counts(slo.name, seconds, answers)
    edge = _edge_queries(slo, recorded.newest_edge(slo.name, seconds))
    if not edge or counts.valid is None:
        return counts
    g, v = counts_from(slo, {role: answers[q] for role, q in edge.items()})
    return budget.WindowCounts(good=(counts.good or 0.0) + (g or 0.0) / recorded.per_base,
                               valid=counts.valid + (v or 0.0) / recorded.per_base)


def _edge_queries(slo: SloDefinition, widths: Sequence[int]) -> dict[str, str]:
    """Role -> the SLO's raw counts over each of `widths` (the newest edge), added in one query
    (a window without samples adds none, as `or vector(0)`): one query per role, not per width."""
    if not widths:
        return {}
    per_width = [slo.queries(f"{w}s") for w in widths]
    return {role: " + ".join(f"({q[role]} or vector(0))" for q in per_width) for role in per_width[0]}


def window_counts(slo: SloDefinition, seconds: int, answers: dict[str, float | None]) -> budget.WindowCounts:
    good, valid = counts_from(slo, {role: answers[q] for role, q in slo.queries(f"{seconds}s").items()})
    return budget.WindowCounts(good=good, valid=valid)


def build_report(
    slos: Sequence[SloDefinition],
    source: MetricSource,
    at: float,
    period_seconds: int,
    *,
    progress: Callable[[str], None] | None = None,
    cross_check: bool = False,
    coverage: bool = False,
    recorded_interval: int | None = None,
    service: str | None = None,
    reads: RecordedReads | None = None,
    grouped_reads: bool = True,
    hourly: bool = True,
) -> list[SloResult]:
    """The figures and status are opsctl's. `cross_check=True` also has slo-generator recompute
    each window's SLI from the same counts and fails on a disagreement (its import and one compute
    per SLO and window cost ~150 ms: `opsctl slo report --cross-check` and tests ask for it).

    `recorded_interval` (the rules' evaluation interval): on a PromQL source, an SLO whose
    recorded base-window increases (`opsctl slo rules`) span its data takes 1d, 3d and the period
    from them instead of raw increase() over days of samples; otherwise raw, and said.

    Each SLO is computed over its own period (`SloDefinition.period_seconds`, else
    `period_seconds`), with that period's windows: one batch of queries per period.

    `service` (the config's; `slo report` gives it) reads the recorded series grouped, keyed by
    (service, slo): one query per recorded series and window for all the SLOs, and the short
    windows from the rules' recorded error ratios (the alerts' own figures) where they exist.
    `reads` shares those answers between the services of one fleet report (`fleet_reads`).
    `grouped_reads=False` (the guards) keeps the per-SLO recorded reads and raw short windows, still
    keyed by (service, slo). `hourly=False` keeps the grouped reads off the rules' hourly increases
    (docs/decisions/0420-fleet-read-on-coarse-records.md): the bench's old read path."""
    periods = list(dict.fromkeys(slo.period_or(period_seconds) for slo in slos))
    if len(periods) > 1:
        return [r for p in periods for r in build_report(
            [s for s in slos if s.period_or(period_seconds) == p], source, at, p, progress=progress,
            cross_check=cross_check, coverage=coverage, recorded_interval=recorded_interval,
            service=service, reads=reads, grouped_reads=grouped_reads, hourly=hourly)]
    period_seconds = periods[0] if periods else period_seconds
    long_windows = (*derived_windows(period_seconds), PERIOD)
    windows = report_windows(period_seconds)
    grouped = [slo for slo in slos if slo.grouping]
    slos = [slo for slo in slos if not slo.grouping]
    recorded: Recorded | None = None
    base = base_window(recorded_interval, period_seconds) if recorded_interval else None
    if recorded_interval and slos and service is not None and grouped_reads and getattr(source, "speaks_promql", False):
        if reads is None:
            reads = RecordedReads(source, at, sorted({slo_key(s, service)[0] for s in slos}))
        recorded = grouped_plan(slos, reads, service, period_seconds, recorded_interval, base=base, hourly=hourly)
    elif recorded_interval and slos:
        recorded = recorded_plan(slos, source, at, period_seconds, recorded_interval, base=base, service=service)
    use = recorded.usable if recorded else set()
    short: dict[str, dict[str, budget.WindowCounts]] = {}
    if isinstance(recorded, GroupedRecorded):
        long_seconds = sorted({windows[n] for n in long_windows})
        short_names = [n for n in windows if n not in long_windows]
        if use:
            recorded.reads.fetch([q for sec in long_seconds for q in recorded.window_exprs(sec)]
                                 + [recorded.ratio_query(n) for n in short_names])
        for slo in slos:
            if slo.name in use:
                found = {n: c for n in short_names if (c := recorded.ratio_counts(slo.name, n)) is not None}
                if len(found) == len(short_names):
                    short[slo.name] = found
    raw = {slo.name: {n: s for n, s in windows.items()
                      if not (slo.name in use and n in long_windows) and not (slo.name in short)} for slo in slos}
    asked: dict[str, None] = {}
    for slo in slos:
        for seconds in raw[slo.name].values():
            asked.update(dict.fromkeys(slo.queries(f"{seconds}s").values()))
        if recorded is None or slo.name not in use:
            continue
        if not isinstance(recorded, GroupedRecorded):
            for name in long_windows:
                asked.update(dict.fromkeys(recorded.queries(slo.name, windows[name]).values()))
        for name in long_windows:
            asked.update(dict.fromkeys(_edge_queries(slo, recorded.newest_edge(slo.name, windows[name])).values()))
    queries = list(asked)
    if progress:
        grouped_asked = f" and {recorded.reads.sent} grouped reads of the recorded series" if isinstance(recorded, GroupedRecorded) else ""
        progress(f"querying {source.description}: {len(queries)} queries{grouped_asked} for {len(slos)} SLOs")
    answers = dict(zip(queries, one_series(lambda: source.query_many(queries, at), slos, windows)))
    results = []
    for slo in slos:
        counts = {n: window_counts(slo, s, answers) for n, s in raw[slo.name].items()}
        if recorded is not None and slo.name in use:
            counts.update({n: _with_newest_edge(slo, recorded, windows[n], answers) for n in long_windows})
        counts.update(short.get(slo.name, {}))
        result = _evaluate(slo, windows, {n: counts[n] for n in windows}, at, period_seconds)
        if recorded and slo.counts_increases:
            result.long_windows = "recorded" if slo.name in use else "raw"
            result.long_windows_why = recorded.why.get(slo.name, "")
            corrected = [n for n in long_windows if slo.name in use and recorded.newest_edge(slo.name, windows[n])]
            if corrected:
                result.long_windows_why += (
                    f"; {', '.join(corrected)}: the newest {recorded.per_base - 1} evaluation intervals' events"
                    f" corrected from raw (data younger than the window)")
            if slo.name in short:
                result.long_windows_why += (f"; {', '.join(short[slo.name])} from the recorded"
                                            f" {_record_family()} series (the alerts' own ratios)")
        results.append(result)
    if coverage:
        spanning = recorded.spanning if isinstance(recorded, GroupedRecorded) else set()
        _add_coverage([r for r in results if r.slo.name not in spanning], source, at, period_seconds)
    for result in results:
        if any("matched no series" in m for m in result.missing):
            result.bucket_hint = bucket_label_hint(result.slo, source, at, period_seconds)
    if cross_check:
        from opsctl.slo.generator import check_sli, generator_reports

        for result in results:
            if result.slo.source_format in ("slo-generator", "openslo"):  # slo-generator runs what it reads
                check_sli(result, generator_reports(result, windows))
    for slo in grouped:
        results.extend(_grouped_results(slo, source, at, windows, period_seconds))
    return results


def _record_family() -> str:
    from opsctl.slo import conventions as cv

    return cv.record_error_ratio("<w>")


def fleet_reads(shared: dict[Any, Any], source: MetricSource, at: float) -> RecordedReads | None:
    """The grouped reads the services of one fleet report share (one dict per `--all-services`
    run): one per source and instant, reading every service's recorded series."""
    if not getattr(source, "speaks_promql", False):
        return None
    key = ("recorded-reads", source.description, at)
    reads = shared.get(key)
    if not isinstance(reads, RecordedReads):
        reads = shared[key] = RecordedReads(source, at)
    return reads


def group_name(slo: SloDefinition, key: tuple[str, ...]) -> str:
    """A grouped SLO's name for one group: `name{label="value",...}`, as Prometheus writes series."""
    return slo.name + "{" + ",".join(f'{k}="{v}"' for k, v in zip(slo.grouping, key)) + "}"


def _grouped_results(slo: SloDefinition, source: MetricSource, at: float, windows: dict[str, int],
                     period_seconds: int) -> list[SloResult]:
    """One result per group of an SLO with a grouping: its queries answer one series per group."""
    from dataclasses import replace

    from opsctl.errors import UsageError

    ask = getattr(source, "query_grouped", None)
    if ask is None:
        raise UsageError(f"{slo.file}: SLO {slo.name} is one SLI per {', '.join(slo.grouping)}: {source.description}"
                         " cannot answer grouped PromQL", hint="use a Prometheus source (--prometheus-url)")
    queries = list(dict.fromkeys(q for s in windows.values() for q in slo.queries(f"{s}s").values()))
    by_query = dict(zip(queries, ask(queries, at, slo.grouping)))
    groups = sorted({key for values in by_query.values() for key in values})
    if not groups:
        counts = {n: window_counts(slo, s, dict.fromkeys(queries)) for n, s in windows.items()}
        return [_evaluate(slo, windows, counts, at, period_seconds)]
    out = []
    for key in groups:
        one = replace(slo, name=group_name(slo, key), grouping=())
        answers = {q: by_query[q].get(key) for q in queries}
        out.append(_evaluate(one, windows, {n: window_counts(one, s, answers) for n, s in windows.items()},
                             at, period_seconds))
    return out


LONG_WINDOWS = ("1d", "3d", PERIOD)

_EXACT_LE = re.compile(r'\ble\s*=\s*"([0-9][0-9.eE+-]*)"')


def bucket_label_hint(slo: SloDefinition, source: MetricSource, at: float, period_seconds: int) -> str | None:
    """One line with the fix when a filter's exact `le="2"` matches no bucket but a numerically
    equal label (`2.0`, as Prometheus' clients write a float bound, or `2` for `2.0`) has data over
    the period: at most two more queries, asked only for an SLO whose filter matched no series."""
    for role, key in (("filter_good", "good"), ("filter_valid", "valid")):
        text = getattr(slo, role)
        match = _EXACT_LE.search(text) if text else None
        if text is None or match is None:
            continue
        written = match.group(1)
        try:
            bound = float(written)
        except ValueError:
            continue
        for form in sorted({repr(bound), format(bound, "g")} - {written}):
            fixed = text[:match.start()] + f'le="{form}"' + text[match.end():]
            query = replace(slo, **{role: fixed}).queries(f"{period_seconds}s").get(key)
            if query is None:
                continue
            [value] = source.query_many([query], at)
            if value is not None and not math.isnan(value):
                both = "|".join(re.escape(f) for f in sorted({written, form}, key=len))
                return (f'{role}: le="{written}" matches no bucket, but the bucket is labelled le="{form}":'
                        f' write le="{form}" (or le=~"{both}") in {slo.file}')
    return None


def _add_coverage(results: list[SloResult], source: MetricSource, at: float, period_seconds: int) -> None:
    """`coverage=True`: say where the period's data starts when that is inside the period (a 28-day
    budget over 4 days of data is not a 28-day budget). On PromQL, data present in the period's
    first step is read as covering it before any subquery over the whole period."""
    selectors = list({sel: None for r in results if (sel := coverage_selector(r.slo))})
    data_start = getattr(source, "data_start", None)
    if not selectors or data_start is None:
        return
    if getattr(source, "speaks_promql", False):
        found = data_starts(source, selectors, at, period_seconds)
    else:
        found = data_start(selectors, at, period_seconds)
    starts = dict(zip(selectors, found))
    for r in results:
        selector = coverage_selector(r.slo)
        start = starts.get(selector) if selector is not None else None
        if start is not None and start > at - period_seconds + coverage_step(period_seconds):
            r.data_since = start  # a shortfall finer than the subquery step is not reported


def _evaluate(slo: SloDefinition, windows: dict[str, int], counts: dict[str, budget.WindowCounts], at: float,
              period_seconds: int) -> SloResult:
    missing: list[str] = []
    for name, c in counts.items():
        if c.good is None and c.valid is None:
            missing.append(name if slo.counts_events else f"{name} (the SLI expression matched no series)")
        elif c.good is None:
            missing.append(f"{name} (filter_good matched no series)")
        elif c.valid is None:
            missing.append(f"{name} (filter_valid matched no series)")
    period = counts[PERIOD]
    if not missing and (broken := slo.broken(period.good, period.valid)) is not None:  # never clamped to 0
        return SloResult(slo, at, period_seconds, counts, {n: None for n in windows if n != PERIOD},
                         budget.Status("unknown", (), broken))
    burns = {name: budget.burn_rate(counts[name], slo.goal) for name in windows if name != PERIOD}
    ratio = budget.error_ratio(period)  # None without data or without valid events
    status = budget.evaluate_status(burns, missing, ratio is not None, period_seconds)
    result = SloResult(slo, at, period_seconds, counts, burns, status, missing=missing)
    if ratio is not None:
        result.sli = 1.0 - ratio
        result.error_budget_remaining = budget.budget_remaining(period, slo.goal)
    return result
