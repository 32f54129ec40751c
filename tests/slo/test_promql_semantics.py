"""PromQL as Prometheus means it: every selector reaches Prometheus with its own matchers, and the
embedded store matches label regexes with RE2, so both sources agree on RE2-only syntax."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.conftest import write_config
from tests.fakes.loopback import LoopbackServer, Response
from tests.slo import data as d

END = 1_795_000_000
STEPS = 8640  # one day
AT = "2026-11-18T11:06:40Z"  # END

RE2_SLO = """\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata:
  name: re2-classes
  labels: {backend: all}
spec:
  backend: prometheus
  method: good_bad_ratio
  goal: 0.999
  service_level_indicator:
    filter_good: 'llm_proxy_requests_total{backend=~"\\\\p{L}+", outcome=~"[[:lower:]]{2}"}'
    filter_valid: 'llm_proxy_requests_total{backend=~"[[:alpha:]]+"}'
"""


@pytest.fixture(scope="module")
def traffic():
    return {
        "databricks": d.make_traffic(END, STEPS, 8000, incidents=[(STEPS - 100, STEPS - 1, 0.01)]),
        "internal": d.make_traffic(END, STEPS, 2000, error_share=0.001),
    }


@pytest.fixture
def slo_dir(tmp_path):
    path = tmp_path / "slos"
    path.mkdir()
    (path / "re2.yaml").write_text(RE2_SLO)
    return path


def expected_sli(traffic, seconds):
    at = END
    good = sum(d.window_sum(t, t.requests - t.server_errors, at, seconds) for t in traffic.values())
    valid = sum(d.window_sum(t, t.requests, at, seconds) for t in traffic.values())
    return good / valid, valid


def test_embedded_store_matches_posix_classes_and_unicode_properties_as_re2(opsctl, tmp_path, slo_dir, traffic):
    cfg = write_config(tmp_path, slo_dir=slo_dir)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, traffic)
    store.close()
    result = opsctl("--config", str(cfg), "slo", "report", "--at", AT, "-o", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    # Only "ok" has two lowercase letters; the period starts before the data, so it holds the whole day.
    sli, valid = expected_sli(traffic, 28 * 86400)
    assert row["events"] == valid
    assert row["sli"] == pytest.approx(sli, rel=1e-12)


def test_a_backreference_re2_cannot_match_is_refused_with_the_file_and_key(opsctl, tmp_path, slo_dir):
    (slo_dir / "re2.yaml").write_text(RE2_SLO.replace('outcome=~"[[:lower:]]{2}"', 'outcome=~"(o)\\\\1"'))
    cfg = write_config(tmp_path, slo_dir=slo_dir)
    result = opsctl("--config", str(cfg), "slo", "validate")
    assert result.exit_code == 2
    assert "re2.yaml: spec.service_level_indicator.filter_good" in result.stderr
    assert "RE2" in result.stderr and "Traceback" not in result.output


@pytest.mark.prometheus
@pytest.mark.slow
def test_prometheus_and_the_embedded_store_agree_on_re2_syntax(opsctl, tmp_path, slo_dir, traffic):
    from tests.conftest import PrometheusServer

    om = tmp_path / "traffic.om"
    om.write_text(d.openmetrics(traffic))
    (tmp_path / "prom").mkdir()
    server = PrometheusServer(tmp_path / "prom", openmetrics=om)
    try:
        cfg = write_config(tmp_path, slo_dir=slo_dir)
        store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
        d.write(store, traffic)
        store.close()
        emb = opsctl("--config", str(cfg), "slo", "report", "--at", AT, "-o", "json")
        prom = opsctl("--config", str(cfg), "slo", "report", "--at", AT, "--prometheus-url", server.url, "-o", "json")
    finally:
        server.stop()
    assert emb.exit_code == 0 and prom.exit_code == 0, emb.output + prom.output
    [e], [p] = json.loads(emb.stdout), json.loads(prom.stdout)
    sli, valid = expected_sli(traffic, 28 * 86400)
    assert p["events"] == pytest.approx(valid, rel=1e-9)
    assert p["sli"] == pytest.approx(sli, rel=1e-9)
    assert e["sli"] == pytest.approx(p["sli"], rel=1e-9)
    for window, value in p["burn_rate"].items():
        assert e["burn_rate"][window] == pytest.approx(value, rel=1e-6, abs=1e-9), window


class QueryRecorder(LoopbackServer):
    """A loopback Prometheus API that records every query and answers an empty vector."""

    def __init__(self):
        super().__init__()
        self.queries: list[str] = []

    def handle(self, request):
        if request.method != "POST":
            return Response(200, {"status": "success", "data": {"version": "2.42.0"}})
        self.queries.extend(urllib.parse.parse_qs(request.body.decode()).get("query", []))
        return Response(200, {"status": "success", "data": {"resultType": "vector", "result": []}})


def test_every_selector_reaches_prometheus_with_its_own_matchers(opsctl, tmp_path):
    from opsctl.metrics.promql import parse_selector
    from tests.conftest import REPO

    cfg = write_config(tmp_path)
    with QueryRecorder() as recorder:
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", recorder.url, "-o", "json")
    assert result.exit_code == 3, result.output  # nothing recorded: unknown
    sent = "\n".join(recorder.queries)
    assert "sum by" not in sent, "a query was widened to a whole metric"
    import yaml

    for path in sorted((REPO / "slos").glob("*.yaml")):
        sli = yaml.safe_load(path.read_text())["spec"]["service_level_indicator"]
        for key in ("filter_good", "filter_valid"):
            selector = sli[key]
            parse_selector(selector)
            assert f"sum(increase({selector}[" in sent, (path.name, key)


class HeaderRecorder(QueryRecorder):
    """QueryRecorder that also gives each query request's headers and form."""

    def query_requests(self) -> list[tuple[dict, dict]]:
        with self.lock:
            return [(r.headers, urllib.parse.parse_qs(r.body.decode())) for r in self.requests if r.method == "POST"]


