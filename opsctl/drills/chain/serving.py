"""A small HTTP server on loopback, served from a daemon thread: the chain's exporter and its
PagerDuty endpoint both run inside the drill's process and stop with it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with one call."""

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ThreadedServer:
    """`start` binds (port 0: any free one) and serves in a daemon thread; `stop` shuts it down."""

    def __init__(self, name: str):
        self.name = name
        self._server: ThreadingHTTPServer | None = None

    def start(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name=self.name, daemon=True).start()

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError(f"{self.name} is not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
