"""The traffic simulator: deterministic, realistic in shape, incidents confined to their window, and
its OpenMetrics export faithful to the store (checked by ingest and by the real promtool)."""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from opsctl.clock import parse_rfc3339
from opsctl.errors import UsageError
from opsctl.metrics import schema
from opsctl.metrics import simulator as sim
from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import require_binary
from tests.metrics.conftest import parse_json

BACKENDS = {"databricks": "vendor", "internal": "internal"}
HOUR = 3600
REPO = Path(__file__).resolve().parents[2]


def total(series: sim.SimSeries) -> np.ndarray:
    return sum(series.columns[c] for c in schema.REQUEST_COLUMNS)


def bad(series: sim.SimSeries) -> np.ndarray:
    return sum(series.columns[f"req_{o}"] for o in schema.BAD_OUTCOMES)


def hourly_rps(result: dict[str, sim.SimSeries]) -> np.ndarray:
    """Requests/s of the whole service per hour; the range must start on an hour."""
    requests = sum(total(s) for s in result.values())
    return requests.reshape(-1, HOUR // 10).sum(axis=1) / HOUR


# ---------------------------------------------------------------------------------------------
# Determinism


def test_the_same_seed_gives_identical_data():
    start = parse_rfc3339("2026-11-18T12:00:00Z")
    a = sim.simulate(start, start + 2 * HOUR, seed=42)
    b = sim.simulate(start, start + 2 * HOUR, seed=42)
    for name in BACKENDS:
        assert np.array_equal(a[name].timestamps, b[name].timestamps)
        for column in schema.VALUE_COLUMNS:
            assert np.array_equal(a[name].columns[column], b[name].columns[column]), column


def test_another_seed_gives_other_data():
    start = parse_rfc3339("2026-11-18T12:00:00Z")
    a = sim.simulate(start, start + HOUR, seed=1)
    b = sim.simulate(start, start + HOUR, seed=2)
    assert not np.array_equal(a["databricks"].columns["req_ok"], b["databricks"].columns["req_ok"])


def test_steps_are_step_ends_on_the_10_second_grid():
    result = sim.simulate(1_800_000_003, 1_800_000_095)
    ts = result["internal"].timestamps
    assert ts.tolist() == [1_800_000_010 + 10 * i for i in range(9)]  # ends in (start, end]
    assert set(result["internal"].columns) == set(schema.VALUE_COLUMNS)


# ---------------------------------------------------------------------------------------------
# Realistic shape (US Eastern local time: EDT is UTC-4 in September, EST UTC-5 in November)


@pytest.fixture(scope="module")
def september_week():
    """Monday 2026-09-14 00:00 EDT, seven days, no US holiday."""
    start = parse_rfc3339("2026-09-14T04:00:00Z")
    return sim.simulate(start, start + 7 * 24 * HOUR, seed=5, peak_rps=500)


def test_weekday_afternoon_peak_is_several_times_the_night_trough(september_week):
    rps = hourly_rps(september_week).reshape(7, 24)  # [day, local hour], Monday first
    tue_to_thu = rps[1:4]
    afternoon = tue_to_thu[:, 13:16].mean()
    night = tue_to_thu[:, 2:5].mean()
    assert 3.5 < afternoon / night < 6.5


def test_weekends_carry_less_than_half_the_weekday_peak(september_week):
    rps = hourly_rps(september_week).reshape(7, 24)
    assert rps[5:7].max() < 0.55 * rps[0:5].max()


def test_traffic_peaks_near_but_not_above_the_configured_peak(september_week):
    rps = hourly_rps(september_week)
    assert 0.85 * 500 < rps.max() <= 500 * 1.005  # the expected rate is capped at the peak


def test_the_monday_morning_ramp_is_steeper_than_other_weekdays(september_week):
    rps = hourly_rps(september_week).reshape(7, 24)
    ramp = rps[:, 8] - rps[:, 4]  # 08:00-09:00 against 04:00-05:00 local
    for day in range(1, 5):
        assert ramp[0] > 1.15 * ramp[day], (ramp[0], day, ramp[day])


def test_tail_probabilities_keep_their_relative_accuracy():
    z = np.array([-6.0, -2.0, 0.0, 1.5, 3.0, 4.5, 6.0, 8.0])
    expected = [0.5 * math.erfc(v / math.sqrt(2)) for v in z]
    assert sim._survival(z).tolist() == pytest.approx(expected, rel=2e-7)


def test_us_holidays_are_computed_for_each_year():
    assert sim.us_holidays(2026)[date(2026, 11, 26)][0] == "Thanksgiving"  # 4th Thursday of November
    assert sim.us_holidays(2027)[date(2027, 11, 25)][0] == "Thanksgiving"
    assert sim.us_holidays(2026)[date(2026, 5, 25)][0] == "Memorial Day"  # last Monday of May
    assert sim.us_holidays(2026)[date(2026, 9, 7)][0] == "Labor Day"  # first Monday of September
    assert sim.us_holidays(2026)[date(2026, 1, 19)][0] == "Martin Luther King Jr. Day"
    for day in (date(2026, 1, 1), date(2026, 7, 4), date(2026, 12, 25)):
        assert day in sim.us_holidays(2026)


def test_thanksgiving_traffic_dips_against_the_thursday_before():
    start = parse_rfc3339("2026-11-19T05:00:00Z")  # Thursday 00:00 EST
    result = sim.simulate(start, start + 8 * 24 * HOUR, seed=9)
    daily = hourly_rps(result).reshape(8, 24).sum(axis=1)
    thursday_before, thanksgiving = daily[0], daily[7]
    assert 0.3 < thanksgiving / thursday_before < 0.6


# ---------------------------------------------------------------------------------------------
# Per-backend behaviour in steady state


@pytest.fixture(scope="module")
def wednesday():
    start = parse_rfc3339("2026-11-18T05:00:00Z")  # Wednesday 00:00 EST
    return sim.simulate(start, start + 24 * HOUR, seed=11)


def test_the_default_split_sends_80_percent_to_the_vendor(wednesday):
    vendor, internal = total(wednesday["databricks"]).sum(), total(wednesday["internal"]).sum()
    assert vendor / (vendor + internal) == pytest.approx(0.80, abs=0.002)


def test_an_explicit_split_is_followed_and_a_zero_share_gets_no_traffic():
    start = parse_rfc3339("2026-11-18T17:00:00Z")
    half = sim.simulate(start, start + HOUR, split={"databricks": 50, "internal": 50})
    a, b = total(half["databricks"]).sum(), total(half["internal"]).sum()
    assert a / (a + b) == pytest.approx(0.5, abs=0.005)
    failover = sim.simulate(start, start + HOUR, split={"internal": 100})
    assert total(failover["databricks"]).sum() == 0
    assert len(failover["databricks"]) == 360  # the steps exist, with zero requests


def test_baseline_errors_stay_well_inside_four_nines(wednesday):
    for name, series in wednesday.items():
        valid = total(series).sum() - series.columns["req_client_error"].sum()
        ratio = bad(series).sum() / valid
        assert 0 < ratio < 0.3e-4, (name, ratio)  # under a third of the 1e-4 budget, not zero
        client_share = series.columns["req_client_error"].sum() / total(series).sum()
        assert 1e-4 < client_share < 5e-4


def test_latency_p99_is_well_under_500ms_even_in_the_busiest_hour(wednesday):
    for name, series in wednesday.items():
        count = series.columns["lat_count"].reshape(24, -1).sum(axis=1)
        under_500ms = series.columns["le_4"].reshape(24, -1).sum(axis=1)  # le="0.5"
        busiest = int(np.argmax(count))
        assert under_500ms[busiest] / count[busiest] > 0.995, name
    internal, vendor = wednesday["internal"], wednesday["databricks"]
    mean = lambda s: s.columns["lat_sum"].sum() / s.columns["lat_count"].sum()  # noqa: E731
    assert 0.05 < mean(internal) < mean(vendor) < 0.3  # the internal pods answer faster


def test_histogram_buckets_are_cumulative_and_the_last_is_the_count(wednesday):
    for series in wednesday.values():
        buckets = np.vstack([series.columns[c] for c in schema.BUCKET_COLUMNS])
        assert (np.diff(buckets, axis=0) >= 0).all()
        assert np.array_equal(series.columns["le_10"], series.columns["lat_count"])
        assert np.array_equal(series.columns["lat_count"], total(series))
        busy = series.columns["lat_count"] > 0
        mean = series.columns["lat_sum"][busy] / series.columns["lat_count"][busy]
        assert (mean > 0.005).all() and (mean < 1.0).all()


def test_tokens_follow_the_requests(wednesday):
    for series in wednesday.values():
        per_request = series.columns["prompt_tokens"].sum() / total(series).sum()
        per_answer = series.columns["completion_tokens"].sum() / series.columns["req_ok"].sum()
        assert 300 < per_request < 600 and 100 < per_answer < 300


# ---------------------------------------------------------------------------------------------
# Incidents


START = parse_rfc3339("2026-11-18T12:00:00Z")  # Wednesday morning in the US
END = START + 6 * HOUR


@pytest.fixture(scope="module")
def baseline():
    return sim.simulate(START, END, seed=3)


def with_incident(spec: str):
    incident = sim.parse_incident(spec, BACKENDS)
    return incident, sim.simulate(START, END, seed=3, incidents=[incident])


def window_of(series, incident):
    return (series.timestamps > incident.start) & (series.timestamps <= incident.end)


def assert_identical_outside(baseline, result, incident):
    for name in BACKENDS:
        outside = ~window_of(result[name], incident) if name == incident.backend else slice(None)
        for column in schema.VALUE_COLUMNS:
            assert np.array_equal(result[name].columns[column][outside], baseline[name].columns[column][outside]), (
                name, column)


def share(series, column, mask):
    return series.columns[column][mask].sum() / total(series)[mask].sum()


def test_vendor_5xx_raises_the_vendor_server_error_ratio_to_the_rate_in_its_window_only(baseline):
    incident, result = with_incident("vendor-5xx@2026-11-18T14:00Z+30m:backend=databricks,rate=0.2")
    db, base = result["databricks"], baseline["databricks"]
    window = window_of(db, incident)
    assert window.sum() == 180  # steps ending in (14:00, 14:30]
    assert share(db, "req_server_error", window) == pytest.approx(0.2, abs=0.005)
    per_step = db.columns["req_server_error"][window] / total(db)[window]
    assert (per_step > 0.1).all()
    # the boundary steps are outside: 14:00:00 and 14:30:10 hold baseline errors only
    edges = (db.timestamps == incident.start) | (db.timestamps == incident.end + 10)
    assert edges.sum() == 2 and (db.columns["req_server_error"][edges] <= 2).all()
    # only the outcome changed: as many requests, the same latency distribution
    assert total(db)[window].sum() == pytest.approx(total(base)[window].sum(), rel=0.01)
    assert share(db, "le_4", window) == pytest.approx(share(base, "le_4", window), abs=0.002)
    assert_identical_outside(baseline, result, incident)  # internal untouched, and databricks elsewhere


def test_latency_spike_slows_the_backend_without_failing_requests(baseline):
    incident, result = with_incident("latency-spike@2026-11-18T15:00Z+20m:backend=databricks,factor=3")
    db, base = result["databricks"], baseline["databricks"]
    window = window_of(db, incident)
    slow = 1 - share(db, "le_4", window)  # share of requests over 500 ms
    slow_before = 1 - share(base, "le_4", window)
    assert slow > 0.3 and slow > 100 * slow_before
    assert db.columns["lat_sum"][window].sum() / db.columns["lat_count"][window].sum() == pytest.approx(
        3 * base.columns["lat_sum"][window].sum() / base.columns["lat_count"][window].sum(), rel=0.02)
    assert bad(db)[window].sum() / total(db)[window].sum() < 1e-4
    assert_identical_outside(baseline, result, incident)


def test_auth_throttling_answers_429_to_the_rate_on_the_vendor(baseline):
    incident, result = with_incident("auth-throttling@2026-11-18T13:00Z+1h:rate=0.3")
    assert incident.backend == "databricks"  # the vendor backend by default
    db = result["databricks"]
    window = window_of(db, incident)
    assert share(db, "req_throttled", window) == pytest.approx(0.3, abs=0.005)
    assert share(db, "req_server_error", window) < 1e-4
    assert_identical_outside(baseline, result, incident)


def test_auth_throttling_answers_401_to_the_auth_rate_as_auth_errors(baseline):
    incident, result = with_incident("auth-throttling@2026-11-18T13:00Z+1h:rate=0.15,auth_rate=0.2")
    db = result["databricks"]
    window = window_of(db, incident)
    assert share(db, "req_auth_error", window) == pytest.approx(0.2, abs=0.005)
    assert share(db, "req_throttled", window) == pytest.approx(0.15, abs=0.005)
    assert db.columns["req_auth_error"][~window].sum() == 0  # none outside the incident
    assert_identical_outside(baseline, result, incident)


def test_gpu_capacity_loss_fails_and_slows_internal_requests(baseline):
    incident, result = with_incident("gpu-capacity-loss@2026-11-18T16:00Z+15m:rate=0.1,factor=2")
    assert incident.backend == "internal"
    it, base = result["internal"], baseline["internal"]
    window = window_of(it, incident)
    assert share(it, "req_timeout", window) == pytest.approx(0.08, abs=0.004)
    assert share(it, "req_server_error", window) == pytest.approx(0.02, abs=0.003)
    # timeouts wait past the last finite bucket: only +Inf counts them
    assert (it.columns["le_10"] - it.columns["le_9"])[window].sum() >= it.columns["req_timeout"][window].sum()
    assert share(it, "le_4", window) < share(base, "le_4", window) - 0.05
    assert_identical_outside(baseline, result, incident)


def test_several_incidents_each_touch_their_own_window(baseline):
    specs = ["vendor-5xx@2026-11-18T13:00Z+10m:rate=0.5", "gpu-capacity-loss@2026-11-18T17:00Z+10m"]
    incidents = [sim.parse_incident(s, BACKENDS) for s in specs]
    result = sim.simulate(START, END, seed=3, incidents=incidents)
    db_window = window_of(result["databricks"], incidents[0])
    assert share(result["databricks"], "req_server_error", db_window) == pytest.approx(0.5, abs=0.01)
    it_window = window_of(result["internal"], incidents[1])
    assert share(result["internal"], "req_timeout", it_window) == pytest.approx(0.08, abs=0.01)
    assert np.array_equal(result["databricks"].columns["req_ok"][~db_window],
                          baseline["databricks"].columns["req_ok"][~db_window])


def test_an_incident_outside_the_simulated_range_is_refused():
    incident = sim.parse_incident("vendor-5xx@2026-12-01T00:00Z+1h", BACKENDS)
    with pytest.raises(UsageError, match="outside the simulated range"):
        sim.simulate(START, END, incidents=[incident])


# ---------------------------------------------------------------------------------------------
# Incident SPECs


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("vendor-5xx@2026-11-20T14:00Z+30m:backend=databricks,rate=0.2",
         sim.Vendor5xx("databricks", parse_rfc3339("2026-11-20T14:00:00Z"), parse_rfc3339("2026-11-20T14:30:00Z"), 0.2)),
        ("vendor-5xx@2026-11-20T14:00:00+00:00+1h30m",
         sim.Vendor5xx("databricks", parse_rfc3339("2026-11-20T14:00:00Z"), parse_rfc3339("2026-11-20T15:30:00Z"))),
        ("latency-spike@2026-11-20T09:00-05:00+5m:backend=internal,factor=4",
         sim.LatencySpike("internal", parse_rfc3339("2026-11-20T14:00:00Z"), parse_rfc3339("2026-11-20T14:05:00Z"), 4.0)),
        ("auth-throttling@2026-11-20T14:00Z+10m:rate=1",
         sim.AuthThrottling("databricks", parse_rfc3339("2026-11-20T14:00:00Z"), parse_rfc3339("2026-11-20T14:10:00Z"), 1.0)),
        ("gpu-capacity-loss@end-2h+15m:rate=0.05,factor=2.5",
         sim.GpuCapacityLoss("internal", 1_800_000_000 - 7200, 1_800_000_000 - 7200 + 900, 0.05, 2.5)),
    ],
)
def test_incident_specs_parse_into_typed_incidents(spec, expected):
    incident = sim.parse_incident(spec, BACKENDS, end=1_800_000_000)
    assert incident == expected
    assert sim.parse_incident(incident.spec(), BACKENDS) == incident  # the canonical SPEC round-trips


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("vendor-5xx", "not of the form"),
        ("vendor-5xx@2026-11-20T14:00Z", "not of the form"),
        ("vendor-5xx@2026-11-20T14:00Z+30x", "not of the form"),
        ("vendor-500@2026-11-20T14:00Z+30m", "unknown kind 'vendor-500'"),
        ("vendor-5xx@yesterday+30m", "start 'yesterday'"),
        ("vendor-5xx@2026-11-20T14:00Z+0m", "duration must be positive"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:backend=vertex", "unknown backend 'vertex'"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:rate=1.5", "rate=1.5 must be in (0, 1]"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:rate=high", "rate='high' is not a number"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:factor=2", "unknown option 'factor'"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:rate", "not key=value"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:rate=0.1,rate=0.2", "given twice"),
        ("vendor-5xx@2026-11-20T14:00Z+30m:backend=internal", "applies to vendor backends"),
        ("gpu-capacity-loss@2026-11-20T14:00Z+30m:backend=databricks", "applies to internal backends"),
        ("latency-spike@2026-11-20T14:00Z+30m:factor=0.5", "factor=0.5 must be between 1 and 100"),
        ("latency-spike@end-1h+30m", "needs a simulated end"),
    ],
)
def test_bad_incident_specs_name_the_problem(spec, problem):
    with pytest.raises(UsageError) as info:
        sim.parse_incident(spec, BACKENDS)
    assert problem in str(info.value) and spec in str(info.value)


