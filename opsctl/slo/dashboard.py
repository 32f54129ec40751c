"""Grafana dashboards (JSON model, provisioning-ready) over the series `opsctl slo rules` records.

Pure: plans in, dicts out. Every query names only series the generated rules produce (the `slo:`
records, which carry the labels `slo`, `backend` and `service`), so a board shows what the alerts
see. Two boards:

- `dashboard`: one service's board (uid `opsctl-slo-<service>`), a `$slo` variable; error budget
  left, burn rate per alert window against its threshold, SLI over time, and the traffic split
  between the service's backends.
- `fleet_dashboard`: the overview of many services (uid `opsctl-slo-fleet`), `$service` and `$slo`
  variables; every SLO sorted by budget left, budget left over time, burn per alert pair against
  the pair's thresholds, and the traffic split per service.

Both take (service, SLO plans) pairs, so the service catalog plugs in as a list of `ServiceSlos`.
Every selector of every query carries a `service` matcher, and every ratio between series
matches on `service` as well as `slo`: two services never mix (the split's denominator is each
service's own `backend="all"` rate). Annotations: firing SLO alerts (`ALERTS`); traffic moves
from the recorded series (a backend's share of a service's valid requests changed by more than
`TRAFFIC_MOVE` over `TRAFFIC_MOVE_WINDOW`), which is what a traffic change or a failover looks like
from the proxy's side; and drills, from the `opsctl_drill_active` series opsctl exports
(`dashboard_events`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from opsctl.slo import conventions as cv
from opsctl.slo.dashboard_events import DRILL_SERIES
from opsctl.slo.rule_plan import RuleSettings, SloRulePlan

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
UID_PREFIX = "opsctl-slo-"
FLEET_UID = "opsctl-slo-fleet"
UID_MAX = 40  # Grafana's bound on a dashboard uid
SPLIT_WINDOW = cv.TRAFFIC_RATE_WINDOW  # the valid-rate record the split reads (recorded at every period)
TRAFFIC_MOVE = 0.05  # a backend's share moving by more than this marks a traffic change
TRAFFIC_MOVE_WINDOW = "5m"


@dataclass(frozen=True)
class ServiceSlos:
    """One service's SLOs as the rules plan them: what a board is built from."""

    settings: RuleSettings
    plans: tuple[SloRulePlan, ...]

    @property
    def service(self) -> str:
        return self.settings.service


def service_uid(service: str) -> str:
    """`opsctl-slo-<service>`, or a shortened name with a hash of the whole one past 40 characters."""
    uid = f"{UID_PREFIX}{service}"
    if len(uid) <= UID_MAX:
        return uid
    digest = hashlib.sha256(service.encode()).hexdigest()[:8]
    return f"{uid[:UID_MAX - 9]}-{digest}"


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _target(expr: str, legend: str, ref: str, **extra: Any) -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref, **extra}


def _panel(pid: int, title: str, kind: str, targets: list[dict[str, Any]], grid: tuple[int, int, int, int], unit: str,
           description: str, **extra: Any) -> dict[str, Any]:
    x, y, w, h = grid
    return {
        "id": pid, "title": title, "type": kind, "datasource": DATASOURCE, "description": description,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit, **extra.pop("defaults", {})}, "overrides": []},
        "targets": targets, **extra,
    }


def _ref(i: int) -> str:
    return chr(65 + i) if i < 26 else f"Q{i}"


def _split_expr(service_matcher: str, offset: str = "") -> str:
    """Each backend's share of its own service's valid requests (the denominator matched on service)."""
    rate = cv.record_valid_rate(SPLIT_WINDOW)
    by = f"{cv.LABEL_SERVICE}, {cv.LABEL_BACKEND}"
    at = f" offset {offset}" if offset else ""
    return (f'max by ({by}) ({rate}{{{service_matcher},backend!="{cv.ALL_BACKENDS}",backend!=""}}{at})'
            f" / on({cv.LABEL_SERVICE}) group_left()"
            f' max by ({cv.LABEL_SERVICE}) ({rate}{{{service_matcher},backend="{cv.ALL_BACKENDS}"}}{at})')


def _budget_stat_defaults() -> dict[str, Any]:
    return {"thresholds": {"mode": "absolute", "steps": [
        {"color": "red", "value": None}, {"color": "orange", "value": 0}, {"color": "green", "value": 0.25}]}}