def test_thanos_and_mimir_settings_reach_every_query(opsctl, tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace(
        "timeout: 5,", "timeout: 5, tenant: team-llm, dedup: true, partial_response: false,"
                       " auth: {bearer_token: {env: PROM_TOKEN}},"))
    with HeaderRecorder() as recorder:
        result = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", recorder.url, "-o", "json",
                        env={"PROM_TOKEN": "s3cr3t-token"})
    assert result.exit_code == 3, result.output  # the fake holds no series
    assert recorder.query_requests()
    for headers, form in recorder.query_requests():
        assert headers["x-scope-orgid"] == "team-llm"
        assert headers["authorization"] == "Bearer s3cr3t-token"
        assert form["dedup"] == ["true"] and form["partial_response"] == ["false"]
    assert "s3cr3t-token" not in result.output


@pytest.fixture(scope="module")
def tls_ca():
    import trustme

    return trustme.CA()


def test_a_private_ca_bundle_is_trusted_and_without_it_the_certificate_is_a_usage_error(opsctl, tmp_path, tls_ca):
    from tests.fakes.https import FakeHTTPSServer

    class FakePrometheus(FakeHTTPSServer):
        def route(self, req):
            if req.path.endswith("/status/buildinfo"):
                return 200, {"status": "success", "data": {"version": "2.42.0"}}, {}
            return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}, {}

    bundle = tmp_path / "ca.pem"
    tls_ca.cert_pem.write_to_path(str(bundle))
    with FakePrometheus(tls_ca) as server:
        cfg = write_config(tmp_path)
        untrusted = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url)
        cfg.write_text(cfg.read_text().replace("timeout: 5,", f'timeout: 5, ca_file: "{bundle}",'))
        trusted = opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url, "-o", "json")
    assert untrusted.exit_code == 2 and "not trusted" in untrusted.stderr and "ca_file" in untrusted.stderr
    assert trusted.exit_code == 3, trusted.output  # reached, trusted, and holding no series
    assert any(r.path == "/api/v1/query" for r in server.requests)
