"""The rule plan's PromQL and annotations (rule_plan.py holds the plan): the error ratios read
from the recorded base windows, the burn-rate alert expressions, the per-cause ratios and the
cause templates, and each alert's labels and annotations. The in-process evaluation in
`opsctl.slo.alerts` mirrors these."""

from __future__ import annotations

from opsctl.clock import format_duration
from opsctl.metrics.promql import parse_selector
from opsctl.slo import conventions as cv
from opsctl.slo.model import given
from opsctl.slo.rule_plan import BurnAlert, RuleSettings, SloRulePlan


def number(value: float) -> str:
    """A float literal both Prometheus and Python read back as the same float64."""
    return repr(float(value))


def error_ratio_expr(plan: SloRulePlan, window: str) -> str:
    q = plan.queries(window)
    if "sli" in q:
        return f"1 - ({q['sli']})"
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"1 - (({q['good']} or vector(0)) / {valid})"


def derived_error_ratio_expr(plan: SloRulePlan, seconds: int) -> str:
    """A long window's error ratio from the recorded base-window increases, weighted by traffic:
    sum of good over sum of valid (not an average of ratios). The range is one second short of the
    window so it holds window / interval samples whether or not its start is inclusive; those
    samples telescope to the sum of the raw window's counts at the last base / interval
    evaluation instants (see docs/decisions/0020-long-windows-from-recorded-increases.md)."""
    base = plan.recorded_base[0]
    good = f"sum_over_time({own_record(cv.record_good_increase(base), plan)}[{seconds - 1}s])"
    valid = f"sum_over_time({own_record(cv.record_valid_increase(base), plan)}[{seconds - 1}s])"
    return f"1 - ({good} / {valid})"


def base_increase_exprs(plan: SloRulePlan) -> tuple[str, str]:
    """(good, valid) events over the base window, aggregated to one series (pod, instance and every
    other label dropped by the sum); an absent good series records zero successes."""
    q = plan.queries(plan.recorded_base[0])
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"{q['good']} or vector(0)", valid


def coarse_increase_exprs(plan: SloRulePlan) -> tuple[str, str] | None:
    """(good, valid) events over the last hour, from the base increases recorded at this group's
    instants: their sum over 1h - 1s (3600 / interval samples) over the times each event is in
    them. Recorded every evaluation, read by the fleet report at a 1h step aligned to the hour, so
    consecutive hours tile the base samples exactly (docs/decisions/0420-fleet-read-on-coarse-records.md).
    None where the interval does not divide an hour or the base window is not shorter than one."""
    base, base_seconds = plan.recorded_base
    seconds = cv.COARSE_WINDOW[1]
    if seconds % plan.interval or base_seconds >= seconds:
        return None
    per_base = base_seconds // plan.interval
    good, valid = (f"sum_over_time({own_record(record, plan)}[{seconds - 1}s]) / {per_base}"
                   for record in (cv.record_good_increase(base), cv.record_valid_increase(base)))
    return good, valid


def valid_rate_expr(plan: SloRulePlan, window: str, seconds: int) -> str | None:
    """Valid events per second, or None when the SLI counts no events (no traffic guard then)."""
    if not plan.slo.counts_increases:
        return None
    q = plan.queries(window)
    # increase()/seconds rather than sum(rate()): summing per-series quotients rounds differently.
    valid = q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"
    return f"{valid} / {seconds}"


def budget_expr(plan: SloRulePlan) -> str:
    return f"(1 - {number(plan.slo.goal)})"


def own_matchers(plan: SloRulePlan) -> str:
    """The braces selecting one SLO's recorded series: its `slo` and `service` labels (as written on
    the series), so two services of one Prometheus with an SLO of the same name stay apart."""
    return f'{{{cv.LABEL_SLO}="{plan.name}",{cv.LABEL_SERVICE}="{plan.label_dict[cv.LABEL_SERVICE]}"}}'


def own_record(record: str, plan: SloRulePlan) -> str:
    return f"{record}{own_matchers(plan)}"


