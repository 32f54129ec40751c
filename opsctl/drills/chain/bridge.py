"""The drill's ticket-queue bridge: records the Alertmanager webhooks the routing sends to the
ticket queue (severity=ticket and anything unrouted), with their arrival time and bearer check."""

from __future__ import annotations

import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookRecorder:
    def __init__(self, token: str, clock=time.time):
        self.token = token
        self.clock = clock
        self.deliveries: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 4 * 1048576))
                sent = self.headers.get("Authorization", "")
                ok = hmac.compare_digest(sent.encode(), f"Bearer {recorder.token}".encode())
                try:
                    payload = json.loads(body) if ok else None
                except ValueError:
                    payload = None
                with recorder._lock:
                    recorder.deliveries.append({
                        "at": recorder.clock(), "path": self.path, "authorized": ok,
                        "status": (payload or {}).get("status"),
                        "alerts": [a.get("labels", {}) for a in (payload or {}).get("alerts", [])]})
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="chain-ticket-bridge", daemon=True).start()
        bound, port = self._server.server_address[:2]
        return f"http://{bound!s}:{port}"

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [dict(d) for d in self.deliveries]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