def test_the_default_backend_must_be_named_when_several_fit():
    backends = {"databricks": "vendor", "bedrock": "vendor", "internal": "internal"}
    with pytest.raises(UsageError, match="name the backend with backend=NAME"):
        sim.parse_incident("vendor-5xx@2026-11-20T14:00Z+30m", backends)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("databricks=90,internal=20", "sum to 100"),
        ("databricks=80,gpu=20", "unknown backend 'gpu'"),
        ("databricks=-10,internal=110", "between 0 and 100"),
        ("databricks:80", "is not BACKEND=PERCENT"),
        ("databricks=eighty,internal=20", "is not a number"),
        ("databricks=50,databricks=50", "given twice"),
    ],
)
def test_bad_splits_name_the_problem(text, problem):
    with pytest.raises(UsageError, match=re.escape(problem)):
        sim.check_split(sim.parse_split(text), BACKENDS)


# ---------------------------------------------------------------------------------------------
# Writers


@pytest.fixture(scope="module")
def small():
    start = parse_rfc3339("2026-11-18T15:00:00Z")
    incident = sim.parse_incident("vendor-5xx@2026-11-18T15:20Z+10m:rate=0.1", BACKENDS)
    return sim.simulate(start, start + HOUR, seed=21, peak_rps=40, incidents=[incident])


