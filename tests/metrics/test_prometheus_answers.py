"""What Prometheus answers is read for what it is: `warnings` (a partial answer) are shown, and are
no data for a guard; NaN and +/-Inf are no data with a one-line error, never a traceback and never
"healthy"; a query answering several series where one number is wanted is refused, never one of
them kept at random.

The answers are served by a loopback fake speaking Prometheus' HTTP API (the union opsctl sends is
answered per tagged query), because a real Prometheus cannot be made to warn or to answer +Inf on
demand for every query."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

import pytest

from tests.conftest import run_opsctl, write_config
from tests.fakes.loopback import LoopbackServer, Request, Response
from tests.traffic.conftest import traffic_yaml

AT = "2026-11-18T11:06:40Z"
TAG = re.compile(r'"opsctl_query", "(\d+)"')


class AnsweringPrometheus(LoopbackServer):
    """Answers the probe; every tagged query of a union with `value` (as Prometheus spells it),
    `copies` series each, and `warnings` beside the data; timestamps queries with now."""

    def __init__(self, value: str = "1000", *, copies: int = 1, warnings: list[str] | None = None,
                 copied: str = "", newest: float | None = None):
        super().__init__()
        self.value, self.copies, self.warnings, self.copied = value, copies, warnings, copied
        self.newest = newest  # the newest sample's time, for timestamp() queries (default: now)
        self.queries: list[str] = []

    def handle(self, request: Request) -> Response:
        if request.path.startswith("/api/v1/status/buildinfo"):
            return Response(200, {"status": "success", "data": {"version": "2.42.0"}})
        query = urllib.parse.parse_qs(request.body.decode())["query"][0]
        self.queries.append(query)
        result = []
        for part in query.split(" or label_replace("):
            index = TAG.search(part).group(1)
            value = str(self.newest or time.time()) if "timestamp(" in part else self.value
            for copy in range(self.copies if self.copied in part else 1):
                result.append({"metric": {"opsctl_query": index, "instance": f"pod-{copy}"},
                               "value": [time.time(), value]})
        doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
        if self.warnings:
            doc["warnings"] = self.warnings
        return Response(200, doc)


def slo_dir(tmp_path):
    slos = tmp_path / "slos"
    slos.mkdir()
    (slos / "a.yaml").write_text("""\
apiVersion: sre.google.com/v2
kind: ServiceLevelObjective
metadata: {name: internal-availability, labels: {backend: internal}}
spec:
  backend: prometheus
  method: good_bad_ratio
  goal: 0.999
  service_level_indicator:
    filter_good: 'llm_proxy_requests_total{backend="internal",outcome="ok"}'
    filter_valid: 'llm_proxy_requests_total{backend="internal"}'
""")
    return slos


def report(tmp_path, server, *extra):
    cfg = write_config(tmp_path, slo_dir=slo_dir(tmp_path))
    return run_opsctl("--config", str(cfg), "slo", "report", "--prometheus-url", server.url, "--at", AT, *extra)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_a_non_finite_answer_is_no_data_with_one_line_naming_it(tmp_path, value):
    with AnsweringPrometheus(value) as server:
        result = report(tmp_path, server)
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error")]
    assert "no data for 1 SLO(s): internal-availability" in line
    assert f"answered {value} for " in line and "counted as no data" in line


def test_warnings_are_shown_in_the_report(tmp_path):
    with AnsweringPrometheus(warnings=["store 10.0.0.7:10901 unavailable: partial response"]) as server:
        result = report(tmp_path, server, "-o", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert any("warned: store 10.0.0.7:10901 unavailable: partial response" in n for n in row["notes"]), row["notes"]


def test_a_partial_answer_is_no_data_for_a_guard(tmp_path):
    with AnsweringPrometheus(warnings=["store 10.0.0.7:10901 unavailable: partial response"]) as server:
        cfg = write_config(tmp_path, traffic_yaml(), slo_dir=slo_dir(tmp_path), source="prometheus",
                           prometheus_url=server.url, max_data_age="5m")
        result = run_opsctl("--config", str(cfg), "traffic", "set", "databricks=70", "internal=30", "--reason",
                            "rebalance", "--yes", "-o", "json", env={"OPSCTL_ACTOR": "tester"})
    assert result.exit_code == 4, result.output
    budget = {g["name"]: g for g in json.loads(result.stdout)["guards"]}["budget"]
    assert not budget["ok"]
    assert "answered in part" in budget["message"] and "partial data is no data for a guard" in budget["message"]


def test_an_infinite_answer_never_passes_a_guard(tmp_path):
    with AnsweringPrometheus("+Inf") as server:
        cfg = write_config(tmp_path, traffic_yaml(), slo_dir=slo_dir(tmp_path), source="prometheus",
                           prometheus_url=server.url, max_data_age="5m")
        result = run_opsctl("--config", str(cfg), "traffic", "set", "databricks=70", "internal=30", "--reason",
                            "rebalance", "--yes", "-o", "json", env={"OPSCTL_ACTOR": "tester"})
    assert "Traceback" not in result.output
    assert result.exit_code == 4, result.output
    guards = {g["name"]: g for g in json.loads(result.stdout)["guards"]}
    assert not guards["budget"]["ok"], guards["budget"]


def test_a_query_answering_several_series_is_refused_with_the_file_key_and_a_hint(tmp_path):
    # The good events' query answers one series per pod, as a query without sum(...) would.
    with AnsweringPrometheus(copies=3, copied='increase(llm_proxy_requests_total{backend="internal",outcome="ok"}') as server:
        result = report(tmp_path, server)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"{tmp_path / 'slos' / 'a.yaml'}: spec.service_level_indicator.filter_good: its query" in result.stderr
    assert "answers 3 series" in result.stderr and "sum(...)" in result.stderr


def test_at_between_samples_is_aligned_to_the_datas_own_newest_sample(tmp_path):
    """Without metrics.prometheus.step the boundary is the data's: a proxy scraped every 15 s has
    its newest sample 7 s before --at, not on a 10 s grid."""
    from opsctl.clock import parse_rfc3339

    newest = parse_rfc3339(AT, require_zone=True) - 7
    with AnsweringPrometheus(newest=newest) as server:
        result = report(tmp_path, server, "-o", "json")
        asked = [q for q in server.queries if "max(timestamp(" in q]
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["at"] == "2026-11-18T11:06:33Z"
    assert any("evaluated at 2026-11-18T11:06:33Z, the newest sample before it" in n for n in row["notes"])
    assert asked  # the boundary came from the data