def _variable_query(name: str, label: str, expr_selector: str, label_name: str) -> dict[str, Any]:
    definition = f"label_values({cv.RECORD_OBJECTIVE}{expr_selector}, {label_name})"
    return {"name": name, "type": "query", "datasource": DATASOURCE, "label": label, "multi": True,
            "includeAll": True, "allValue": ".+", "refresh": 2, "sort": 1,
            "query": {"query": definition, "refId": name}, "definition": definition,
            "options": [], "current": {"text": "All", "value": "$__all"}}


def _annotations(select: str, service_matcher: str) -> dict[str, Any]:
    return {"list": [
        {"name": "SLO alerts", "datasource": DATASOURCE, "enable": True, "iconColor": "red",
         "expr": f'ALERTS{{alertname=~"{"|".join(cv.ALERT_NAMES.values())}",alertstate="firing",{select}}}',
         "titleFormat": "{{alertname}} {{service}} {{slo}}", "textFormat": "{{long_window}}/{{short_window}}"},
        {"name": "Traffic changes", "datasource": DATASOURCE, "enable": True, "iconColor": "blue",
         "expr": f"abs(({_split_expr(service_matcher)}) - ({_split_expr(service_matcher, TRAFFIC_MOVE_WINDOW)}))"
                 f" > {TRAFFIC_MOVE}",
         "step": "1m",
         "titleFormat": "traffic moved: {{service}} {{backend}}",
         "textFormat": f"share changed by more than {TRAFFIC_MOVE:.0%} over {TRAFFIC_MOVE_WINDOW}"},
        {"name": "Drills", "datasource": DATASOURCE, "enable": True, "iconColor": "purple",
         "expr": f"max by ({cv.LABEL_SERVICE}, run_id, mode) ({DRILL_SERIES}{{{service_matcher}}})",
         "step": "1m", "titleFormat": "drill {{run_id}} ({{mode}}): {{service}}",
         "textFormat": "a drill faulted this service's traffic (opsctl slo dashboard --drills-out)"},
    ]}


def _document(uid: str, title: str, tags: list[str], variables: list[dict[str, Any]], annotations: dict[str, Any],
              panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": tags,
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "1m",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            *variables,
        ]},
        "annotations": annotations,
        "panels": panels,
    }


