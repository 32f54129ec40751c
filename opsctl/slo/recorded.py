"""Where the recorded base-window increases can stand in for raw long windows, and how to read them.

`slo report`, the guards and `slo alerts` take a long window (1d, 3d, the period) from the
recorded `slo:sli_good|valid:increase<base>` series only where those span the SLO's data inside
the window: a rule loaded yesterday cannot answer for 28 days.

Checking that must not cost what the recorded series save. The recorded series are counted (one
series per SLO); only when they fall short of the window is the raw selector asked whether it
has any sample before the recorded start (an offset range covering just that gap), and only then
is the raw data's start searched for, to say why. Where the data covers the window, the coverage
note of the report likewise asks one step at the window's start before any subquery over it.

At fleet scale (`slo report --all-services`, hundreds of SLOs) the recorded series are read
grouped (`RecordedReads`): one query per recorded series and window answers every SLO at once,
each series keyed by its `service` and `slo` labels, so requests grow with the windows, not with
SLOs x windows, and two services' SLOs of one name never mix.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence, TypeGuard

from opsctl.metrics.base import MetricSource
from opsctl.slo import budget
from opsctl.slo import conventions as cv
from opsctl.slo.model import SloDefinition, has_placeholder


class GroupedSource(MetricSource, Protocol):
    """A source that also answers grouped PromQL (Prometheus): per expression, its series by the
    values of `labels`."""

    def query_grouped(self, exprs: Sequence[str], at: float, labels: Sequence[str], *,
                      finite: bool = True) -> list[dict[tuple[str, ...], float | None]]: ...


def answers_grouped(source: MetricSource) -> TypeGuard[GroupedSource]:
    return callable(getattr(source, "query_grouped", None))


@dataclass
class Recorded:
    """Which SLOs' long windows come from the recorded increases, and how to ask for them."""

    base: str
    per_base: int  # evaluations per base window: each event is counted this many times
    usable: set[str]
    why: dict[str, str]  # SLO name -> which series answered, or why the raw ones did
    services: dict[str, str] = field(default_factory=dict)  # SLO name -> the service on its recorded series
    young: dict[str, int] = field(default_factory=dict)  # SLO name -> seconds its recorded series span, when short of `span`
    interval: int = 60  # the rules' evaluation interval

    def newest_edge(self, slo_name: str, seconds: int) -> list[int]:
        """The raw windows correcting a window younger data leave uncompensated: [interval, 2 x
        interval, ... (per_base - 1) x interval], or none where the data reach back past the
        window's start by a base window (there the events before the start, recorded in part,
        make up for the newest ones recorded in part).

        Summed over the window, the base increases recorded every interval count an event of the
        newest j-th interval per_base - j times instead of per_base: the raw counts over those
        windows, added and divided by per_base, are what the sum lacks (docs/decisions/0020-long-windows-from-recorded-increases.md)."""
        have = self.young.get(slo_name)
        if have is None or have >= seconds + self.per_base * self.interval:
            return []
        return [j * self.interval for j in range(1, self.per_base)]

    def queries(self, slo_name: str, seconds: int) -> dict[str, str]:
        """Role -> the recorded increases summed over a window (range one second short, so it
        holds window / interval samples whichever way its start is counted), of the SLO's own
        series: its `slo` and, where known, `service` labels."""
        own = own_matchers(slo_name, self.services.get(slo_name))
        return {role: f"sum_over_time({record}{own}[{seconds - 1}s])" for role, record in
                (("good", cv.record_good_increase(self.base)), ("valid", cv.record_valid_increase(self.base)))}

    def counts(self, slo_name: str, seconds: int, answers: dict[str, float | None]) -> budget.WindowCounts:
        """The window's events: the recorded sums divided by the times each event was recorded."""
        q = self.queries(slo_name, seconds)
        good, valid = answers[q["good"]], answers[q["valid"]]
        return budget.WindowCounts(None if good is None else good / self.per_base,
                                   None if valid is None else valid / self.per_base)


def coverage_selector(slo: SloDefinition) -> str | None:
    """The series whose data span bounds the SLO's: its valid (or good) selector, when plain; else,
    in every format, the last selector of its valid or SLI query (Sloth's and Pyrra's total, a
    query_sli's denominator): the total's series start no later than the errors'."""
    from opsctl.metrics.promql import format_selector, selectors_in

    text = slo.filter_valid or slo.filter_good
    if slo.counts_events and text is not None and not has_placeholder(text) and not slo.counts:
        return text
    named = [s for s in selectors_in(text or slo.expression or "") if s.metric]
    return format_selector(named[-1]) if named else None


