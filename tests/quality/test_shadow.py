"""`opsctl shadow report`: verdicts for a healthy and an unhealthy shadow, from hand-made steps in
the embedded store; expected error rates and percentiles worked out by hand from the per-step counts."""

from __future__ import annotations

import json

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import write_config

END = 1_795_000_000  # on the 10 s grid
HOUR_STEPS = 360
STEPS = 2 * HOUR_STEPS  # two hours of data; the default window is the last hour
PER_STEP = 1000  # requests per 10 s step = 100 req/s

# Cumulative requests at or under 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10 s and +Inf, per step.
PRIMARY_LE = (100, 400, 800, 950, 990, 996, 999, 1000, 1000, 1000, 1000)
HEALTHY_LE = (80, 360, 780, 940, 988, 995, 999, 1000, 1000, 1000, 1000)
SLOW_LE = (20, 100, 300, 600, 900, 960, 990, 998, 1000, 1000, 1000)

# Percentiles by hand (histogram_quantile: rank = q x count, linear inside the bucket holding it):
# primary: p50 rank 500 in (0.1, 0.2] holding 400..800 -> 0.1 + 0.1 * 100/400 = 0.125
#          p95 rank 950 in (0.2, 0.3] holding 800..950 -> 0.2 + 0.1 * 150/150 = 0.300
#          p99 rank 990 in (0.3, 0.5] holding 950..990 -> 0.3 + 0.2 * 40/40  = 0.500
PRIMARY_P = {"p50": 0.125, "p95": 0.3, "p99": 0.5}
# healthy: p50 rank 500 in (0.1, 0.2] holding 360..780 -> 0.1 + 0.1 * 140/420 = 0.133333
#          p95 rank 950 in (0.3, 0.5] holding 940..988 -> 0.3 + 0.2 * 10/48   = 0.341667
#          p99 rank 990 in (0.5, 0.75] holding 988..995 -> 0.5 + 0.25 * 2/7   = 0.571429
HEALTHY_P = {"p50": 0.1 + 0.1 * 140 / 420, "p95": 0.3 + 0.2 * 10 / 48, "p99": 0.5 + 0.25 * 2 / 7}
# slow:    p50 rank 500 in (0.2, 0.3] holding 300..600 -> 0.2 + 0.1 * 200/300 = 0.266667
#          p95 rank 950 in (0.5, 0.75] holding 900..960 -> 0.5 + 0.25 * 50/60 = 0.708333
#          p99 rank 990 in (0.75, 1] holding 960..990 -> 0.75 + 0.25 * 30/30 = 1.0
SLOW_P = {"p50": 0.2 + 0.1 * 200 / 300, "p95": 0.5 + 0.25 * 50 / 60, "p99": 1.0}


def steps(*, per_step=PER_STEP, le=PRIMARY_LE, server_errors=0, timeouts=0, client_errors=0, count=STEPS):
    ts = [END - (count - 1 - i) * 10 for i in range(count)]
    scale = per_step / PER_STEP
    ok = per_step - server_errors - timeouts - client_errors
    cols = {
        "req_ok": [ok] * count, "req_server_error": [server_errors] * count, "req_timeout": [timeouts] * count,
        "req_client_error": [client_errors] * count, "lat_count": [per_step] * count,
        "lat_sum": [per_step * 0.2] * count,
    }
    for i, c in enumerate(le):
        cols[f"le_{i}"] = [c * scale] * count
    return ts, cols


def load(tmp_path, **backends):
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    for name, (ts, cols) in backends.items():
        store.write_steps(name, ts, cols, mode="replace")
    store.close()
    return write_config(tmp_path)


def report(opsctl, cfg, *args):
    return opsctl("--config", str(cfg), "shadow", "report", "--backend", "internal", "-o", "json", *args)