def panel_queries(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every query of a board: panels, annotations and variables."""
    out = [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]
    out += [(f"annotation {a['name']}", a["expr"]) for a in doc["annotations"]["list"] if "expr" in a]
    out += [(f"variable {v['name']}", v["definition"]) for v in doc["templating"]["list"] if v["type"] == "query"]
    return out


# ---------------------------------------------------------------------------------------------
# One service's board


def service_matcher(plans: Sequence[SloRulePlan]) -> str:
    """The `service` matcher of the labels these plans' records carry (the config's
    service, a catalog entry's for the fleet): one value, or an exact alternation."""
    import re

    names = sorted({p.label_dict[cv.LABEL_SERVICE] for p in plans})
    if len(names) == 1:
        return f'{cv.LABEL_SERVICE}="{_quote(names[0])}"'
    return f'{cv.LABEL_SERVICE}=~"{_quote("|".join(re.escape(n) for n in names))}"'


def dashboard(plans: Sequence[SloRulePlan], settings: RuleSettings, *, uid: str | None = None,
              title: str | None = None) -> dict[str, Any]:
    if not plans:
        raise ValueError("no SLOs")
    service = service_matcher(plans)
    select = f'{service},{cv.LABEL_SLO}=~"$slo"'
    on = f"on({cv.LABEL_SERVICE}, {cv.LABEL_SLO})"
    periods = list(dict.fromkeys(p.period for p in plans))
    period = periods[0] if len(periods) == 1 else "each SLO's period"
    variants = pair_variants([(settings.service, p) for p in plans])
    several = any(len(v) > 1 for v in variants.values())  # SLOs of several periods: scope each target
    burn_targets, thresholds = [], []
    flat = [(severity, v, owners) for (severity, _, _), vs in variants.items() for v, owners in vs.items()]
    for i, (severity, (long, short, factor), owners) in enumerate(flat):
        sel = select + (f",{_slo_scope(owners)}" if several else "")
        burn_targets.append(_target(
            f"{cv.record_error_ratio(long)}{{{sel}}} / {on} {cv.RECORD_ERROR_BUDGET}{{{sel}}}",
            f"{{{{slo}}}} burn {long} ({severity} above {cv.format_factor(factor)}x)", _ref(i)))
        thresholds.append(_target(f"vector({factor!r})", f"{severity} threshold {long}/{short} ({cv.format_factor(factor)}x)",
                                  _ref(len(flat) + i)))
    sli_targets: list[dict[str, Any]] = []
    for p in periods:
        group = [plan for plan in plans if plan.period == p]
        seconds = dict(group[0].windows)[p]
        sel = select + (f",{_slo_scope([(settings.service, g.name) for g in group])}" if len(periods) > 1 else "")
        for w in (cv.scaled_label("1h", seconds), cv.scaled_label("1d", seconds), p):
            sli_targets.append(_target(f"1 - {cv.record_error_ratio(w)}{{{sel}}}", f"{{{{slo}}}} {w}",
                                       _ref(len(sli_targets))))
    sli_targets.append(_target(f"{cv.RECORD_OBJECTIVE}{{{select}}}", "{{slo}} objective", _ref(len(sli_targets))))
    panels = [
        _panel(1, f"Error budget left ({period})", "stat",
               [_target(f"{cv.RECORD_BUDGET_REMAINING}{{{select}}}", "{{slo}}", "A")], (0, 0, 8, 8), "percentunit",
               f"Share of the {period} error budget not yet spent (negative: overspent).",
               defaults=_budget_stat_defaults(),
               options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"}),
        _panel(2, "Burn rate per alert window", "timeseries", burn_targets + thresholds, (8, 0, 16, 8), "x",
               "Error ratio over each alert's long window divided by the error budget; an alert fires when its"
               " long and short windows both burn above the threshold line."),
        _panel(3, "SLI over time", "timeseries", sli_targets,
               (0, 8, 12, 8), "percentunit", "Share of good events over 1h, 1d and the period, against the objective."),
        _panel(4, "Traffic split", "timeseries", [_target(_split_expr(service), "{{backend}}", "A")],
               (12, 8, 12, 8), "percentunit",
               f"Each backend's share of the service's valid requests over {SPLIT_WINDOW} (from its SLOs' traffic"
               " guard records).", options={"tooltip": {"mode": "multi"}},
               defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 30}}),
    ]
    return _document(uid or service_uid(settings.service), title or f"{settings.service} SLOs",
                     ["slo", "opsctl", f"service:{settings.service}"],
                     [_variable_query("slo", "SLO", f"{{{service}}}", cv.LABEL_SLO)],
                     _annotations(select, service), panels)


# ---------------------------------------------------------------------------------------------
# The fleet's overview


def _slo_scope(owners: Sequence[tuple[str, str]], services: bool = False) -> str:
    """Matchers on the SLOs named in `owners` ((service, slo) pairs), beside the `$slo` one (and
    on their services, beside `$service`, with `services`)."""
    import re

    def alternation(values: Iterable[str]) -> str:
        return _quote("|".join(re.escape(v) for v in sorted(set(values))))

    scope = f'{cv.LABEL_SLO}=~"{alternation(slo for _, slo in owners)}"'
    return (f'{cv.LABEL_SERVICE}=~"{alternation(svc for svc, _ in owners)}",' + scope) if services else scope


def pair_variants(entries: Sequence[tuple[str, SloRulePlan]]
                  ) -> dict[tuple[str, str, str], dict[tuple[str, str, float], list[tuple[str, str]]]]:
    """(severity, long, short) of the 28-30-day table -> (long, short, factor) of a period -> the
    (service, SLO) pairs alerting so, in first-seen order. SLOs of another period scale the windows
    (opsctl.slo.conventions.window_scale); periods of 28-30 days keep them and differ in factor."""
    out: dict[tuple[str, str, str], dict[tuple[str, str, float], list[tuple[str, str]]]] = {}
    for service, plan in entries:
        standard = [a for a in plan.alerts if not a.fast]  # the fast tier: raw windows, no records to chart
        for pair, a in zip(cv.ALERT_PAIRS, standard):
            owners = out.setdefault((pair.severity, pair.long, pair.short), {}).setdefault((a.long, a.short, a.factor), [])
            if (service, plan.name) not in owners:
                owners.append((service, plan.name))
    return out


def alert_pairs(services: Sequence[ServiceSlos]
                ) -> dict[tuple[str, str, str], dict[tuple[str, str, float], list[tuple[str, str]]]]:
    """`pair_variants` over every service's plans."""
    return pair_variants([(entry.service, plan) for entry in services for plan in entry.plans])