def test_write_to_store_holds_the_simulated_counts_and_replaces_on_rewrite(small, tmp_path):
    store = EmbeddedStore.open(tmp_path / "m.sqlite", create=True)
    sim.write_to_store(store, small)
    sim.write_to_store(store, small)  # replace: not doubled
    end = int(small["databricks"].timestamps[-1])
    for name, series in small.items():
        totals = store.totals(name, end)
        for column in schema.VALUE_COLUMNS:
            assert totals[column] == series.columns[column].sum(), (name, column)
    window = 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="server_error"}[3600s]))'
    assert store.query_many([window], end) == [small["databricks"].columns["req_server_error"].sum()]
    store.close()


def test_openmetrics_export_is_cumulative_from_an_explicit_zero(small):
    out = io.StringIO()
    samples = sim.export_openmetrics(small, out)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "# EOF"
    assert samples == sum(1 for line in lines if not line.startswith("#"))
    # 2 backends x 27 series (6 outcomes, 11 buckets, count, sum, 3 tokens, 5 probe outcomes) x (360 steps + the zero)
    assert samples == 2 * 27 * 361
    types = [line for line in lines if line.startswith("# TYPE")]
    assert types == ["# TYPE llm_proxy_requests counter", "# TYPE llm_proxy_request_duration_seconds histogram",
                     "# TYPE llm_proxy_prompt_tokens counter", "# TYPE llm_proxy_completion_tokens counter",
                     "# TYPE llm_proxy_suggestions counter", "# TYPE llm_proxy_probes counter"]
    first = int(small["internal"].timestamps[0])
    ok = [line for line in lines if line.startswith('llm_proxy_requests_total{backend="internal",outcome="ok"}')]
    assert ok[0].split()[1:] == ["0", str(first - 10)]
    assert ok[1].split()[1:] == [str(int(small["internal"].columns["req_ok"][0])), str(first)]
    assert int(ok[-1].split()[1]) == small["internal"].columns["req_ok"].sum()
    les = {m.group(1) for m in re.finditer(r'le="([^"]*)"', out.getvalue())}
    assert les == set(schema.LE_LABELS)