def test_healthy_shadow_is_ready(opsctl, tmp_path):
    # Shadow: 5 client errors per step (the caller's fault, not counted), no server errors.
    cfg = load(tmp_path, databricks=steps(), internal=steps(le=HEALTHY_LE, client_errors=5))
    result = report(opsctl, cfg)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "ready" and data["reasons"] == []
    shadow, primary = data["figures"]["shadow"], data["figures"]["primary"]
    assert shadow["requests"] == HOUR_STEPS * PER_STEP and shadow["client_errors"] == HOUR_STEPS * 5
    assert shadow["error_rate"] == 0.0 and primary["error_rate"] == 0.0
    assert shadow["rate"] == pytest.approx(100.0)  # 360 000 requests / 3600 s
    assert data["current_rate"] == pytest.approx(100.0)  # databricks over the last 5 minutes
    for label in ("p50", "p95", "p99"):
        assert shadow["latency"][label] == pytest.approx(HEALTHY_P[label], abs=1e-9)
        assert primary["latency"][label] == pytest.approx(PRIMARY_P[label], abs=1e-9)
    assert {c["name"]: c["ok"] for c in data["checks"]} == {
        "requests": True, "error rate": True, "latency p50": True, "latency p95": True, "latency p99": True,
        "load": True}


def test_unhealthy_shadow_is_not_ready_with_reasons(opsctl, tmp_path):
    # Shadow: 2 server errors + 1 timeout per 1000 -> 0.3% error rate; slow latency.
    cfg = load(tmp_path, databricks=steps(), internal=steps(le=SLOW_LE, server_errors=2, timeouts=1))
    result = report(opsctl, cfg)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "not ready"
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["error rate"]["shadow"] == pytest.approx(3 / 1000)
    assert checks["error rate"]["limit"] == pytest.approx(0.0001)  # primary 0 + max_error_rate_increase
    assert not checks["error rate"]["ok"]
    for label in ("p50", "p95", "p99"):
        assert checks[f"latency {label}"]["shadow"] == pytest.approx(SLOW_P[label], abs=1e-9)
        assert checks[f"latency {label}"]["limit"] == pytest.approx(PRIMARY_P[label] * 1.2, abs=1e-9)
        assert not checks[f"latency {label}"]["ok"]
    assert checks["load"]["ok"] and checks["requests"]["ok"]
    assert "error rate 0.3000% vs primary 0.0000% (at most 0.0100%)" in data["reasons"]
    assert "latency p99 1000 ms vs primary 500 ms (at most 1.2x = 600 ms)" in data["reasons"]
    assert "not ready for real traffic (4 reason(s))" in result.stderr


def test_shadow_with_a_tenth_of_the_traffic_is_not_ready_at_the_current_rate(opsctl, tmp_path):
    # Mirrored at 10%: 10 req/s; at share 1 it should carry databricks' 100 req/s over the same window: needs 0.9 x 100 = 90.
    cfg = load(tmp_path, databricks=steps(), internal=steps(per_step=100, le=PRIMARY_LE))
    result = report(opsctl, cfg)
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert [c["name"] for c in data["checks"] if not c["ok"]] == ["load"]
    assert data["reasons"] == ["internal carried 10.0 req/s on average; 100% of the real traffic's "
                               "100.0 req/s over the same window is 100.0 req/s "
                               "(needs at least 0.9x = 90.0 req/s)"]
    # ...but it is ready to take 10% of the traffic.
    ten = report(opsctl, cfg, "--share", "0.1")
    assert ten.exit_code == 0, ten.output
    assert json.loads(ten.stdout)["required_rate"] == pytest.approx(10.0)


def test_table_output_states_the_verdict_and_why(opsctl, tmp_path):
    cfg = load(tmp_path, databricks=steps(), internal=steps(le=SLOW_LE, server_errors=2, timeouts=1))
    result = opsctl("--config", str(cfg), "shadow", "report", "--backend", "internal", "--window", "30m")
    assert result.exit_code == 1
    assert "Shadow internal vs primary databricks over 30m" in result.stdout
    assert "Verdict: NOT READY" in result.stdout
    assert "latency p95  708 ms" in result.stdout


def test_shadow_without_data_is_unknown_never_ready(opsctl, tmp_path):
    cfg = load(tmp_path, databricks=steps())
    result = report(opsctl, cfg)
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout)["verdict"] == "unknown"
    assert "no client-side metrics for internal" in result.stderr


def test_bad_flags_exit_2(opsctl, tmp_path):
    cfg = load(tmp_path, databricks=steps(), internal=steps())
    assert opsctl("--config", str(cfg), "shadow", "report", "--backend", "nope").exit_code == 2
    same = opsctl("--config", str(cfg), "shadow", "report", "--backend", "internal", "--primary", "internal")
    assert same.exit_code == 2 and "is the shadow backend itself" in same.stderr
    bad = opsctl("--config", str(cfg), "shadow", "report", "--backend", "internal", "--window", "ten")
    assert bad.exit_code == 2 and "--window" in bad.stderr
