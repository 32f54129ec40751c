"""SLOs -> Prometheus recording and alerting rules: a pure plan and generator, and a separate writer.

`plan_rules` turns SLOs and settings into typed `SloRulePlan`s: the selectors, windows, factors,
thresholds, `for:` and minimum-traffic guard of every alert. `rule_groups` renders a plan as
Prometheus rule groups (plain data); `opsctl.slo.alerts` evaluates the same plan in-process.
Both sides compute with the same float operations on the same literals, so on data sampled every
10 s on a grid aligned with the evaluation instants they fire the same alerts at the same instants:

    error ratio  = 1 - ((sum(increase(GOOD[w])) or vector(0)) / sum(increase(VALID[w])))
    burn rate    = error ratio / (1 - GOAL)                     (the alert's value)
    guard        = sum(increase(VALID[short])) / short_seconds  >= min_request_rate
    alert        = burn(long) > FACTOR and burn(short) > FACTOR and guard, held for `for:`
                   (the fast tier: then kept firing for `keep_firing_for`, see fast_keep_firing)

`or vector(0)` makes an absent success series count as zero successes: a total outage in which no
request succeeded still pages. Prometheus' increase() extrapolates when the first or last sample
in the range sits away from the range's edges; with a sample at every 10 s grid point (the first
one at 0) and evaluation instants on that grid it does not, and equals the embedded store's
difference of running totals. Evaluating after the newest sample is where the two differ
(Prometheus extrapolates up to one step past the last sample).

One rule group per SLO holds its recording rules first and then the alerts reading them: rules in a
group run in order at one timestamp, so an alert sees the ratios recorded at the same instant.

Every alert has the fixed label `category` and a `cause` annotation (docs/decisions/0005-alert-identity-and-causes.md). An availability SLO over the proxy's request counter records, per cause
and per short window, `slo:sli_cause_error:ratio_rate<w>{cause}` (that cause's bad events over the
valid ones); its alerts' `cause` and summary are Go templates reading `topk(1, ...)` of them, so
the labels never change while the words follow the dominant outcome. The fast-burn tier
(SloFastBurnPage, `tier: fast`) lives in a group of its own evaluated every few seconds, its
windows inline; SloMetricsAbsent (`absent()` of the SLI's selector) closes each SLO's main group.

The plan is rule_plan.py, its PromQL and annotations rule_exprs.py; this module holds the rule
groups, the rules document in either format, its YAML and the writer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from opsctl.clock import format_duration
from opsctl.errors import UsageError
from opsctl.slo import conventions as cv
from opsctl.slo.rule_exprs import (absent_annotations, absent_labels, alert_annotations, alert_expr, alert_labels,
                                   base_increase_exprs, budget_expr, cause_ratio_expr, coarse_increase_exprs, cause_windows,
                                   derived_error_ratio_expr, error_ratio_expr, number, own_record, valid_rate_expr)
from opsctl.slo.rule_plan import BurnAlert, RuleSettings, SloRulePlan

FORMATS = ("rules", "prometheusrule")


# ---------------------------------------------------------------------------------------------
# Rule groups (plain data)


def rule_groups(plans: Sequence[SloRulePlan], settings: RuleSettings) -> list[dict[str, Any]]:
    return [group for plan in plans for group in _groups(plan, settings)]


def _groups(plan: SloRulePlan, settings: RuleSettings) -> list[dict[str, Any]]:
    fast = [_fast_group(plan, settings)] if any(a.fast for a in plan.alerts) else []
    return [_group(plan, settings), *fast, _period_group(plan, settings)]


def _cause_rules(plan: SloRulePlan, fast: bool) -> list[dict[str, Any]]:
    rules = []
    for window in cause_windows(plan, fast):
        for cause, query in plan.cause_queries(window).items():
            rules.append({"record": cv.record_cause_ratio(window), "expr": cause_ratio_expr(plan, query, window),
                          "labels": {**plan.record_labels, cv.LABEL_CAUSE: cause}})
    return rules


def _alert_rule(plan: SloRulePlan, alert: BurnAlert, settings: RuleSettings) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": alert.alertname, "expr": alert_expr(plan, alert)}
    if alert.for_seconds:
        rule["for"] = format_duration(alert.for_seconds)
    if alert.keep_firing_seconds:
        rule["keep_firing_for"] = format_duration(alert.keep_firing_seconds)
    rule["labels"] = alert_labels(plan, alert, settings)
    rule["annotations"] = alert_annotations(plan, alert, settings.alerting.runbook_base_url)
    return rule


def _fast_group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    """The fast-burn tier: its per-cause ratios and alert, evaluated every few seconds."""
    alerts = [a for a in plan.alerts if a.fast]
    return {
        "name": cv.fast_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(alerts[0].interval),
        "rules": _cause_rules(plan, True) + [_alert_rule(plan, a, settings) for a in alerts],
    }


def _ratio_rule(plan: SloRulePlan, window: str, seconds: int) -> dict[str, Any]:
    expr = derived_error_ratio_expr(plan, seconds) if window in plan.derived else error_ratio_expr(plan, window)
    return {"record": cv.record_error_ratio(window), "expr": expr, "labels": plan.record_labels}


def _period_group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    """The period's ratio and the budget left: no alert reads them, so every 5 minutes is enough."""
    seconds = dict(plan.windows)[plan.period]
    rules = [_ratio_rule(plan, plan.period, seconds), {
        "record": cv.RECORD_BUDGET_REMAINING,
        "expr": f"1 - ({own_record(cv.record_error_ratio(plan.period), plan)} / {budget_expr(plan)})",
        "labels": plan.record_labels,
    }]
    return {
        "name": cv.period_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(max(plan.interval, cv.BASE_WINDOW_SECONDS)),
        "rules": rules,
    }


