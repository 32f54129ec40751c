"""A scrape target on loopback that plays the LLM proxy: llm_proxy_requests_total counters whose
error share the test sets. Counters advance with wall time at fixed request rates."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ProxyTarget:
    def __init__(self, rates: dict[str, float]):
        self.rates = dict(rates)  # requests per second per backend
        self.error_share = {b: 0.0 for b in rates}  # share of requests answered server_error
        self.counts = {(b, o): 0.0 for b in rates for o in ("ok", "server_error")}
        self._lock = threading.Lock()
        self._last = time.monotonic()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = target.exposition().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _advance(self) -> None:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        for backend, rate in self.rates.items():
            n = rate * elapsed
            bad = n * self.error_share[backend]
            self.counts[(backend, "server_error")] += bad
            self.counts[(backend, "ok")] += n - bad

    def set_error_share(self, backend: str, share: float) -> None:
        with self._lock:
            self._advance()  # what came before is counted at the old share
            self.error_share[backend] = share

    def exposition(self) -> str:
        with self._lock:
            self._advance()
            lines = ["# HELP llm_proxy_requests_total Requests by backend and outcome.",
                     "# TYPE llm_proxy_requests_total counter"]
            for (backend, outcome), value in sorted(self.counts.items()):
                lines.append(f'llm_proxy_requests_total{{backend="{backend}",outcome="{outcome}"}} {value:.3f}')
            return "\n".join(lines) + "\n"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