def coverage_step(span: int) -> int:
    """The resolution of a data start: 1 h for 28 days, never under a minute."""
    return max(60, span // 672)


def data_starts(source: MetricSource, selectors: Sequence[str], at: float, span: int) -> list[float | None]:
    """Per selector, where its data starts within (at - span, at], to `coverage_step(span)`.

    A selector with a sample in the window's first step starts there (one step of samples read);
    only the others are searched with the source's subquery over the whole window."""
    if not selectors:
        return []
    step = coverage_step(span)
    first = source.query_many([f"count(count_over_time({s}[{step}s] offset {span - step}s))" for s in selectors], at)
    later = [s for s, n in zip(selectors, first) if n is None]
    found = dict(zip(later, source.data_start(later, at, span))) if later else {}
    return [at - span if n is not None else found.get(s) for s, n in zip(selectors, first)]


def recorded_plan(slos: Sequence[SloDefinition], source: MetricSource, at: float, span: int, interval: int,
                  what: str = "1d, 3d and the period", base: tuple[str, int] | None = None,
                  service: str | None = None) -> Recorded | None:
    """Which SLOs can take their windows up to `span` from the recorded increases at `at`.

    Usable where the recorded valid increases reach back over the whole window, or to where the
    raw data starts (to `slack`, a few evaluations or 1/672 of the window). None on a source
    that does not speak PromQL (the embedded store has no recorded series). `base`: the SLOs'
    recorded window (cv.base_window of their period; default that of a 28-30-day period).
    `service`: the config's, the `service` label of the recorded series (the rules' label, never
    the SLO file's own `service_name`); without it, an SLO's series are selected by `slo` alone."""
    if not getattr(source, "speaks_promql", False):
        return None
    base_name, base_seconds = base or cv.base_window(interval)
    counted = [s for s in slos if s.counts_increases]
    services = {s.name: service for s in slos if service}
    probes = [f"count_over_time({cv.record_valid_increase(base_name)}{own_matchers(s.name, services.get(s.name))}"
              f"[{span - 1}s])" for s in counted]
    samples = dict(zip((s.name for s in counted), source.query_many(probes, at))) if probes else {}
    usable, why, short = _decide(counted, samples, source, at, span, interval, base_name, what)
    young = {n: have for n, have in short.items() if n in usable}
    return Recorded(base_name, base_seconds // interval, usable, why, services, young, interval)


def own_matchers(slo_name: str, service: str | None) -> str:
    """The braces selecting one SLO's recorded series: `slo` and, when known, `service` (as the
    rules write them, `rules.own_matchers`), so two services' SLOs of one name stay apart."""
    scope = f',{cv.LABEL_SERVICE}="{_quoted(service)}"' if service else ""
    return f'{{{cv.LABEL_SLO}="{_quoted(slo_name)}"{scope}}}'


KEY_LABELS = (cv.LABEL_SERVICE, cv.LABEL_SLO)  # what tells one SLO's recorded series from another's


def slo_key(slo: SloDefinition, service: str) -> tuple[str, str]:
    """The (service, slo) labels of an SLO's recorded series (the rules' `service` label: its
    config's service)."""
    return (service, slo.name)


class RecordedReads:
    """The recorded series at one instant, read grouped: one query per series and window answers
    every SLO, keyed by (service, slo). Remembered per expression, so the services of one fleet
    report share them. `services` scopes the queries to those services' series (one service's
    report); None reads every service's (the fleet's)."""

    def __init__(self, source: MetricSource, at: float, services: Sequence[str] | None = None):
        self.source, self.at = source, at
        names = sorted(set(services or ()))
        if not names:
            self.scope = ""
        elif len(names) == 1:
            self.scope = f'{cv.LABEL_SERVICE}="{_quoted(names[0])}"'
        else:
            self.scope = f'{cv.LABEL_SERVICE}=~"{_quoted("|".join(re.escape(n) for n in names))}"'
        self._answers: dict[str, dict[tuple[str, ...], float | None]] = {}
        self.sent = 0  # expressions sent to the source (each once)

    def selector(self, record: str) -> str:
        return f"{record}{{{self.scope}}}" if self.scope else record

    def fetch(self, exprs: Sequence[str]) -> None:
        """Ask, in one batch, every expression not asked before."""
        missing = list(dict.fromkeys(e for e in exprs if e not in self._answers))
        if not missing:
            return
        if not answers_grouped(self.source):
            raise TypeError(f"{self.source.description} cannot answer grouped PromQL")
        for expr, values in zip(missing, self.source.query_grouped(missing, self.at, KEY_LABELS, finite=False)):
            self._answers[expr] = values
        self.sent += len(missing)

    def value(self, expr: str, key: tuple[str, str]) -> float | None:
        """The series of `key` in the answer to `expr`; None when it has none (call fetch first)."""
        return self._answers[expr].get(key)

    def present(self, expr: str, key: tuple[str, str]) -> bool:
        return key in self._answers[expr]


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class GroupedRecorded(Recorded):
    """`Recorded`, read through `RecordedReads`: the sums of every SLO's recorded increases over a
    window in one query per series, each SLO's read by its (service, slo) key."""

    reads: RecordedReads = field(kw_only=True)
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # SLO name -> (service, slo)
    spanning: set[str] = field(default_factory=set)  # recorded series reach back over the whole window
    hourly: set[str] = field(default_factory=set)  # spanning, and the hourly increases at every hour of the span

    def sums(self, seconds: int) -> dict[str, str]:
        return {role: f"sum_over_time({self.reads.selector(record)}[{seconds - 1}s])" for role, record in
                (("good", cv.record_good_increase(self.base)), ("valid", cv.record_valid_increase(self.base)))}

    def hourly_sums(self, seconds: int) -> dict[str, tuple[str, ...]]:
        """Role -> (the hourly increases at each hour of the window, the base increases after the
        newest hour, those after the window's oldest hour): the window's events are the first plus
        (the second minus the third) / per_base (docs/decisions/0420-fleet-read-on-coarse-records.md)."""
        hour_name, hour = cv.COARSE_WINDOW
        edge_ms = round(self.reads.at * 1000) % (hour * 1000) - 1  # (newest hour, at]: never its own sample
        out = {}
        for role, coarse, fine in (("good", cv.record_good_increase(hour_name), cv.record_good_increase(self.base)),
                                   ("valid", cv.record_valid_increase(hour_name), cv.record_valid_increase(self.base))):
            exprs: tuple[str, ...] = (f"sum_over_time({self.reads.selector(coarse)}[{seconds - 1}s:{hour_name}])",)
            if edge_ms > 0:
                base = self.reads.selector(fine)
                exprs += (f"sum_over_time({base}[{edge_ms}ms])", f"sum_over_time({base}[{edge_ms}ms] offset {seconds}s)")
            out[role] = exprs
        return out

    def window_exprs(self, seconds: int) -> list[str]:
        """What `counts` reads for a window: the hourly sums for the SLOs that have them, the fine
        sums only when some usable SLO lacks them."""
        exprs: list[str] = []
        if self.hourly and seconds % cv.COARSE_WINDOW[1] == 0:
            exprs += [e for q in self.hourly_sums(seconds).values() for e in q]
            if self.usable <= self.hourly:
                return exprs
        return exprs + list(self.sums(seconds).values())

    def counts(self, slo_name: str, seconds: int, answers: dict[str, float | None] | None = None) -> budget.WindowCounts:
        key = self.keys[slo_name]
        if slo_name in self.hourly and seconds % cv.COARSE_WINDOW[1] == 0:
            found = []
            for exprs in self.hourly_sums(seconds).values():
                coarse = _number(self.reads.value(exprs[0], key))
                edges = [_number(self.reads.value(e, key)) or 0.0 for e in exprs[1:]]  # no sample: no events
                found.append(None if coarse is None else
                             coarse + ((edges[0] - edges[1]) / self.per_base if edges else 0.0))
            return budget.WindowCounts(found[0], found[1])
        q = self.sums(seconds)
        good, valid = (_number(self.reads.value(q[role], key)) for role in ("good", "valid"))
        return budget.WindowCounts(None if good is None else good / self.per_base,
                                   None if valid is None else valid / self.per_base)

    def ratio_query(self, window: str) -> str:
        """The rules' recorded error ratio over a short window (what the alerts compare)."""
        return self.reads.selector(cv.record_error_ratio(window))

    def ratio_counts(self, slo_name: str, window: str) -> budget.WindowCounts | None:
        """A short window from the recorded error ratio r, as counts good = 1 - r of valid = 1 (the
        share, like a ratio SLI's); NaN (no valid events in the window) is no events; None when the
        SLO has no such series (its window is then asked raw)."""
        key, q = self.keys[slo_name], self.ratio_query(window)
        if not self.reads.present(q, key):
            return None
        r = self.reads.value(q, key)
        if r is None:  # present above: not reached
            return None
        if math.isnan(r):
            return budget.WindowCounts(0.0, 0.0)
        if not math.isfinite(r):
            return None
        return budget.WindowCounts(1.0 - r, 1.0)


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def grouped_plan(slos: Sequence[SloDefinition], reads: RecordedReads, service: str, span: int, interval: int,
                 what: str = "1d, 3d and the period", base: tuple[str, int] | None = None,
                 hourly: bool = True) -> GroupedRecorded | None:
    """`recorded_plan` with the recorded series counted by one grouped query for every SLO (the
    raw gap check, only for SLOs whose recorded series are short, stays per SLO). `hourly`: where
    the rules' hourly increases are at every hour of the span, the coverage and the long windows
    are read from them (span / 1h samples per SLO instead of span / interval); False reads the
    base increases alone (the bench's old read path)."""
    source, at = reads.source, reads.at
    if not getattr(source, "speaks_promql", False) or not answers_grouped(source):
        return None
    base_name, base_seconds = base or cv.base_window(interval)
    counted = [s for s in slos if s.counts_increases]
    keys = {s.name: slo_key(s, service) for s in slos}
    hour_name, hour = cv.COARSE_WINDOW
    full: set[str] = set()
    if hourly and counted and span % hour == 0 and hour % interval == 0 and base_seconds < hour:
        # The period's coverage from the hourly increases at each hour (span / 1h samples per SLO):
        # all there, the base ones span it too (recorded by the same rules at the same instants).
        hours = f"count_over_time({reads.selector(cv.record_valid_increase(hour_name))}[{span - 1}s:{hour_name}])"
        reads.fetch([hours])
        full = {s.name for s in counted if (_number(reads.value(hours, keys[s.name])) or 0) >= span // hour}
    if counted and all(s.name in full for s in counted):
        samples: dict[str, float | None] = {s.name: float(span // interval) for s in counted}
    else:
        probe = f"count_over_time({reads.selector(cv.record_valid_increase(base_name))}[{span - 1}s])"
        reads.fetch([probe] if counted else [])
        samples = {s.name: _number(reads.value(probe, keys[s.name])) for s in counted}
    plan = _decide(counted, samples, source, at, span, interval, base_name, what)
    usable, why, short = plan
    spanning = {name for name in usable if name not in short}
    young = {n: have for n, have in short.items() if n in usable}
    hourly_ones = spanning & full
    for name in hourly_ones:
        why[name] += f" (read as the hourly {cv.record_good_increase(hour_name)} and {cv.record_valid_increase(hour_name)})"
    return GroupedRecorded(base_name, base_seconds // interval, usable, why, {n: k[0] for n, k in keys.items()},
                           young, interval, reads=reads, keys=keys, spanning=spanning, hourly=hourly_ones)


def _decide(counted: Sequence[SloDefinition], samples: Mapping[str, float | None], source: MetricSource, at: float,
            span: int, interval: int, base: str, what: str) -> tuple[set[str], dict[str, str], dict[str, int]]:
    """Which SLOs' windows up to `span` the recorded increases can answer, given each SLO's count
    of recorded samples over it (shared by `recorded_plan` and `grouped_plan`)."""
    slack = max(5 * interval, coverage_step(span))
    usable: set[str] = set()
    why: dict[str, str] = {}
    short: dict[str, int] = {}
    for s in counted:
        n = samples.get(s.name)
        if n is None:
            why[s.name] = f"no recorded {cv.record_valid_increase(base)} series: load `opsctl slo rules` into Prometheus"
        elif int(n) * interval + slack >= span:
            usable.add(s.name)
        else:
            short[s.name] = int(n) * interval
    # Recorded series shorter than the window: usable only if the raw data starts after them.
    gaps = [(s, sel, short[s.name]) for s in counted if s.name in short and (sel := coverage_selector(s))]
    earlier = source.query_many(
        [f"count(count_over_time({sel}[{span - have - slack}s] offset {have + slack}s))" for _, sel, have in gaps], at
    ) if gaps else []
    for (s, _sel, _have), n in zip(gaps, earlier):
        if n is None:
            usable.add(s.name)
    lacking = [s for s in counted if s.name in short and s.name not in usable]
    selectors = list(dict.fromkeys(sel for s in lacking if (sel := coverage_selector(s))))
    starts = dict(zip(selectors, data_starts(source, selectors, at, span)))
    for s in lacking:
        selector = coverage_selector(s)
        start = starts.get(selector) if selector is not None else None
        days = (span if start is None else min(span, at - start)) / 86400
        why[s.name] = (f"the recorded {cv.record_valid_increase(base)} series span {short[s.name] / 86400:.1f} of the"
                       f" {days:.1f} days of data")
    for name in usable:
        why[name] = (f"{what} from the recorded {cv.record_good_increase(base)} and"
                     f" {cv.record_valid_increase(base)} series")
    return usable, why, short