def _group(plan: SloRulePlan, settings: RuleSettings) -> dict[str, Any]:
    labels = plan.record_labels
    rules: list[dict[str, Any]] = []
    if plan.base:
        good, valid = base_increase_exprs(plan)
        rules.append({"record": cv.record_good_increase(plan.base[0]), "expr": good, "labels": dict(labels)})
        rules.append({"record": cv.record_valid_increase(plan.base[0]), "expr": valid, "labels": dict(labels)})
        coarse = coarse_increase_exprs(plan)
        if coarse is not None:  # after the base records: read at the same instant
            hour = cv.COARSE_WINDOW[0]
            rules.append({"record": cv.record_good_increase(hour), "expr": coarse[0], "labels": dict(labels)})
            rules.append({"record": cv.record_valid_increase(hour), "expr": coarse[1], "labels": dict(labels)})
    fast = {w for a in plan.alerts if a.fast for w in (a.long, a.short)} - {w for a in plan.alerts if not a.fast
                                                                          for w in (a.long, a.short)}
    for window, seconds in plan.windows:
        if window != plan.period and window not in fast:  # the fast tier's windows are inline
            rules.append(_ratio_rule(plan, window, seconds))
    spans = dict(plan.windows)
    rates = {w: spans[w] for w in plan.guard_windows}
    rates.setdefault(cv.TRAFFIC_RATE_WINDOW, cv.WINDOWS[cv.TRAFFIC_RATE_WINDOW])  # the split's, every period
    for window, seconds in rates.items() if plan.slo.counts_increases else ():
        rules.append({
            "record": cv.record_valid_rate(window),
            "expr": valid_rate_expr(plan, window, seconds),
            "labels": dict(labels),
        })
    rules.append({"record": cv.RECORD_OBJECTIVE, "expr": f"vector({number(plan.slo.goal)})", "labels": dict(labels)})
    rules.append({"record": cv.RECORD_ERROR_BUDGET, "expr": f"vector{budget_expr(plan)}", "labels": dict(labels)})
    if plan.sloth:  # Sloth's metadata series, which its dashboards list SLOs from
        rules.append({"record": cv.RECORD_SLOTH_INFO, "expr": "vector(1)",
                      "labels": {**labels, **cv.sloth_info_labels(plan.slo.goal)}})
    rules += _cause_rules(plan, False)
    rules += [_alert_rule(plan, alert, settings) for alert in plan.alerts if not alert.fast]
    if plan.absent:
        rules.append({"alert": cv.ABSENT_ALERT_NAME, "expr": f"absent({plan.absent})",
                      "for": format_duration(plan.absent_for), "labels": absent_labels(plan, settings),
                      "annotations": absent_annotations(plan, settings.alerting.runbook_base_url)})
    return {
        "name": cv.rule_group_name(settings.alerting.rule_group_prefix, plan.name),
        "interval": format_duration(settings.alerting.interval_seconds),
        "rules": rules,
    }


