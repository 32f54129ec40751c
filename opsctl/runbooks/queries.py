"""The PromQL a runbook quotes: an SLO's recording rules and raw selectors, and where errors,
latency and tokens come from by backend. Split from opsctl.runbooks.facts, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opsctl.metrics import schema
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.slo.rule_plan import SloRulePlan


@dataclass(frozen=True)
class Query:
    title: str
    expr: str


def slo_queries(plan: "SloRulePlan", severity: str) -> list[Query]:
    """The recording rules of one SLO's alert, and the same figures from the raw selectors."""
    from opsctl.slo.rule_exprs import error_ratio_expr, number, own_matchers

    slo = plan.slo
    own = own_matchers(plan)  # slo and service: SLO names may repeat across services
    budget = f"(1 - {number(slo.goal)})"
    alerts = [a for a in plan.alerts if a.severity == severity and not a.fast]  # the fast tier reads raw windows
    queries = []
    for window in dict.fromkeys(w for a in alerts for w in (a.long, a.short)):
        queries.append(Query(f"burn rate over {window} (recording rule)",
                             f"{cv.record_error_ratio(window)}{own} / {budget}"))
    if plan.causes:
        short = min(alerts, key=lambda a: a.short_seconds).short
        queries.append(Query(f"share of requests failing by cause over {short} (recording rule; the page's `cause`)",
                             f"{cv.record_cause_ratio(short)}{own}"))
    queries.append(Query(f"error budget left over {plan.period} (1 = untouched, 0 = spent)",
                         f"{cv.RECORD_BUDGET_REMAINING}{own}"))
    short = min(alerts, key=lambda a: a.short_seconds).short
    queries.append(Query(f"error ratio over {short} from the SLO's raw selectors (no recording rules needed)",
                         error_ratio_expr(plan, short)))
    names = "|".join([cv.alert_name(severity)] + ([cv.FAST_ALERT_NAME] if any(
        a.fast for a in plan.alerts if a.severity == severity) else []))
    matcher = f'alertname="{names}"' if "|" not in names else f'alertname=~"{names}"'
    queries.append(Query("is the alert firing (and for which window pair)",
                         f'ALERTS{{{matcher},{own_matchers(plan)[1:]}'))
    return queries


def _sel(scope: str, *matchers: str) -> str:
    """A selector's braces: the service matcher `scope` (Config.service_matcher) first, then the rest."""
    body = ",".join(m for m in (scope, *matchers) if m)
    return f"{{{body}}}" if body else ""


def backend_queries(backend: str | None, rate_window: str = "5m", scope: str = "") -> list[Query]:
    """Where errors and latency come from, for one backend or (None) by backend. `scope`: the
    service matcher every generated selector carries (Config.service_matcher; "" when off)."""
    sel = _sel(scope, f'{cv.LABEL_BACKEND}="{backend}"' if backend else "")
    by = "outcome" if backend else "backend, outcome"
    by_le = "le" if backend else "backend, le"
    return [
        Query("requests per second by outcome" + ("" if backend else " and backend"),
              f"sum by ({by}) (rate({schema.REQUESTS}{sel}[{rate_window}]))"),
        Query("p99 latency" + ("" if backend else " by backend"),
              f"histogram_quantile(0.99, sum by ({by_le}) (rate({schema.DURATION_BUCKET}{sel}[{rate_window}])))"),
    ]


def outcome_query(outcome: str, rate_window: str = "5m", scope: str = "") -> Query:
    sel = _sel(scope, f'outcome="{outcome}"')
    return Query(f"{outcome} requests per second by backend",
                 f"sum by (backend) (rate({schema.REQUESTS}{sel}[{rate_window}]))")


def tokens_query(rate_window: str = "1h", scope: str = "") -> Query:
    """Prompt tokens per answered request, by backend: a dropped or doubled beginning-of-text token
    shows as a difference of one between backends serving the same prompts."""
    ok = _sel(scope, 'outcome="ok"')
    return Query("prompt tokens per answered request, by backend",
                 f"sum by (backend) (rate({schema.PROMPT_TOKENS}{_sel(scope)}[{rate_window}]))"
                 f" / sum by (backend) (rate({schema.REQUESTS}{ok}[{rate_window}]))")


def peak_query(days: int = 7, scope: str = "") -> Query:
    return Query(f"peak request rate of the whole service over the last {days} days",
                 f"max_over_time(sum(rate({schema.REQUESTS}{_sel(scope)}[5m]))[{days}d:5m])")