def fleet_dashboard(services: Sequence[ServiceSlos], *, uid: str = FLEET_UID, title: str = "SLOs of the fleet") -> dict[str, Any]:
    if not services or not any(s.plans for s in services):
        raise ValueError("no SLOs")
    service = f'{cv.LABEL_SERVICE}=~"$service"'
    select = f'{service},{cv.LABEL_SLO}=~"$slo"'
    on = f"on({cv.LABEL_SERVICE}, {cv.LABEL_SLO})"
    periods = sorted({p.period for s in services for p in s.plans})
    period = periods[0] if len(periods) == 1 else "period"
    legend = "{{service}} {{slo}}"
    panels = [
        _panel(1, f"SLOs by error budget left ({period})", "table",
               [_target(f"sort({cv.RECORD_BUDGET_REMAINING}{{{select}}})", legend, "A",
                        instant=True, range=False, format="table")],
               (0, 0, 12, 10), "percentunit",
               "Every SLO of the selected services, least budget left first (negative: overspent).",
               defaults=_budget_stat_defaults(),
               options={"showHeader": True, "sortBy": [{"displayName": "budget left", "desc": False}]},  # as renamed
               transformations=[{"id": "organize", "options": {
                   "excludeByName": {"Time": True, "__name__": True},
                   "renameByName": {"Value": "budget left"}}}]),
        _panel(2, "Error budget left over time", "timeseries",
               [_target(f"{cv.RECORD_BUDGET_REMAINING}{{{select}}}", legend, "A")],
               (12, 0, 12, 10), "percentunit",
               "Share of each SLO's period error budget not yet spent, over time.",
               defaults=_budget_stat_defaults()),
    ]
    y = 10
    for i, ((severity, _, _), variants) in enumerate(alert_pairs(services).items()):
        windows = list(dict.fromkeys(f"{long}/{short}" for long, short, _ in variants))
        scoped = len(windows) > 1  # several periods' windows: each target reads its own SLOs
        targets: list[dict[str, Any]] = []
        lines: list[tuple[float, str]] = []
        for long, short in dict.fromkeys((long, short) for long, short, _ in variants):
            owners = [o for (lo, sh, _), os in variants.items() if (lo, sh) == (long, short) for o in os]
            sel = select + (f",{_slo_scope(owners, services=True)}" if scoped else "")
            targets += [_target(f"{cv.record_error_ratio(w)}{{{sel}}} / {on} {cv.RECORD_ERROR_BUDGET}{{{sel}}}",
                                f"{legend} {w}", _ref(len(targets) + j)) for j, w in enumerate((long, short))]
        for (long, short, factor), owners in variants.items():
            services_of = list(dict.fromkeys(svc for svc, _ in owners))
            who = "" if len(variants) == 1 else f" ({f'{long}/{short}: ' if scoped else ''}{', '.join(services_of)})"
            lines.append((factor, who))
        targets += [_target(f"vector({factor!r})", f"threshold {cv.format_factor(factor)}x{who}", _ref(len(targets) + j))
                    for j, (factor, who) in enumerate(lines)]
        pair_text = ", ".join(windows)
        panels.append(_panel(
            3 + i, f"Burn rate {pair_text} ({severity})", "timeseries", targets,
            (12 * (i % 2), y + 8 * (i // 2), 12, 8), "x",
            f"Error ratio over {' and over '.join(windows[0].split('/'))} divided by the error budget"
            f"{' (each SLO over its own period: ' + pair_text + ')' if scoped else ''}; the {severity} alert fires when"
            " both burn above the threshold."))
    y += 8 * -(-len(panels[2:]) // 2)
    panels.append(_panel(
        len(panels) + 1, "Traffic split per service", "timeseries",
        [_target(_split_expr(service), "{{service}} {{backend}}", "A")], (0, y, 24, 8), "percentunit",
        f"Each backend's share of its own service's valid requests over {SPLIT_WINDOW}.",
        options={"tooltip": {"mode": "multi"}}))
    return _document(uid, title, ["slo", "opsctl", "fleet"],
                     [_variable_query("service", "Service", f'{{{cv.LABEL_SERVICE}!=""}}', cv.LABEL_SERVICE),
                      _variable_query("slo", "SLO", f"{{{service}}}", cv.LABEL_SLO)],
                     _annotations(select, service), panels)
