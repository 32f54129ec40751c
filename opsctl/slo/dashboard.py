"""A Grafana dashboard (JSON model, provisioning-ready) over the series `opsctl slo rules` records.

Pure: plans in, a dict out. Every query names only series the generated rules produce (the
`slo:` records), so the dashboard shows what the alerts see; a `$slo` variable picks SLOs.
Panels: error budget left, burn rate per alert window against its threshold, SLI over time, and
the traffic split between backends (valid requests/s of each backend's SLOs).
"""

from __future__ import annotations

from typing import Sequence

from opsctl.slo import conventions as cv
from opsctl.slo.rules import RuleSettings, SloRulePlan

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SELECT = 'slo=~"$slo"'


def _target(expr: str, legend: str, ref: str) -> dict:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(pid: int, title: str, kind: str, targets: list[dict], grid: tuple[int, int, int, int], unit: str,
           description: str, **extra) -> dict:
    x, y, w, h = grid
    return {
        "id": pid, "title": title, "type": kind, "datasource": DATASOURCE, "description": description,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit, **extra.pop("defaults", {})}, "overrides": []},
        "targets": targets, **extra,
    }


def panel_queries(plans: Sequence[SloRulePlan], settings: RuleSettings) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query, for checking them against a real Prometheus."""
    doc = dashboard(plans, settings)
    return [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]


def dashboard(plans: Sequence[SloRulePlan], settings: RuleSettings, *, uid: str = "opsctl-slo",
              title: str | None = None) -> dict:
    if not plans:
        raise ValueError("no SLOs")
    period = settings.period
    # the recorded pairs (the fast-burn tier reads raw windows, evaluated every few seconds)
    pairs = [(a.long, a.short, a.factor, a.severity) for a in plans[0].alerts if not a.fast]
    burn_targets = []
    for i, (long, short, factor, severity) in enumerate(pairs):
        burn_targets.append(_target(
            f"{cv.record_error_ratio(long)}{{{SELECT}}} / on(slo) {cv.RECORD_ERROR_BUDGET}{{{SELECT}}}",
            f"{{{{slo}}}} burn {long} ({severity} above {cv.format_factor(factor)}x)", chr(65 + i)))
    thresholds = [_target(f"vector({factor!r})", f"{severity} threshold {long}/{short} ({cv.format_factor(factor)}x)",
                          chr(65 + len(pairs) + i))
                  for i, (long, short, factor, severity) in enumerate(pairs)]
    panels = [
        _panel(1, f"Error budget left ({period})", "stat",
               [_target(f"{cv.RECORD_BUDGET_REMAINING}{{{SELECT}}}", "{{slo}}", "A")], (0, 0, 8, 8), "percentunit",
               f"Share of the {period} error budget not yet spent (negative: overspent).",
               defaults={"thresholds": {"mode": "absolute", "steps": [
                   {"color": "red", "value": None}, {"color": "orange", "value": 0}, {"color": "green", "value": 0.25}]}},
               options={"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"}),
        _panel(2, "Burn rate per alert window", "timeseries", burn_targets + thresholds, (8, 0, 16, 8), "x",
               "Error ratio over each alert's long window divided by the error budget; an alert fires when its"
               " long and short windows both burn above the threshold line."),
        _panel(3, "SLI over time", "timeseries",
               [_target(f"1 - {cv.record_error_ratio(w)}{{{SELECT}}}", f"{{{{slo}}}} {w}", chr(65 + i))
                for i, w in enumerate(("1h", "1d", period))]
               + [_target(f"{cv.RECORD_OBJECTIVE}{{{SELECT}}}", "{{slo}} objective", "D")],
               (0, 8, 12, 8), "percentunit", "Share of good events over 1h, 1d and the period, against the objective."),
        _panel(4, "Traffic split", "timeseries",
               [_target(f'max by (backend) ({cv.record_valid_rate("5m")}{{backend!="{cv.ALL_BACKENDS}",backend!=""}})'
                        f' / scalar(max({cv.record_valid_rate("5m")}{{backend="{cv.ALL_BACKENDS}"}}))',
                        "{{backend}}", "A")],
               (12, 8, 12, 8), "percentunit",
               "Each backend's share of the service's valid requests over 5 minutes (from its SLOs' traffic guard"
               " records).", options={"tooltip": {"mode": "multi"}},
               defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 30}}),
    ]
    return {
        "uid": uid,
        "title": title or f"{settings.service} SLOs",
        "tags": ["slo", "opsctl"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-7d", "to": "now"},
        "refresh": "1m",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "slo", "type": "query", "datasource": DATASOURCE, "label": "SLO", "multi": True,
             "includeAll": True, "allValue": ".+", "refresh": 2,
             "query": {"query": f"label_values({cv.RECORD_OBJECTIVE}, {cv.LABEL_SLO})", "refId": "slo"},
             "definition": f"label_values({cv.RECORD_OBJECTIVE}, {cv.LABEL_SLO})",
             "options": [], "current": {"text": "All", "value": "$__all"}},
        ]},
        "annotations": {"list": [{
            "name": "SLO alerts", "datasource": DATASOURCE, "enable": True, "iconColor": "red",
            "expr": f'ALERTS{{alertname=~"{"|".join(cv.ALERT_NAMES.values())}",alertstate="firing",{SELECT}}}',
            "titleFormat": "{{alertname}} {{slo}}", "textFormat": "{{long_window}}/{{short_window}}",
        }]},
        "panels": panels,
    }
