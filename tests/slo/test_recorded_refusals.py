"""A query Prometheus refuses for its size, its time or a limit is no data (exit 3) with a hint that
names the server's limits and the recording rules, for `slo report` and `slo alerts` alike.

The refusals are Prometheus 2.42's own answers (status, errorType and text as it sends them; the
size refusal is the one bench/bench_slo_scale.py gets from a real Prometheus at a scaled
`--query.max-samples`), served on 127.0.0.1 after a successful build-info probe."""

from __future__ import annotations

import pytest

from tests.conftest import write_config
from tests.fakes.loopback import LoopbackServer, Request, Response

REFUSALS = {
    "too many samples": (422, {"status": "error", "errorType": "execution",
                               "error": "query processing would load too many samples into memory in query execution"}),
    "timeout": (503, {"status": "error", "errorType": "timeout",
                      "error": "query timed out in expression evaluation"}),
    "limit": (422, {"status": "error", "errorType": "execution",
                    "error": "expanding series: the query hit the max number of series limit (limit: 10)"}),
}


class RefusingPrometheus(LoopbackServer):
    """Answers the build-info probe, refuses every query with one of Prometheus' refusals."""

    def __init__(self, status: int, doc: dict):
        super().__init__()
        self.refusal = Response(status, doc)

    def handle(self, request: Request) -> Response:
        if request.path.startswith("/api/v1/status/buildinfo"):
            return Response(200, {"status": "success", "data": {"version": "2.42.0"}})
        return self.refusal


@pytest.mark.parametrize("command", ["report", "alerts"])
@pytest.mark.parametrize("kind", sorted(REFUSALS))
def test_a_refused_query_is_exit_3_with_a_hint(opsctl, tmp_path, command, kind):
    status, doc = REFUSALS[kind]
    cfg = write_config(tmp_path)
    with RefusingPrometheus(status, doc) as server:
        result = opsctl("--config", str(cfg), "slo", command, "--prometheus-url", server.url,
                        "--at", "2026-11-18T11:06:40Z")
    assert result.exit_code == 3, result.output
    assert doc["error"] in result.stderr
    assert "--query.max-samples, --query.timeout" in result.stderr and "recording rules" in result.stderr
    assert "Traceback" not in result.output
