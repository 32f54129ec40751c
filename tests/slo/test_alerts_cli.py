"""`opsctl slo alerts`: the alerts firing at an instant on the embedded store, at the minutes the
maths predicts, with `for:` respected; no data is exit 3, never a quiet answer.

Traffic: databricks 80 requests/s, healthy; internal 10 requests/s, healthy for 2 h, then 1 request
in 100 fails (100x the 0.01% budget) for 2 h. Figures by hand, n = failing 10 s steps so far:
- internal 6h/30m page: 6h holds all 720 + n steps, n / (100 (720 + n)) > 0.00056 -> n >= 43 (430 s):
  holds from minute 128, fires at 130 (`for: 2m`); 1h/5m: n / 36000 > 0.001344 -> n >= 49: fires at 131.
- internal 3d/6h ticket: 6h: n / (100 (720 + n)) > 0.9333 x 0.0001 -> n >= 7 (minute 122); 3d is
  derived from the 5m increases recorded every minute, which sum to the steps up to each of the
  last five minutes: x minutes in, 100 sum_j (x - j)+ / sum_j (120 + x - j) over j = 0..4 is
  100/595 at x = 1, 300/600 at 2, 600/605 > 0.9333 at 3: holds from 123, fires at 138.
- the service as a whole (900 requests a step, 1 failing) never pages within the 4 hours.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import numpy as np
import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import REPO, write_config
from tests.slo import data as d
from tests.slo import rules_data as r

BASE = 1_794_996_000  # on the hour
STEPS = 4 * 360
INTERNAL = "llm-inference-internal-availability"


def at(minute: int) -> str:
    return datetime.fromtimestamp(BASE + minute * 60, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def traffic():
    internal_errors = np.zeros(STEPS, dtype=int)
    internal_errors[720:] = 1
    return {
        "databricks": r.shifted(r.traffic(np.full(STEPS, 800)), BASE),
        "internal": r.shifted(r.traffic(np.full(STEPS, 100), internal_errors), BASE),
    }


@pytest.fixture
def cfg(tmp_path):
    path = write_config(tmp_path, r.ALERTING_CONFIG)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic())
    store.close()
    return path


def alerts(opsctl, cfg, *args):
    result = opsctl("--config", str(cfg), "slo", "alerts", *args, "-o", "json")
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def keys(data):
    return sorted((a["slo"], a["severity"], a["long_window"]) for a in data["firing"])


def test_page_fires_at_the_minute_the_maths_predicts_with_its_burn_rate(opsctl, cfg):
    result, data = alerts(opsctl, cfg, "--at", at(130))
    assert result.exit_code == 0, result.output
    assert keys(data) == [(INTERNAL, "page", "6h")]
    alert = data["firing"][0]
    # 60 failing steps in the 780 of the 6h window; 30m: 60 of 180 steps.
    assert alert["burn_rate"] == pytest.approx((60 / 78_000) / 0.0001, rel=1e-9)
    assert alert["short_burn_rate"] == pytest.approx((60 / 18_000) / 0.0001, rel=1e-9)
    assert alert["request_rate"] == 10.0
    assert alert["factor"] == 5.6
    assert alert["labels"] == {"alertname": "SloBurnRatePage", "slo": INTERNAL, "backend": "internal",
                               "service": "llm-inference", "severity": "page", "category": "availability",
                               "long_window": "6h", "short_window": "30m"}
    assert alert["cause"] == alert["annotations"]["cause"] == "server_error"  # the data fails with 5xx only
    assert alert["annotations"]["runbook_url"] == f"{r.RUNBOOK_BASE}/{INTERNAL}-page.md"
    assert alert["annotations"]["burn_rate"] == "7.69"


def test_a_pending_alert_is_not_listed_until_its_for_has_passed(opsctl, cfg):
    result, data = alerts(opsctl, cfg, "--at", at(129))  # the 6h/30m pair has held since minute 128
    assert result.exit_code == 0
    assert data["firing"] == []


def test_later_the_fast_pair_and_the_tickets_join(opsctl, cfg):
    _, data = alerts(opsctl, cfg, "--at", at(131))
    assert keys(data) == [(INTERNAL, "page", "1h"), (INTERNAL, "page", "6h")]
    _, data = alerts(opsctl, cfg, "--at", at(137))
    assert (INTERNAL, "ticket", "3d") not in keys(data)
    _, data = alerts(opsctl, cfg, "--at", at(138))
    assert (INTERNAL, "ticket", "3d") in keys(data)
    assert not any(a["slo"] == "llm-inference-service-availability" and a["severity"] == "page"
                   for a in data["firing"])


def test_default_instant_is_the_newest_data(opsctl, cfg):
    result, data = alerts(opsctl, cfg)
    assert data["at"] == at(240)
    assert (INTERNAL, "page", "1h") in keys(data)


def test_slo_paths_narrow_the_evaluation(opsctl, cfg):
    _, data = alerts(opsctl, cfg, str(REPO / "slos" / "databricks-availability.yaml"), "--at", at(240))
    assert data["firing"] == [] and data["unknown"] == []


def test_fail_on_page_exits_1_naming_the_slo(opsctl, cfg):
    result = opsctl("--config", str(cfg), "slo", "alerts", "--at", at(130), "--fail-on", "page")
    assert result.exit_code == 1
    assert INTERNAL in result.stderr
    quiet = opsctl("--config", str(cfg), "slo", "alerts", "--at", at(125), "--fail-on", "ticket")
    assert quiet.exit_code == 0, quiet.output


def test_table_lists_alert_windows_burn_and_threshold(opsctl, cfg):
    result = opsctl("--config", str(cfg), "slo", "alerts", "--at", at(131))
    assert result.exit_code == 0
    assert f"alerts at {at(131)}, period 28d: 2 firing" in result.stdout
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["SLO", "ALERT", "SEVERITY", "BACKEND", "WINDOWS", "BURN", "(LONG", "/", "SHORT)",
                                "ABOVE", "TRAFFIC", "CAUSE"]  # the SLO first (issue 35: which SLO pages)
    assert any(line.split()[:5] == [INTERNAL, "SloBurnRatePage", "page", "internal", "1h/5m"]
               and line.split()[-1] == "server_error" for line in lines)


def test_backend_without_data_is_unknown_and_exit_3(opsctl, tmp_path):
    cfg = write_config(tmp_path, r.ALERTING_CONFIG)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, {"databricks": traffic()["databricks"]})
    store.close()
    result, data = alerts(opsctl, cfg, "--at", at(240))
    assert result.exit_code == 3
    unknown = {u["slo"] for u in data["unknown"]}
    assert unknown == {"llm-inference-internal-availability", "llm-inference-internal-latency-500ms",
                       "llm-inference-internal-latency-1s"}
    # the availability SLO's windows include the fast-burn tier's 1m
    assert "filter_valid matched no series over 1m, 5m, 30m, 1h, 2h, 6h, 1d, 3d" in data["unknown"][0]["reason"]
    assert "no data for 3 SLO(s)" in result.stderr


def test_data_that_stopped_is_unknown_not_quiet(opsctl, cfg):
    result, data = alerts(opsctl, cfg, "--at", at(240 + 10))  # ten minutes after the newest step
    assert result.exit_code == 3
    assert all("5m" in u["reason"] for u in data["unknown"])


def test_empty_store_is_no_data_with_a_hint(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "slo", "alerts")
    assert result.exit_code == 3
    assert "opsctl sim generate" in result.stderr


@pytest.mark.parametrize("args", [["--at", "yesterday"], ["--source", "embedded", "--prometheus-url", "http://127.0.0.1:1"]])
def test_bad_flags_are_usage_errors(opsctl, cfg, args):
    result = opsctl("--config", str(cfg), "slo", "alerts", *args)
    assert result.exit_code == 2


def test_firing_alerts_function_for_drills(tmp_path):
    """The reusable entry point: SLOs, a source, an instant, the settings -> firing alerts."""
    from opsctl.config import load_config_file
    from opsctl.slo.alerts import firing_alerts
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings

    cfg = load_config_file(write_config(tmp_path, r.ALERTING_CONFIG))
    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    d.write(store, traffic())
    slos = load_slos([REPO / "slos"], cfg.backends)
    settings = RuleSettings.from_config(cfg)
    assert firing_alerts(slos, store, BASE + 129 * 60, settings) == []
    fired = firing_alerts(slos, store, BASE + 130 * 60, settings)
    assert [(a.slo, a.alertname, a.long_window) for a in fired] == [(INTERNAL, "SloBurnRatePage", "6h")]
    store.close()
