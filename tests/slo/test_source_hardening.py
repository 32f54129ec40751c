"""A slow, broken or misaddressed metric source ends in a documented exit code and one line, fast:
an overall deadline on every call (the probe included), a guard that waits only briefly, and
no traceback for error answers, non-JSON pages, refused queries, bad URLs or undecodable files."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import write_config
from tests.fakes.slow_http import SlowServer, TrickleServer


def no_traceback(result):
    assert "Traceback" not in result.output, result.output


def test_a_prometheus_trickling_its_answer_cannot_hold_a_report_past_the_probe_bound(opsctl, tmp_path):
    # Headers at once, then a byte every 0.5 s: no single read ever times out.
    cfg = write_config(tmp_path)
    with TrickleServer(interval=0.5) as server:
        started = time.monotonic()
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url)
        elapsed = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert "did not answer within 5s" in result.stderr
    no_traceback(result)
    assert elapsed < 25  # the probe's 5 s bound plus start-up; the whole answer would take ~30 s


def test_queries_trickling_past_the_report_deadline_end_at_the_deadline(tmp_path):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.errors import SourceUnavailable
    from opsctl.metrics.prometheus import PrometheusSource

    with TrickleServer(interval=0.5) as server:
        source = PrometheusSource(Settings(url=server.url, timeout=5, report_deadline=2))
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="within 2s"):
            source.query_many(["sum(increase(x[5m]))"] * 3, time.time())
        assert time.monotonic() - started < 10


def test_an_emergency_failover_never_waits_on_a_trickling_prometheus(tmp_path):
    from tests.conftest import run_opsctl
    from tests.traffic.conftest import traffic_yaml

    with TrickleServer(interval=0.5) as server:
        cfg = write_config(tmp_path, traffic_yaml(), source="prometheus", prometheus_url=server.url)
        cfg.write_text(cfg.read_text().replace("report_deadline: 30}", "report_deadline: 30, guard_deadline: 2}"))
        started = time.monotonic()
        result = run_opsctl("--config", str(cfg), "traffic", "failover", "--from", "databricks",
                            "--incident", "INC-7", "--reason", "vendor 5xx", "--yes", "-o", "json",
                            env={"OPSCTL_ACTOR": "tester"})
        elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert guards["budget"]["overridden"] and "within 2s" in guards["budget"]["message"]
    assert elapsed < 25  # a 2 s bound on metrics, not the 30 s the answer takes


@pytest.mark.parametrize("body, expected", [
    (b'{"status":"error","errorType":"internal","error":"boom"}', "boom"),
    (b'{"status":"success"}', "without data"),
    (b"<html><body>Sign in</body></html>", "not Prometheus' JSON API"),
    (b"[1, 2]", "not Prometheus' API"),
])
def test_an_error_or_foreign_answer_with_http_200_is_no_data_in_one_line(opsctl, tmp_path, body, expected):
    cfg = write_config(tmp_path)
    with SlowServer(delay=0, status=200, body=body) as server:
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url)
    assert result.exit_code == 3, result.output
    assert expected in result.stderr and "cannot reach" not in result.stderr
    no_traceback(result)


def test_error_answers_during_queries_are_no_data_not_a_key_error(tmp_path):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.errors import SourceUnavailable
    from opsctl.metrics.prometheus import PrometheusSource

    with SlowServer(delay=0, body=b'{"status":"error","errorType":"execution","error":"query failed"}') as server:
        source = PrometheusSource(Settings(url=server.url))
        with pytest.raises(SourceUnavailable, match="query failed") as info:
            source.query_many(["sum(increase(x[5m]))"], time.time())
    assert info.value.exit_code == 3


@pytest.mark.parametrize("url", ["not-a-url", "ftp://x", "http://", "http://host:notaport"])
def test_a_bad_prometheus_url_is_a_usage_error(opsctl, tmp_path, url):
    cfg = write_config(tmp_path)
    result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", url)
    assert result.exit_code == 2, result.output
    assert "--prometheus-url" in result.stderr
    no_traceback(result)


def test_a_non_utf8_slo_file_is_listed_with_every_other_problem(opsctl, tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "a-latin1.yaml").write_bytes("# caf\xe9\napiVersion: x\n".encode("latin-1"))
    (slos / "b-bad.yaml").write_text("apiVersion: sre.google.com/v2\nkind: Nope\n")
    cfg = write_config(tmp_path, slo_dir=slos)
    result = opsctl("--config", str(cfg), "slo", "validate")
    assert result.exit_code == 2, result.output
    assert "a-latin1.yaml: SLO file is not UTF-8 text (byte 5, line 1" in result.stderr
    assert "b-bad.yaml: kind" in result.stderr
    no_traceback(result)


def test_a_non_utf8_config_file_is_a_usage_error(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_bytes(cfg.read_bytes() + "# gr\xfc\xdfe\n".encode("latin-1"))
    result = opsctl("--config", str(cfg), "slo", "validate")
    assert result.exit_code == 2, result.output
    assert "not UTF-8" in result.stderr
    no_traceback(result)


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_query_refused_as_too_many_samples_is_exit_3_with_a_hint(opsctl, tmp_path):
    from tests.conftest import PrometheusServer
    from tests.slo import data as d

    end = 1_795_000_000
    traffic = {"internal": d.make_traffic(end, 8640, 2000)}
    om = tmp_path / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    (tmp_path / "prom").mkdir()
    server = PrometheusServer(tmp_path / "prom", openmetrics=om, extra_args=["--query.max-samples=5000"])
    try:
        cfg = write_config(tmp_path)
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url,
                        "--at", "2026-11-18T11:06:40Z")
    finally:
        server.stop()
    assert result.exit_code == 3, result.output
    assert "too many samples" in result.stderr or "max-samples" in result.stderr
    assert "recording rules" in result.stderr
    no_traceback(result)