def _valid_of(q: dict[str, str]) -> str:
    return q["valid"] if "valid" in q else f"({q['good']} + ({q['bad']} or vector(0)))"


def alert_expr(plan: SloRulePlan, alert: BurnAlert) -> str:
    budget, factor = budget_expr(plan), number(alert.factor)
    if alert.fast:  # its own group, more often: raw windows inline (the records are the slower group's)
        expr = (
            f"(\n  ({error_ratio_expr(plan, alert.long)}) / {budget} > {factor}\n)\n"
            f"and\n(\n  ({error_ratio_expr(plan, alert.short)}) / {budget} > {factor}\n)"
        )
        if plan.slo.counts_increases:
            expr += (f"\nand\n(\n  {valid_rate_expr(plan, alert.short, alert.short_seconds)}"
                     f" >= {number(alert.min_request_rate)}\n)")
        return expr
    expr = (
        f"(\n  {own_record(cv.record_error_ratio(alert.long), plan)} / {budget} > {factor}\n)\n"
        f"and\n(\n  {own_record(cv.record_error_ratio(alert.short), plan)} / {budget} > {factor}\n)"
    )
    if plan.slo.counts_increases:
        rate = own_record(cv.record_valid_rate(alert.short), plan)
        guard = f"{rate} >= {number(alert.min_request_rate)}"
        if alert.min_bad_events > 0:  # few events, a real burn: the short window's bad events
            bad = f"{own_record(cv.record_error_ratio(alert.short), plan)} * {rate} * {alert.short_seconds}"
            guard = f"{guard}\n  or\n  {bad} >= {number(alert.min_bad_events)}"
        expr += f"\nand\n(\n  {guard}\n)"
    return expr


def cause_ratio_expr(plan: SloRulePlan, cause_query: str, window: str) -> str:
    """One cause's bad events over all valid events over `window`."""
    return f"{cause_query} / {_valid_of(plan.queries(window))}"


def cause_windows(plan: SloRulePlan, fast: bool) -> tuple[str, ...]:
    """The windows whose per-cause ratios are recorded: the alerts' short windows (per group)."""
    if not plan.causes:
        return ()
    return tuple(dict.fromkeys(a.short for a in plan.alerts if a.fast == fast))


GO_BURN_RATE = '{{ printf "%.2f" $value }}'


def _cause_lookup(plan: SloRulePlan, window: str) -> str:
    """PromQL naming the dominant cause over `window`: the largest recorded per-cause ratio above 0."""
    return f"topk(1, {own_record(cv.record_cause_ratio(window), plan)} > 0)"


def cause_template(plan: SloRulePlan, window: str) -> str:
    """The `cause` annotation as a Go template Prometheus renders at each evaluation."""
    return (f"{{{{ with query `{_cause_lookup(plan, window)}` }}}}"
            f"{{{{ . | first | label \"{cv.LABEL_CAUSE}\" }}}}{{{{ else }}}}{cv.DEFAULT_AVAILABILITY_CAUSE}{{{{ end }}}}")


def _cause_text_template(plan: SloRulePlan, window: str) -> str:
    """The cause's words in the summary, from the same lookup (a Go template)."""
    lookup = _cause_lookup(plan, window)
    branches = [c for c in cv.AVAILABILITY_CAUSES if c != cv.DEFAULT_AVAILABILITY_CAUSE]
    text = f'{{{{ $cause := "{cv.DEFAULT_AVAILABILITY_CAUSE}" }}}}'
    text += f'{{{{ with query `{lookup}` }}}}{{{{ $cause = . | first | label "{cv.LABEL_CAUSE}" }}}}{{{{ end }}}}'
    for i, cause in enumerate(branches):
        text += f'{{{{ {"if" if i == 0 else "else if"} eq $cause "{cause}" }}}}{cv.cause_text(cause)}'
    return text + f"{{{{ else }}}}{cv.cause_text(cv.DEFAULT_AVAILABILITY_CAUSE)}{{{{ end }}}}"


