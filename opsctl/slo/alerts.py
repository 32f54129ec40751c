"""Which burn-rate alerts fire at an instant, evaluated in-process over any MetricSource.

The rules come from `opsctl.slo.rules.plan_rules`, so the windows, factors, minimum-traffic guard
and `for:` are the generated rules' own. Each condition is computed with the same float operations
on the same literals as the rule's PromQL (see opsctl.slo.rules). `for:` follows Prometheus: an
alert fires at instant t when its condition held at every rule evaluation from t - for to t, the
evaluations being `alerting.evaluation_interval` apart (ceil(for / interval) + 1 instants), and an
alert with `keep_firing_for` (the fast tier) stays firing after its condition ends as Prometheus
keeps it (`AlertEvaluator._kept_firing`), showing the value of its condition's last evaluation.

Only alerts whose condition holds at `at`, and those with `keep_firing_for` whose condition held
within the keep, are checked further back: on Prometheus one range query of the rules' own
expressions over the keep's evaluations tells which (`_held_within_keep`), so a quiet evaluation
costs one batch of queries plus that request, not one batch per evaluation the keep spans (other
sources walk back; the remembering `AlertEvaluator` asks each instant once). Drills call
`firing_alerts` at simulated instants.

On a PromQL source holding the rules' recorded base-window increases over the whole derived
windows (`opsctl.slo.recorded`; 1d and 3d at 28 days, scaled with each SLO's period), those
windows are read from them exactly as the rules read them
(`1 - sum_over_time(good) / sum_over_time(valid)`); elsewhere from raw queries, by the identity the
rules rest on (see `_counts_at`). Which one answered is said per SLO.

What an evaluation returns is alert_results.py; the mirror of the rules' arithmetic and the counts
it reads, alert_counts.py.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from opsctl.metrics.base import MetricSource
from opsctl.slo.alert_counts import _ByBase, _check, _Check, _counts_at, _GroupSource, _Walk, _windows
from opsctl.slo.alert_results import AbsentAlert, AlertEvaluation, FiringAlert
from opsctl.slo import conventions as cv
from opsctl.slo.model import SloDefinition, given
from opsctl.slo.recorded import Recorded, answers_grouped, recorded_plan
from opsctl.slo.rule_exprs import alert_annotations, alert_expr, alert_labels
from opsctl.slo.rule_plan import BurnAlert, RuleSettings, SloRulePlan, plan_rules


class AlertEvaluator:
    """Evaluates the planned alerts at instants, remembering every condition it computed.

    A drill's timeline or a minute-by-minute replay then queries each evaluation instant once,
    instead of once per later instant whose `for:` reaches back to it. Reuse one evaluator only
    while the data up to the instants asked about stays the same; `evaluate_plans` uses a fresh one.
    """

    def __init__(self, plans: Sequence[SloRulePlan], source: MetricSource, settings: RuleSettings):
        # An SLO with a grouping (Pyrra's) is one SLI per group: each group is evaluated apart, on
        # its own series of the same queries (_GroupSource), as the rules' per-group series fire.
        self.grouped = [p for p in plans if p.slo.grouping]
        self.plans = [p for p in plans if not p.slo.grouping]
        self._groups: dict[tuple[str, tuple[str, ...]], AlertEvaluator] = {}
        self._shared: dict[str, dict[tuple[float, tuple[str, ...]], list[dict[tuple[str, ...], float | None]]]] = {}
        self.source = source
        self.settings = settings
        self.interval = settings.alerting.interval_seconds
        self._checks: dict[tuple[str, int, float], _Check] = {}
        self._unknown: dict[tuple[str, float], str | None] = {}
        self._recorded: dict[float, _ByBase | None] = {}

    def _recorded_at(self, when: float) -> "_ByBase | None":
        """Whether the recorded increases span the alerts' derived windows at `when` (PromQL only):
        asked once per base window (each SLO's follows its period)."""
        if when not in self._recorded:
            derived = [p for p in self.plans if set(p.derived) & _windows(p.alerts)]
            parts: dict[str, Recorded] = {}
            if derived and getattr(self.source, "speaks_promql", False):
                for base in dict.fromkeys(p.recorded_base for p in derived):
                    group = [p for p in derived if p.base == base]
                    spans = [dict(p.windows)[w] for p in group for w in set(p.derived) & _windows(p.alerts)]
                    what = " and ".join(dict.fromkeys(w for p in group for a in p.alerts if not a.fast
                                                      for w in (a.long,) if w in p.derived))
                    found = recorded_plan([p.slo for p in group], self.source, when, max(spans),
                                          self.interval, what, base=base, service=self.settings.service)
                    if found is not None:  # None only off PromQL, checked above
                        parts[base[0]] = found
            self._recorded[when] = _ByBase(parts, {p.name: p.recorded_base[0] for p in derived}) if parts else None
        return self._recorded[when]

    def _ensure(self, when: float, wanted: Sequence[tuple[SloRulePlan, int]], *, full: bool = False,
                recorded: _ByBase | None = None) -> None:
        """Compute and remember the conditions of `wanted` (plan, alert index) at `when`; with `full`,
        also whether each plan has data over every window. `recorded`: which SLOs read their derived
        windows from the recorded increases (decided once per evaluation, at its instant)."""
        needs: dict[str, tuple[SloRulePlan, set[str]]] = {}
        for plan, i in wanted:
            if full and (plan.name, when) not in self._unknown:
                needs.setdefault(plan.name, (plan, set()))[1].update(_windows(plan.alerts))
            elif (plan.name, i, when) not in self._checks:
                needs.setdefault(plan.name, (plan, set()))[1].update((plan.alerts[i].long, plan.alerts[i].short))
        if not needs:
            return
        counts = _counts_at(self.source, when, needs, recorded)
        for name, (plan, windows) in needs.items():
            for i, alert in enumerate(plan.alerts):
                if {alert.long, alert.short} <= windows:
                    self._checks[(name, i, when)] = _check(plan, alert, counts[name])
            if windows >= _windows(plan.alerts):
                missing = sorted((w for w in windows if counts[name][w][1] is None), key=lambda w: dict(plan.windows)[w])
                self._unknown[(name, when)] = (
                    f"{'filter_valid' if plan.slo.counts_events else 'the SLI expression'} matched no series"
                    f" over {', '.join(missing)}" if missing else None
                )

    def evaluate(self, at: float) -> AlertEvaluation:
        own = self._evaluate(at)
        for part in self._evaluate_groups(at):
            own.firing.extend(part.firing)
            own.unknown.update(part.unknown)
            own.long_windows.update(part.long_windows)
            own.derived_windows.update(part.derived_windows)
            own.absent.extend(part.absent)
        return own

    def _evaluate_groups(self, at: float) -> list[AlertEvaluation]:
        """Each grouped SLO's groups present at `at` (in any of its queries), evaluated apart."""
        if not self.grouped:
            return []
        from opsctl.errors import UsageError
        from opsctl.slo.report import group_name

        source = self.source if answers_grouped(self.source) else None
        out = []
        for plan in self.grouped:
            if source is None:
                raise UsageError(f"{plan.slo.file}: SLO {plan.name} is one SLI per {', '.join(plan.slo.grouping)}:"
                                 f" {self.source.description} cannot answer grouped PromQL",
                                 hint="use a Prometheus source (--prometheus-url)")
            queries = list(dict.fromkeys(q for _, sec in plan.windows for q in plan.queries(f"{sec}s").values()))
            keys = sorted({k for answer in source.query_grouped(queries, at, plan.slo.grouping) for k in answer})
            if not keys:
                out.append(AlertEvaluation(at, [], {plan.name: "no group of its grouping has a series"}))
            for key in keys:
                if (plan.name, key) not in self._groups:
                    group = dict(zip(plan.slo.grouping, key))
                    one = replace(plan, slo=replace(plan.slo, name=group_name(plan.slo, key), grouping=()),
                                  labels=tuple({**group, **plan.label_dict}.items()))
                    shared = self._shared.setdefault(plan.name, {})
                    self._groups[(plan.name, key)] = AlertEvaluator(
                        [one], _GroupSource(source, plan.slo.grouping, key, shared), self.settings)
                out.append(self._groups[(plan.name, key)].evaluate(at))
        return out

    def _evaluate(self, at: float) -> AlertEvaluation:
        everything = [(p, i) for p in self.plans for i in range(len(p.alerts))]
        recorded = self._recorded_at(at)
        self._ensure(at, everything, full=True, recorded=recorded)
        unknown = {p.name: why for p in self.plans if (why := self._unknown[(p.name, at)])}
        live = [(p, i) for p, i in everything if self._checks[(p.name, i, at)].holds]
        # `for:` - step back one evaluation interval (the alert group's own) at a time while any
        # candidate still needs it.
        steps = 1
        while True:
            needing = [(p, i) for p, i in live
                       if math.ceil(p.alerts[i].for_seconds / self._interval(p.alerts[i])) >= steps]
            if not needing:
                break
            failed = set()
            by_when: dict[float, list[tuple[SloRulePlan, int]]] = {}
            for p, i in needing:
                by_when.setdefault(at - steps * self._interval(p.alerts[i]), []).append((p, i))
            for when, group in by_when.items():
                self._ensure(when, group, recorded=recorded)
                failed |= {(p.name, i) for p, i in group if not self._checks[(p.name, i, when)].holds}
            live = [(p, i) for p, i in live if (p.name, i) not in failed]
            steps += 1
        # keep_firing_for: an alert not firing on its own at `at` may still be kept firing.
        held = {(p.name, i) for p, i in live}
        shown = [(p, i, float(at)) for p, i in live]
        kept = self._kept_firing(at, [(p, i) for p, i in everything
                                      if (p.name, i) not in held and p.alerts[i].keep_firing_seconds], recorded)
        shown += [(p, i, kept[(p.name, i)]) for p, i in everything if (p.name, i) in kept]
        causes = self._causes(shown)
        firing = [_firing(p, p.alerts[i], self._checks[(p.name, i, when)], at, self.settings, causes.get((p.name, i)))
                  for p, i, when in shown]
        long_windows = {} if recorded is None else {
            p.name: ("recorded" if p.name in recorded.usable else "raw", recorded.why.get(p.name, ""))
            for p in self.plans if p.name in recorded.why}
        derived = {p.name: tuple(w for w in p.derived if w in _windows([a for a in p.alerts if not a.fast]))
                   for p in self.plans if p.name in long_windows}
        return AlertEvaluation(at, firing, unknown, long_windows, self._absent(at), derived)

    def _interval(self, alert: BurnAlert) -> int:
        return alert.interval or self.interval

    def _kept_firing(self, at: float, candidates: Sequence[tuple[SloRulePlan, int]],
                     recorded: "_ByBase | None") -> dict[tuple[str, int], float]:
        """The candidates (alerts with `keep_firing_for` that their condition, with `for:`, does not
        fire at `at`) that Prometheus keeps firing at `at`, each with the last evaluation its
        condition held at, whose value and annotations the kept alert shows.

        Prometheus (rules/alerting.go, 2.42): a firing alert whose condition fails at an evaluation
        notes that instant (KeepFiringSince) and stays firing while the time since it is under
        `keep_firing_for`; a condition holding again resets it, with no new `for:`. So, with n =
        ceil(keep / interval), the alert fires at `at` when, walking back one evaluation at a time,
        a run of ceil(for / interval) + 1 holding evaluations (the alert fired there, whatever came
        before) comes before any run of n + 1 failing ones (which resolves it). All candidates walk
        together, one batch of queries per instant. The walk is bounded: a condition flickering for
        longer than the alert's long window is read as resolved (Prometheus would keep it firing)."""
        out: dict[tuple[str, int], float] = {}
        candidates = self._held_within_keep(at, candidates)
        walk = {(p.name, i): _Walk.of(p, i, self._interval(p.alerts[i])) for p, i in candidates}
        j = 0
        while walk:
            by_when: dict[float, list[tuple[SloRulePlan, int]]] = {}
            for key, w in list(walk.items()):
                if j > w.bound:
                    del walk[key]
                else:
                    by_when.setdefault(at - j * w.step, []).append((w.plan, w.index))
            for when, group in by_when.items():
                self._ensure(when, group, recorded=recorded)
                for p, i in group:
                    w = walk[(p.name, i)]
                    if self._checks[(p.name, i, when)].holds:
                        w.failing, w.holding = 0, w.holding + 1
                        w.last = when if w.last is None else w.last
                        if w.holding >= w.hold:  # it fired here: kept firing since
                            out[(p.name, i)] = w.last
                            del walk[(p.name, i)]
                    else:
                        w.failing, w.holding = w.failing + 1, 0
                        if w.failing > w.keep:  # resolved here
                            del walk[(p.name, i)]
            j += 1
        return out

    def _held_within_keep(self, at: float, candidates: Sequence[tuple[SloRulePlan, int]]
                          ) -> list[tuple[SloRulePlan, int]]:
        """The candidates whose condition may have held at an evaluation within their keep (at, at -
        interval, ... at - keep x interval): the others are resolved at `at` and need no walk back.

        On Prometheus, one range query over those evaluations (at, at - interval, ... exactly, which
        a subquery's grid, aligned to multiples of its step, is not) of each candidate's rule
        expression, the same PromQL the rule evaluates; per alert group interval, one request.
        Elsewhere, and where every instant the walk would ask is already known (a drill's evaluator
        stepping through time), every candidate walks."""
        ask = getattr(self.source, "points_held", None)
        if not candidates or ask is None:
            return list(candidates)
        spans = {(p.name, i): (self._interval(p.alerts[i]),
                               math.ceil(p.alerts[i].keep_firing_seconds / self._interval(p.alerts[i])))
                 for p, i in candidates}
        if all((p.name, i, at - j * spans[(p.name, i)][0]) in self._checks for p, i in candidates
               for j in range(1, spans[(p.name, i)][1] + 1)):
            return list(candidates)
        held: set[tuple[str, int]] = set()
        for step, keep in dict.fromkeys(spans.values()):
            group = [(p, i) for p, i in candidates if spans[(p.name, i)] == (step, keep)]
            counts = ask([alert_expr(p, p.alerts[i]) for p, i in group], at - keep * step, at, step)
            held |= {(p.name, i) for (p, i), n in zip(group, counts) if n}
        return [(p, i) for p, i in candidates if (p.name, i) in held]

    def _causes(self, shown: Sequence[tuple[SloRulePlan, int, float]]) -> dict[tuple[str, int], str | None]:
        """The dominant cause of each firing alert over its short window, as the rules' `topk(1, ...)`
        of the recorded per-cause ratios: each cause's bad events over the window's valid events, at
        the evaluation the alert's annotations were rendered at (a kept alert: its condition's last)."""
        wanted = [(p, i, when) for p, i, when in shown if p.causes]
        queries = {(p.name, i): p.cause_queries(f"{p.alerts[i].short_seconds}s") for p, i, _ in wanted}
        answers: dict[tuple[float, str], float | None] = {}
        for when in dict.fromkeys(when for _, _, when in wanted):
            asked = list(dict.fromkeys(q for p, i, w in wanted if w == when for q in queries[(p.name, i)].values()))
            answers.update({(when, q): v for q, v in zip(asked, self.source.query_many(asked, when))})
        out: dict[tuple[str, int], str | None] = {}
        for p, i, when in wanted:
            valid = self._checks[(p.name, i, when)].valid_short
            ratios = {c: (None if (n := answers[(when, q)]) is None or not valid else n / valid)
                      for c, q in queries[(p.name, i)].items()}
            out[(p.name, i)] = cv.dominant_cause(ratios)
        return out

    def _absent(self, at: float) -> list[AbsentAlert]:
        """SloMetricsAbsent: no sample of the SLI's selector within the lookback (5m) at every
        evaluation from at - for to at, as `absent()` with `for:` fires."""
        plans = [p for p in self.plans if p.absent]
        if not plans:
            return []
        # Prometheus' absent() sees a sample up to its 5m lookback back, both ends included: a PromQL
        # source is asked absent() itself; the embedded store (steps in (t - w, t]) one second more.
        promql = bool(getattr(self.source, "speaks_promql", False))
        lookback = cv.BASE_WINDOW_SECONDS + 1
        query = {p.name: f"absent({p.absent})" if promql else f"sum(increase({p.absent}[{lookback}s]))"
                 for p in plans}
        live = list(plans)
        steps = 0
        while live:
            when = at - steps * self.interval
            needing = [p for p in live if steps <= math.ceil(p.absent_for / self.interval)]
            if not needing:
                break
            asked = list(dict.fromkeys(query[p.name] for p in needing))
            answers = dict(zip(asked, self.source.query_many(asked, when)))
            # absent() answers 1 on PromQL; elsewhere the selector itself answers nothing
            live = [p for p in live if p not in needing or (answers[query[p.name]] is None) != promql]
            steps += 1
        from opsctl.slo.rule_exprs import absent_annotations, absent_labels

        return [AbsentAlert(p.name, p.absent_severity, given(p.absent, f"{p.name}: absent"), p.absent_for, at,
                            {"alertname": cv.ABSENT_ALERT_NAME, **absent_labels(p, self.settings)},
                            absent_annotations(p, self.settings.alerting.runbook_base_url)) for p in live]


def evaluate_plans(
    plans: Sequence[SloRulePlan], source: MetricSource, at: float, settings: RuleSettings
) -> AlertEvaluation:
    return AlertEvaluator(plans, source, settings).evaluate(at)


def _firing(plan: SloRulePlan, alert: BurnAlert, check: _Check, at: float, settings: RuleSettings,
            cause: str | None = None) -> FiringAlert:
    labels = {"alertname": alert.alertname, **alert_labels(plan, alert, settings)}
    notes = alert_annotations(plan, alert, settings.alerting.runbook_base_url, check.burn_long, cause)
    return FiringAlert(
        alertname=alert.alertname,
        severity=alert.severity,
        slo=plan.name,
        backend=plan.slo.backend,
        service=plan.label_dict[cv.LABEL_SERVICE],
        long_window=alert.long,
        short_window=alert.short,
        factor=alert.factor,
        burn_rate=given(check.burn_long, f"{plan.name}: a firing alert's long burn rate"),
        short_burn_rate=given(check.burn_short, f"{plan.name}: a firing alert's short burn rate"),
        request_rate=check.request_rate,
        at=at,
        labels=labels,
        annotations=notes,
        cause=notes["cause"],
        category=plan.category,
        tier=alert.tier,
    )


def evaluate_alerts(
    slos: Sequence[SloDefinition], source: MetricSource, at: float, settings: RuleSettings
) -> AlertEvaluation:
    """Firing alerts, and the SLOs that could not be evaluated for lack of data, at instant `at`."""
    return evaluate_plans(plan_rules(slos, settings), source, at, settings)


def firing_alerts(
    slos: Sequence[SloDefinition], source: MetricSource, at: float, settings: RuleSettings
) -> list[FiringAlert]:
    """The alerts Prometheus would have firing at `at` with the generated rules, on the same data."""
    return evaluate_alerts(slos, source, at, settings).firing