def rules_document(plans: Sequence[SloRulePlan], settings: RuleSettings, fmt: str = "rules") -> dict[str, Any]:
    """A Prometheus rule file, or a prometheus-operator PrometheusRule manifest holding the same groups."""
    groups = rule_groups(plans, settings)
    if not groups or not any(g["rules"] for g in groups):
        raise UsageError("no rules generated")
    if fmt == "rules":
        return {"groups": groups}
    if fmt == "prometheusrule":
        meta = settings.alerting.prometheus_rule
        metadata: dict[str, Any] = {"name": meta.name, "namespace": meta.namespace}
        if meta.labels:
            metadata["labels"] = dict(meta.labels)
        return {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PrometheusRule",
            "metadata": metadata,
            "spec": {"groups": groups},
        }
    raise UsageError(f"unknown rules format {fmt!r} (known: {', '.join(FORMATS)})")


def count_rules(document: dict[str, Any]) -> tuple[int, int, int]:
    """(groups, recording rules, alerting rules) in a rules document of either format."""
    groups = document["groups"] if "groups" in document else document["spec"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    return len(groups), sum("record" in r for r in rules), sum("alert" in r for r in rules)


def render_yaml(document: dict[str, Any], header: str = "") -> str:
    """The rule file's text: PyYAML's safe dump, multi-line strings as `|` blocks. libyaml's emitter
    writes it (about 8x faster) where PyYAML has it and the document holds no string it writes
    otherwise than PyYAML's own emitter (`same_in_libyaml`); else the pure-Python emitter."""
    import yaml

    fast = getattr(yaml, "CSafeDumper", None)
    base = fast if fast is not None and same_in_libyaml(document) else yaml.SafeDumper

    class Dumper(base):  # type: ignore[misc,valid-type]  # PyYAML ships no stubs: its dumpers are Any here
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    body: str = yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True)
    lead = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lead + body


# What libyaml's emitter (0.2.5) writes otherwise than PyYAML's: a character beyond the Basic
# Multilingual Plane (escaped as \U0001F600, where PyYAML writes it as it is), NEL (U+0085), a block
# scalar that keeps its final line breaks (`|+`, after which libyaml adds a `...` document end), a
# mapping key that is empty, long (PyYAML writes it as an explicit `? key`: beyond 124 characters,
# libyaml beyond 128 bytes) or holds a line break; and a lone surrogate (libyaml cannot encode it).
_LIBYAML_DIFFERS = re.compile("[\U00010000-\U0010FFFF\x85\ud800-\udfff]")
_BREAKS = "\n\x85\u2028\u2029"
_KEY_BREAKS = re.compile("[\r\n\x85\u2028\u2029]")
_SIMPLE_KEY_BYTES = 120


def same_in_libyaml(document: Any) -> bool:
    """Whether every string of `document` is one libyaml's emitter writes as PyYAML's own does
    (tests/slo/test_rules_yaml.py compares the two on the shipped SLOs, the catalog examples and
    generated documents)."""
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LIBYAML_DIFFERS.search(item) or (item[-1:] and item[-1] in _BREAKS
                                                  and (len(item) == 1 or item[-2] in _BREAKS)):
                return False
        elif isinstance(item, dict):
            for key in item:
                if isinstance(key, str) and (not 0 < len(key.encode("utf-8", "surrogatepass")) <= _SIMPLE_KEY_BYTES
                                             or _KEY_BREAKS.search(key)):
                    return False
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


def header(plans: Sequence[SloRulePlan], settings: RuleSettings) -> str:
    files = sorted({p.slo.file for p in plans})
    periods = sorted({dict(p.windows)[p.period]: p.period for p in plans}.items())
    return (
        f"Generated by `opsctl slo rules` from {len(files)} SLO file(s) for {settings.service},"
        f" period{'s' if len(periods) > 1 else ''} {', '.join(label for _, label in periods)}. Do not edit: regenerate."
    )


# ---------------------------------------------------------------------------------------------
# Writer


def write_atomic(path: str | Path, text: str) -> None:
    """Write a rule file whole or not at all, readable by the Prometheus that loads it."""
    from opsctl.statefile import write_text_atomic

    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"--out: directory {directory} does not exist")
    write_text_atomic(path, text, mode=0o644)