def subject(plan: SloRulePlan) -> str:
    """Who an alert is about, first in its summary: the backend, or the service for a service-wide SLO."""
    backend = plan.slo.backend
    return backend if backend and backend != cv.ALL_BACKENDS else plan.label_dict[cv.LABEL_SERVICE]


def alert_annotations(plan: SloRulePlan, alert: BurnAlert, base_url: str, burn: float | None = None,
                      cause: str | None = None) -> dict[str, str]:
    """Alert annotations: Go templates for the rule (burn None), or their rendering for a burn rate
    and the cause the in-process evaluation found (None: the SLO's fixed cause).

    Prometheus renders `{{ printf "%.2f" $value }}` with the alert's value, the long-window burn
    rate; Go and Python both round the exact binary value, so the texts are identical. The cause is
    the largest per-cause ratio recorded over the alert's short window (`topk(1, ...)`).
    """
    slo = plan.slo
    description = (slo.description or slo.name).rstrip(". ")
    fixed = plan.fixed_cause
    if burn is None:
        burn_text, description = GO_BURN_RATE, description.replace("{{", '{{ "{{" }}')
        cause_value = fixed or cause_template(plan, alert.short)
        words = cv.cause_text(fixed) if fixed else _cause_text_template(plan, alert.short)
    else:
        burn_text = f"{burn:.2f}"
        cause_value = fixed or cause or cv.DEFAULT_AVAILABILITY_CAUSE
        words = cv.cause_text(cause_value)
    objective = f"{slo.goal * 100:.10g}%"
    level = f"fast {alert.severity}" if alert.fast else alert.severity
    return {
        "summary": (
            f"{subject(plan)}: {words} at {burn_text}x over {alert.long}"
            f" ({slo.name} {level} above {cv.format_factor(alert.factor)}x over {alert.long} and {alert.short})"
        ),
        "description": (
            f"{description}. Objective {objective} over {plan.period}. This alert fires when the error budget"
            f" burns faster than {cv.format_factor(alert.factor)}x the sustainable rate over both the last {alert.long} and the"
            f" last {alert.short}, with at least {alert.min_request_rate:g} requests/s over {alert.short}"
            + (f" or, at less traffic, at least {alert.min_bad_events:g} bad events over it."
               if alert.min_bad_events > 0 and plan.slo.counts_increases else ".")
        ),
        "burn_rate": burn_text,
        "cause": cause_value,
        "runbook_url": cv.runbook_url(base_url, slo.name, alert.severity),
    }


def alert_labels(plan: SloRulePlan, alert: BurnAlert, settings: RuleSettings) -> dict[str, str]:
    return {
        **settings.alerting.labels,
        **plan.label_dict,
        cv.LABEL_SEVERITY: alert.severity,
        cv.LABEL_CATEGORY: plan.category,
        **({cv.LABEL_TIER: alert.tier} if alert.tier else {}),
        cv.LABEL_LONG_WINDOW: alert.long,
        cv.LABEL_SHORT_WINDOW: alert.short,
    }


def absent_labels(plan: SloRulePlan, settings: RuleSettings) -> dict[str, str]:
    """The rule's labels over what `absent()` itself returns (the selector's equality matchers)."""
    own = {m.label: m.value for m in parse_selector(given(plan.absent, f"{plan.name}: absent")).matchers
           if m.op == "=" and m.label != "__name__"}
    return {**own, **settings.alerting.labels, **plan.label_dict, cv.LABEL_SEVERITY: plan.absent_severity,
            cv.LABEL_CATEGORY: "absent"}


def absent_annotations(plan: SloRulePlan, base_url: str) -> dict[str, str]:
    held = format_duration(plan.absent_for)
    return {
        "summary": f"{subject(plan)}: {cv.cause_text('absent')}: no series of {plan.name}'s SLI for {held}",
        "description": (
            f"No sample of {plan.absent} for {held}: the LLM proxy stopped exporting, or a relabelling dropped"
            f" the series. {plan.name} cannot be measured and its burn-rate alerts cannot fire."
        ),
        "cause": "absent",
        "runbook_url": cv.runbook_url(base_url, plan.name, plan.absent_severity),
    }
