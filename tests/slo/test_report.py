"""`opsctl slo report`: figures match what the raw counts say, on the embedded store and on a real
Prometheus backfilled with the same data, and every kind of missing data is `unknown`, never ok."""

from __future__ import annotations

import json

from datetime import datetime, timezone

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import write_config
from tests.slo import data as d

END = 1_795_000_000  # on the 10 s grid
DAYS = 4
STEPS = DAYS * 8640
PERIOD = 28 * 86400


def rfc3339(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


AT = rfc3339(END)
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200}


def scenario() -> dict[str, d.Traffic]:
    """databricks: no errors, then a 2% 5xx burst over the last 40 minutes (pages);
    internal: a slow hour two days ago at the 500 ms bucket (latency budget, no availability hit)."""
    last = STEPS - 1
    return {
        "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(last - 239, last, 0.02)]),
        "internal": d.make_traffic(END, STEPS, 2000, slow=[(STEPS - 8640 * 2, STEPS - 8640 * 2 + 359)]),
    }


def expected(data: dict[str, d.Traffic], backends: list[str], kind: str, at: int) -> dict:
    """SLI, budget left and burn rates straight from the counts."""
    goal = {"availability": 0.9999, "latency-500ms": 0.99}[kind]

    def counts(seconds):
        good = valid = 0
        for b in backends:
            t = data[b]
            if kind == "availability":
                good += d.window_sum(t, t.requests - t.server_errors, at, seconds)
            else:
                good += d.window_sum(t, t.le[4], at, seconds)
            valid += d.window_sum(t, t.requests, at, seconds)
        return good, valid

    good, valid = counts(PERIOD)
    burn = {}
    for name, seconds in WINDOWS.items():
        g, v = counts(seconds)
        burn[name] = ((v - g) / v) / (1 - goal)
    return {"sli": good / valid, "budget": 1 - ((valid - good) / valid) / (1 - goal), "burn": burn, "events": valid}


@pytest.fixture(scope="module")
def traffic():
    return scenario()


@pytest.fixture
def embedded_config(tmp_path, traffic):
    cfg = write_config(tmp_path)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic)
    store.close()
    return cfg


def by_name(rows):
    return {r["name"]: r for r in rows}


def check_against_counts(rows, traffic, at, rel=1e-9):
    cases = [
        ("llm-inference-databricks-availability", ["databricks"], "availability"),
        ("llm-inference-internal-availability", ["internal"], "availability"),
        ("llm-inference-service-availability", ["databricks", "internal"], "availability"),
        ("llm-inference-internal-latency-500ms", ["internal"], "latency-500ms"),
        ("llm-inference-service-latency-500ms", ["databricks", "internal"], "latency-500ms"),
    ]
    for name, backends, kind in cases:
        want = expected(traffic, backends, kind, at)
        got = rows[name]
        assert got["events"] == pytest.approx(want["events"], rel=rel), name
        assert got["sli"] == pytest.approx(want["sli"], rel=rel), name
        assert got["error_budget_remaining"] == pytest.approx(want["budget"], rel=max(rel, 1e-9), abs=1e-9), name
        for window, value in want["burn"].items():
            assert got["burn_rate"][window] == pytest.approx(value, rel=rel, abs=1e-9), (name, window)


def test_embedded_report_matches_the_raw_counts(opsctl, embedded_config, traffic):
    result = opsctl("--config", str(embedded_config), "slo", "report", "-o", "json")
    assert result.exit_code == 0, result.output
    rows = by_name(json.loads(result.stdout))
    assert len(rows) == 9
    check_against_counts(rows, traffic, END)


def test_fast_vendor_burn_pages_only_the_vendor_and_service_availability(opsctl, embedded_config):
    rows = by_name(json.loads(opsctl("--config", str(embedded_config), "slo", "report", "-o", "json").stdout))
    # 2% errors over 40 minutes = 200x the 0.01% budget rate: 5m, 30m and 1h burn above 13.44x.
    assert rows["llm-inference-databricks-availability"]["status"] == "page"
    assert "page: 1h/5m burn > 13.44x" in rows["llm-inference-databricks-availability"]["alerts"]
    assert rows["llm-inference-service-availability"]["status"] == "page"
    assert rows["llm-inference-internal-availability"]["status"] == "ok"
    assert rows["llm-inference-internal-latency-1s"]["status"] == "ok"


def test_slow_hour_two_days_ago_leaves_latency_ok_now_but_spends_budget(opsctl, embedded_config, traffic):
    rows = by_name(json.loads(opsctl("--config", str(embedded_config), "slo", "report", "-o", "json").stdout))
    latency = rows["llm-inference-internal-latency-500ms"]
    # One hour at 40% slow requests against a 1% budget, over 4 days of traffic.
    assert latency["error_budget_remaining"] < 0.5
    assert latency["burn_rate"]["5m"] == pytest.approx((1 - 0.995) / 0.01)


def test_fail_on_page_exits_1_and_names_the_slo(opsctl, embedded_config):
    result = opsctl("--config", str(embedded_config), "slo", "report", "--fail-on", "page")
    assert result.exit_code == 1
    assert "llm-inference-databricks-availability" in result.stderr


def test_at_before_the_incident_reports_ok(opsctl, embedded_config):
    at = rfc3339(END - 6 * 3600)  # inside the data, hours before the burst
    rows = by_name(json.loads(
        opsctl("--config", str(embedded_config), "slo", "report", "--at", at, "-o", "json").stdout))
    assert rows["llm-inference-databricks-availability"]["status"] == "ok"


