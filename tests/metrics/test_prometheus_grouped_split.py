"""A union of grouped queries the server refuses as too large is split and retried in halves down
to single queries, as `query_many` does, so the fleet's long-window sums still answer when together
they are over a limit and each alone is under it.

Prometheus 2.42 counts --query.max-samples as the peak of one part of a union (measured with
`stats=all`: 722 samples for one 2 h sum, 723 for the union of two), so it does not refuse a union
its parts pass; a querier that limits what one query fetches in all (Mimir's
max_fetched_chunks_per_query, Thanos' store limits) or a union that runs past --query.timeout does.
That querier is played here by a loopback proxy in front of a real Prometheus: it refuses any union
of more than LIMIT parts with Prometheus' own 422 "execution" answer and forwards the rest.
Expected sums are computed here from the written values."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
import urllib.request

import pytest

from tests.conftest import PrometheusServer

START = 1_790_000_000
POINTS = 721
SERVICES = {"east": 1, "west": 3, "north": 5}


def _openmetrics(path):
    lines = ["# TYPE x gauge"]
    for t in range(POINTS):
        for service, scale in SERVICES.items():
            lines.append(f'x{{service="{service}",slo="s"}} {scale * t} {START + 10 * t}')
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")
    return path


class LimitingQuerier:
    """Forwards /api/v1/query to Prometheus unless the query is a union of more than `limit` parts."""

    def __init__(self, upstream: str, limit: int):
        self.queries: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                query = urllib.parse.parse_qs(body.decode())["query"][0]
                outer.queries.append(query)
                if query.count(" or ") + 1 > limit:
                    answer = json.dumps({"status": "error", "errorType": "execution",
                                         "error": "the query exceeded the maximum number of chunks"}).encode()
                    self.send_response(422)
                else:
                    with urllib.request.urlopen(upstream + self.path, data=body, timeout=10) as response:
                        answer = response.read()
                    self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    work = tmp_path_factory.mktemp("grouped-split")
    server = PrometheusServer(work, openmetrics=_openmetrics(work / "x.om"))
    yield server
    server.stop()


def _source(url):
    from opsctl.config import PrometheusSource as Settings
    from opsctl.metrics.prometheus import PrometheusSource

    return PrometheusSource(Settings(url=url, timeout=10, report_deadline=60))


def _sums():
    return [f'sum by (service, slo) (sum_over_time(x{{service="{s}"}}[2h]))' for s in SERVICES]


@pytest.mark.prometheus
def test_a_refused_union_of_grouped_queries_is_answered_in_halves(prometheus):
    querier = LimitingQuerier(prometheus.url, limit=1)
    try:
        at = START + 10 * (POINTS - 1)
        answers = _source(querier.url).query_grouped(_sums(), at, ["service", "slo"])
    finally:
        querier.stop()
    total = sum(range(POINTS))  # the 2 h range holds every written point
    assert answers == [{(s, "s"): float(scale * total)} for s, scale in SERVICES.items()]
    # 3 parts refused; halves of 1 and 2, the 2 refused again, then 1 and 1.
    assert [q.count(" or ") + 1 for q in querier.queries] == [3, 1, 2, 1, 1]


@pytest.mark.prometheus
def test_a_single_grouped_query_refused_alone_is_reported_with_the_servers_limits_named(prometheus):
    from opsctl.metrics.prometheus import QueryRefused

    querier = LimitingQuerier(prometheus.url, limit=0)
    try:
        with pytest.raises(QueryRefused) as refused:
            _source(querier.url).query_grouped(_sums()[:1], START + 10 * (POINTS - 1), ["service", "slo"])
    finally:
        querier.stop()
    assert "--query.max-samples" in (refused.value.hint or "")
    assert len(querier.queries) == 1