def test_openmetrics_export_ingests_back_to_identical_store_contents(small, tmp_path, cli, store_path, store_rows):
    direct = tmp_path / "direct.sqlite"
    store = EmbeddedStore.open(direct, create=True)
    sim.write_to_store(store, small)
    store.close()
    exported = tmp_path / "export.om"
    sim.export_openmetrics(small, str(exported))
    result = cli("metrics", "ingest", exported)
    assert result.exit_code == 0, result.stderr
    assert store_rows(store_path) == store_rows(direct)
    assert len(store_rows(direct)) == 2 * 360


def test_promtool_backfills_the_export_with_the_same_values(small, tmp_path):
    promtool = require_binary("promtool")
    exported = tmp_path / "export.om"
    sim.export_openmetrics(small, str(exported))
    tsdb = tmp_path / "tsdb"
    run = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(exported), str(tsdb)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    (tsdb / "wal").mkdir(exist_ok=True)  # `promtool tsdb dump` wants a WAL directory
    dump = subprocess.run([promtool, "tsdb", "dump", str(tsdb)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr
    series: dict[str, list[tuple[int, float]]] = {}
    for line in dump.stdout.splitlines():
        labels, value, ts = line.rsplit(" ", 2)
        series.setdefault(labels, []).append((int(ts), float(value)))
    assert len(series) == 2 * 27  # 22 request series and 5 probe outcomes per backend
    first = int(small["databricks"].timestamps[0])
    key = '{__name__="llm_proxy_requests_total", backend="databricks", outcome="server_error"}'
    expected = np.concatenate(([0], np.cumsum(small["databricks"].columns["req_server_error"])))
    assert [t for t, _ in series[key]] == [1000 * (first - 10 + 10 * i) for i in range(361)]
    assert [v for _, v in series[key]] == pytest.approx(expected.tolist(), rel=1e-6)
    bucket = '{__name__="llm_proxy_request_duration_seconds_bucket", backend="internal", le="1.0"}'
    assert series[bucket][-1][1] == pytest.approx(small["internal"].columns["le_6"].sum(), rel=1e-6)
    probes = '{__name__="llm_proxy_probes_total", backend="databricks", outcome="server_error"}'
    assert series[probes][-1][1] == small["databricks"].columns["probe_server_error"].sum() > 0  # the 5xx burst


# ---------------------------------------------------------------------------------------------
# CLI: opsctl sim generate


def test_sim_generate_writes_the_store_and_summarises(cli, store_path, store_columns, store_rows, tmp_path):
    om = tmp_path / "out.om"
    result = cli("sim", "generate", "--days", "0.05", "--end", "2026-11-18T15:00:00Z", "--seed", "4",
                    "--incident", "vendor-5xx@end-30m+10m:rate=0.3", "--openmetrics-out", om, "-o", "json")
    assert result.exit_code == 0, result.stderr
    summary = parse_json(result)
    assert summary["start"] == "2026-11-18T13:48:00Z" and summary["end"] == "2026-11-18T15:00:00Z"
    assert summary["steps"] == 432
    assert [i["spec"] for i in summary["incidents"]] == [
        "vendor-5xx@2026-11-18T14:30:00Z+10m:backend=databricks,rate=0.3"]
    for entry in summary["backends"]:
        steps = store_columns(store_path, entry["backend"])
        assert len(steps) == 432
        assert entry["requests"] == sum(sum(row[c] for c in schema.REQUEST_COLUMNS) for row in steps.values())
        assert entry["outcomes"]["server_error"] == sum(row["req_server_error"] for row in steps.values())
    assert om.read_text().endswith("# EOF\n")
    assert "simulated databricks" in result.stderr  # progress on stderr

    before = store_rows(store_path)
    again = cli("sim", "generate", "--days", "0.05", "--end", "2026-11-18T15:00:00Z", "--seed", "4",
                   "--incident", "vendor-5xx@end-30m+10m:rate=0.3")
    assert again.exit_code == 0, again.stderr
    assert store_rows(store_path) == before  # the range is replaced, not added to

    info = cli("metrics", "info", "-o", "json")
    assert info.exit_code == 0
    held = {b["backend"]: b for b in parse_json(info)["backends"]}
    assert {name: held[name]["requests"] for name in held} == {
        b["backend"]: b["requests"] for b in summary["backends"]}


def test_sim_generate_with_a_failover_split_writes_zero_rows(cli, store_columns, store_path):
    result = cli("sim", "generate", "--days", "0.01", "--end", "2026-11-18T15:00:00Z", "--split", "internal=100")
    assert result.exit_code == 0, result.stderr
    rows = store_columns(store_path, "databricks")
    assert len(rows) == 86 and all(row["lat_count"] == 0 for row in rows.values())


@pytest.mark.parametrize(
    "args, problem",
    [
        (["--split", "databricks=90,internal=20"], "sum to 100"),
        (["--split", "databricks=80,vertex=20"], "unknown backend 'vertex'"),
        (["--incident", "vendor-5xx@2026-11-18T14:00Z+30m:backend=vertex"], "unknown backend 'vertex'"),
        (["--incident", "meteor@2026-11-18T14:00Z+30m"], "unknown kind 'meteor'"),
        (["--incident", "vendor-5xx@2025-01-01T00:00Z+30m"], "outside the simulated range"),
        (["--end", "tomorrow"], "--end"),
        (["--days", "0"], "--days"),
    ],
)
def test_sim_generate_rejects_bad_input_with_exit_2_and_writes_nothing(cli, store_path, args, problem):
    result = cli("sim", "generate", "--days", "0.01", "--end", "2026-11-18T15:00:00Z", *args)
    assert result.exit_code == 2
    assert problem in result.stderr
    assert not store_path.exists()


def test_sim_generate_dry_run_writes_nothing(cli, store_path):
    result = cli("sim", "generate", "--days", "0.01", "--end", "2026-11-18T15:00:00Z", "--dry-run", "-o", "json")
    assert result.exit_code == 0 and parse_json(result)["store"] is None
    assert not store_path.exists()


def test_sim_help_documents_the_incident_spec_without_importing_numpy():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = ("import sys; from opsctl.cli.main import main\n"
            "try:\n main(['sim', 'generate', '--help'])\nexcept SystemExit: pass\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    for text in ("KIND@START+DURATION", "vendor-5xx", "latency-spike", "auth-throttling", "gpu-capacity-loss"):
        assert text in run.stdout


# ---------------------------------------------------------------------------------------------
# Suggestions and the quality regression


def test_suggestions_average_three_per_answer_and_leave_the_other_columns_alone():
    start = parse_rfc3339("2026-11-18T14:00:00Z")
    result = sim.simulate(start, start + 2 * HOUR, backends=BACKENDS, peak_rps=20_000, seed=3)
    for series in result.values():
        answers = series.columns["req_ok"].sum()
        # Poisson(3 x answers): the mean is within 6 standard deviations, sqrt(3 x answers)
        assert abs(series.columns["suggestions"].sum() - 3.0 * answers) < 6 * math.sqrt(3.0 * answers)
        assert series.columns["suggestions"].dtype.kind == "i"


def test_a_quality_regression_shifts_prompt_tokens_and_cuts_suggestions_inside_its_window_only():
    start = parse_rfc3339("2026-11-18T14:00:00Z")
    spec = "quality-regression@2026-11-18T15:00:00Z+1h:prompt_shift=-1,rate=0.4,suggestions=0.5,completion=0.8"
    incident = sim.parse_incident(spec, BACKENDS)
    clean = sim.simulate(start, start + 3 * HOUR, backends=BACKENDS, peak_rps=200_000, seed=5)
    hit = sim.simulate(start, start + 3 * HOUR, backends=BACKENDS, peak_rps=200_000, seed=5, incidents=[incident])
    ts = hit["databricks"].timestamps
    inside = (ts > incident.start) & (ts <= incident.end)
    for column in schema.VALUE_COLUMNS:  # untouched outside the window, and on the other backend
        np.testing.assert_array_equal(hit["databricks"].columns[column][~inside],
                                      clean["databricks"].columns[column][~inside])
        np.testing.assert_array_equal(hit["internal"].columns[column], clean["internal"].columns[column])
    c = {k: v[inside].sum() for k, v in hit["databricks"].columns.items()}
    requests = sum(c[col] for col in schema.REQUEST_COLUMNS)
    answers = c["req_ok"]
    # Expected figures from the model's constants: 450 - 1 prompt tokens per request; changed answers
    # (40%) hold half the suggestions: 3 x (0.6 + 0.4 x 0.5) = 2.4; completion 180 x (0.6 + 0.4 x 0.8) = 165.6.
    assert abs(c["prompt_tokens"] / requests - 449.0) < 6 * 350 / math.sqrt(requests)
    assert abs(c["suggestions"] / answers - 2.4) < 6 * math.sqrt(2.4 / answers)
    assert abs(c["completion_tokens"] / answers - 165.6) < 6 * 140 / math.sqrt(answers)
    assert bad(hit["databricks"])[inside].sum() < 1e-3 * requests  # nothing fails


@pytest.mark.parametrize("spec, problem", [
    ("quality-regression@end-1h+10m:prompt_shift=0.5", "whole number of tokens"),
    ("quality-regression@end-1h+10m:suggestions=-1", "between 0 and 10"),
    ("quality-regression@end-1h+10m:rate=2", "must be in (0, 1]"),
])
def test_bad_quality_regression_options_are_usage_errors(spec, problem):
    with pytest.raises(UsageError, match=re.escape(problem)):
        sim.parse_incident(spec, BACKENDS, end=parse_rfc3339("2026-11-18T15:00:00Z"))


def test_a_store_written_before_suggestions_is_migrated_when_opened(tmp_path):
    import sqlite3

    old_cols = [c for c in schema.VALUE_COLUMNS if c != "suggestions"]
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(str(path))
    cols = ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in old_cols + [f"c_{c}" for c in old_cols])
    conn.execute(f"CREATE TABLE steps (backend TEXT NOT NULL, ts INTEGER NOT NULL, {cols},"
                 " PRIMARY KEY (backend, ts)) WITHOUT ROWID")
    conn.execute("INSERT INTO steps (backend, ts, req_ok, c_req_ok) VALUES ('internal', 1000, 5, 5)")
    conn.commit()
    conn.close()
    store = EmbeddedStore.open(path, create=False)
    assert store.totals("internal", 1000)["suggestions"] == 0.0 and store.totals("internal", 1000)["req_ok"] == 5
    store.write_steps("internal", [1010], {"req_ok": [2], "suggestions": [7]})
    q = 'sum(increase(llm_proxy_suggestions_total{backend="internal"}[20s]))'
    assert store.query_many([q, 'sum(increase(llm_proxy_requests_total{outcome="ok"}[20s]))'], 1010) == [7.0, 7.0]
    store.close()
    assert EmbeddedStore.open(path, create=False).totals("internal", 1010)["suggestions"] == 7.0  # reopens as is
