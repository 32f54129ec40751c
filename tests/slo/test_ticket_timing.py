"""Tickets within the workbook's time plus `for:` (issue 38 item 3, decision 0410): with the shipped
timings (opsctl.yaml: ticket `for: 3m`), a 5-minute total outage on a 99.9% SLO tickets within 10
minutes of its start, and a clean week never tickets. Checked by `promtool test rules` on the
generated rules.

By hand, for the outage (10 requests/s, 600 a minute, three days and ten minutes of clean traffic
first, so the 1d and 3d windows are full; every request fails in minutes onset+1..onset+5):
- the 1d and 3d error ratios are derived from the 5m increases recorded every minute, so at minute
  T they sum the raw window's counts at the five instants T, T-1m, ..., T-4m (the identity in
  rule_exprs.derived_error_ratio_expr). The window ending k minutes after the onset holds
  min(k, 5) failing minutes.
- 1d/2h at 2.8x (0.1 x 28d / 1d): the five windows hold 5 x 1440 minutes of traffic.
  T = onset+6: 5+5+4+3+2 = 19 failing minutes, 19 / 7200 / 0.001 = 2.64 < 2.8;
  T = onset+7: 5+5+5+4+3 = 22, 22 / 7200 / 0.001 = 3.06 > 2.8. The 2h window: 5 / 120 / 0.001
  = 41.7 > 2.8 from onset+2 on (2 / 120 / 0.001 = 16.7). So it holds from onset+7, fires at onset+10.
- 3d/6h at 0.9333x: 19 / (5 x 4320) / 0.001 = 0.880 < 0.9333 at onset+6, 22 / 21600 / 0.001 = 1.019
  at onset+7; 6h: 5 / 360 / 0.001 = 13.9. Holds from onset+7, fires at onset+10, with the 1d pair.
- both stay firing afterwards (the 1d window keeps the 5 failing minutes for a day).
The clean week: 1 request in 2,000 fails (0.05%, a 0.5x burn of the 0.1% budget), below every
ticket factor (2.8x, 0.9333x) at every minute. promtool's unit-test engine caps a query at 10,000
samples and the 28d period record reads one recorded increase a minute, so the "week" is 9,900
minutes (6 days 21 hours: every ticket window, 3d the longest, twice over), scraped every minute
(the 5m increases hold five samples) to keep promtool's run short."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, run_opsctl, write_config
from tests.slo import rules_data as r

NAME = "llm-inference-databricks-availability-999"
ONSET = 3 * 1440 + 10  # minutes of clean traffic before the outage
OUTAGE_MINUTES = 5
FIRST_TICKET = ONSET + 10  # by hand, above
CLEAN_MINUTES = 9900  # under promtool's 10,000 samples a query (the docstring)
QUIET = "quality: {rules: {enabled: false}}\n"


def shipped_alerting() -> str:
    doc = yaml.safe_load((REPO / "opsctl.yaml").read_text())
    return yaml.safe_dump({"alerting": doc["alerting"]}, sort_keys=False)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    work = tmp_path_factory.mktemp("ticket-timing")
    cfg = write_config(work, shipped_alerting() + QUIET)
    doc = yaml.safe_load((REPO / "slos" / "databricks-availability.yaml").read_text())
    doc["metadata"]["name"] = NAME
    doc["spec"]["goal"] = 0.999
    slo = work / "slo.yaml"
    slo.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = work / "rules.yaml"
    result = run_opsctl("--config", str(cfg), "slo", "rules", str(slo), "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def ticket_rules(path) -> dict[tuple[str, str], str]:
    doc = yaml.safe_load(path.read_text())
    return {(rule["labels"]["long_window"], rule["labels"]["short_window"]): rule["for"]
            for g in doc["groups"] for rule in g["rules"] if rule.get("alert") == "SloBurnRateTicket"}


def firing_tickets(minutes, pairs) -> list[dict]:
    """promql tests: at each minute, the firing ticket alerts' window pairs (`ALERTS`, as Prometheus writes it)."""
    expr = 'count by (long_window, short_window) (ALERTS{alertname="SloBurnRateTicket",alertstate="firing"})'
    return [{"expr": expr, "eval_time": r.minute(m),
             "exp_samples": [{"labels": f'{{long_window="{lw}",short_window="{sw}"}}', "value": 1}
                             for lw, sw in pairs(m)]} for m in minutes]


@pytest.mark.slow
def test_a_five_minute_outage_tickets_ten_minutes_after_it_starts(generated, tmp_path):
    assert ticket_rules(generated) == {("1d", "2h"): "3m", ("3d", "6h"): "3m"}  # the shipped `for:`
    steps = (ONSET + 20) * 6
    requests = np.full(steps, 100, dtype=np.int64)  # 10 requests/s
    errors = np.zeros(steps, dtype=np.int64)
    errors[ONSET * 6:(ONSET + OUTAGE_MINUTES) * 6] = 100  # every request of minutes onset+1..onset+5
    both = (("1d", "2h"), ("3d", "6h"))
    tests = firing_tickets(range(ONSET - 5, ONSET + 21), lambda m: both if m >= FIRST_TICKET else ())
    result = r.run_promtool_test(tmp_path, generated, r.input_series({"databricks": r.traffic(requests, errors)}),
                                 [], tests)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert FIRST_TICKET - ONSET == 10 <= 10


@pytest.mark.slow
def test_a_clean_week_never_tickets(generated, tmp_path):
    minutes = CLEAN_MINUTES
    requests = np.full(minutes, 2000, dtype=np.int64)  # a sample a minute: 2,000 requests each
    errors = np.ones(minutes, dtype=np.int64)  # 1 in 2,000 requests: 0.5x the budget
    tests = firing_tickets(range(0, minutes + 1, 5), lambda m: ())
    result = r.run_promtool_test(tmp_path, generated, r.input_series({"databricks": r.traffic(requests, errors)}),
                                 [], tests, interval="1m")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