def test_table_shows_budget_worst_burn_and_status(opsctl, embedded_config):
    result = opsctl("--config", str(embedded_config), "slo", "report")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("SLOs at ") and lines[0].endswith(", period 28d")  # the instant and the period
    header = lines[1]
    for column in ("SLO", "BUDGET LEFT", "WORST BURN", "STATUS"):
        assert column in header
    assert "PAGE" in result.stdout


def test_label_typo_matching_nothing_is_unknown_and_exit_3(opsctl, tmp_path, embedded_config):
    slo_dir = tmp_path / "slos"
    slo_dir.mkdir()
    text = (d.__file__ and open(write_config.__globals__["REPO"] / "slos" / "databricks-availability.yaml").read())
    (slo_dir / "typo.yaml").write_text(text.replace('backend="databricks"', 'backnd="databricks"'))
    result = opsctl("--config", str(embedded_config), "slo", "report", str(slo_dir), "-o", "json")
    assert result.exit_code == 3
    row = json.loads(result.stdout)[0]
    assert row["status"] == "unknown"
    assert "matched no series" in row["reason"] or "no data" in row["reason"]


def test_data_that_stopped_is_unknown_not_ok(opsctl, embedded_config):
    later = rfc3339(END + 86400)  # a day after the newest step
    result = opsctl("--config", str(embedded_config), "slo", "report", "--at", later, "-o", "json")
    assert result.exit_code == 3
    assert {r["status"] for r in json.loads(result.stdout)} == {"unknown"}


def test_empty_embedded_store_is_no_data_with_a_hint(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "slo", "report")
    assert result.exit_code == 3
    assert "opsctl sim generate" in result.stderr


def test_bad_at_is_a_usage_error(opsctl, embedded_config):
    result = opsctl("--config", str(embedded_config), "slo", "report", "--at", "yesterday")
    assert result.exit_code == 2
    assert "--at" in result.stderr


# -- a real Prometheus holding the same data ------------------------------------------------------


@pytest.fixture(scope="module")
def prometheus_with_traffic(tmp_path_factory, traffic):
    from tests.conftest import PrometheusServer

    workdir = tmp_path_factory.mktemp("prom")
    om = workdir / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    server = PrometheusServer(workdir, openmetrics=om)
    yield server
    server.stop()


@pytest.mark.prometheus
def test_prometheus_report_matches_the_raw_counts(opsctl, tmp_path, prometheus_with_traffic, traffic):
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", prometheus_with_traffic.url,
                    "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    # Windows inside the data are exact; the 28-day period starts before the data, where
    # Prometheus' increase() is exact too because each series starts at an explicit 0 sample.
    check_against_counts(by_name(json.loads(result.stdout)), traffic, END, rel=1e-6)


@pytest.mark.prometheus
def test_embedded_and_prometheus_give_the_same_report(opsctl, tmp_path, embedded_config, prometheus_with_traffic):
    at = AT
    emb = json.loads(opsctl("--config", str(embedded_config), "slo", "report", "--at", at, "-o", "json").stdout)
    prom = json.loads(opsctl("--config", str(embedded_config), "slo", "report", "--at", at,
                             "--prometheus-url", prometheus_with_traffic.url, "-o", "json").stdout)
    for e, p in zip(emb, prom):
        assert e["name"] == p["name"]
        assert e["status"] == p["status"], e["name"]
        assert e["events"] == pytest.approx(p["events"], rel=1e-6)
        assert e["sli"] == pytest.approx(p["sli"], rel=1e-9)
        for w in WINDOWS:
            assert e["burn_rate"][w] == pytest.approx(p["burn_rate"][w], rel=1e-6, abs=1e-9), (e["name"], w)


@pytest.mark.prometheus
def test_prometheus_down_fails_fast_with_exit_3_and_the_url(opsctl, tmp_path):
    from tests.conftest import free_port
    import time

    url = f"http://127.0.0.1:{free_port()}"
    cfg = write_config(tmp_path)
    started = time.monotonic()
    result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", url)
    assert result.exit_code == 3
    assert url in result.stderr and "connection refused" in result.stderr
    assert time.monotonic() - started < 10


@pytest.mark.prometheus
def test_prometheus_returning_no_series_is_unknown(opsctl, tmp_path, prometheus_factory):
    server = prometheus_factory()
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url, "-o", "json")
    assert result.exit_code == 3
    assert {r["status"] for r in json.loads(result.stdout)} == {"unknown"}


def test_prometheus_slow_past_the_timeout_is_exit_3_within_the_timeout(opsctl, tmp_path):
    import time

    from tests.fakes.slow_http import SlowServer

    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("timeout: 5,", "timeout: 1,"))
    with SlowServer(delay=8) as server:
        started = time.monotonic()
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url)
        elapsed = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert server.url in result.stderr and "within 1s" in result.stderr
    assert elapsed < 6


def test_prometheus_error_answer_is_not_reported_as_data(opsctl, tmp_path):
    from tests.fakes.slow_http import SlowServer

    cfg = write_config(tmp_path)
    with SlowServer(delay=0, status=503, body=b"overloaded") as server:
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url)
    assert result.exit_code == 3
    assert "503" in result.stderr
