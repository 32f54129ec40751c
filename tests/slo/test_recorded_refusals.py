"""A query Prometheus refuses for its size, its time or a limit is no data (exit 3) with a hint that
names the server's limits and the recording rules, for `slo report` and `slo alerts` alike.

The refusals are Prometheus 2.42's own answers (status, errorType and text as it sends them; the
size refusal is the one bench/bench_slo_scale.py gets from a real Prometheus at a scaled
`--query.max-samples`), served on 127.0.0.1 after a successful build-info probe."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import write_config

REFUSALS = {
    "too many samples": (422, {"status": "error", "errorType": "execution",
                               "error": "query processing would load too many samples into memory in query execution"}),
    "timeout": (503, {"status": "error", "errorType": "timeout",
                      "error": "query timed out in expression evaluation"}),
    "limit": (422, {"status": "error", "errorType": "execution",
                    "error": "expanding series: the query hit the max number of series limit (limit: 10)"}),
}


class RefusingPrometheus:
    """Answers the build-info probe, refuses every query with one of Prometheus' refusals."""

    def __init__(self, status: int, doc: dict):
        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                if self.path.startswith("/api/v1/status/buildinfo"):
                    code, body = 200, {"status": "success", "data": {"version": "2.42.0"}}
                else:
                    code, body = status, doc
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


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
