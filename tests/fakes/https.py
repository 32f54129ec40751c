"""A loopback HTTPS server for fakes of vendor APIs: TLS from a trustme CA, JSON helpers, a log of
every request, and scripted faults (answer 429/5xx before or after handling the request).

Subclasses implement `route(req) -> (status, body, headers)`; `body` is JSON-encoded unless bytes.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def q(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class Fault:
    method: str
    path_prefix: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    times: int = 1
    after: bool = False  # True: handle the request first, then answer with the fault (ambiguous)
    delay: float = 0.0


class FakeHTTPSServer:
    service = "fake"

    def __init__(self, ca):
        self.ca = ca
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.hooks: list[Callable[[Request], None]] = []  # before handling a request
        self.after_hooks: list[Callable[[Request], None]] = []  # after handling, before answering
        self.lock = threading.RLock()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(ctx)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                req = Request(self.command, parts.path, parse_qs(parts.query, keep_blank_values=True),
                              {k.lower(): v for k, v in self.headers.items()}, body)
                status, payload, headers = fake._dispatch(req)
                data = payload if isinstance(payload, bytes) else (b"" if payload is None else json.dumps(payload).encode())
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that went away (killed in a crash test) is not an error here

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- scripting ------------------------------------------------------------------------------

    def fail_next(self, method: str, path_prefix: str, status: int, *, times: int = 1, retry_after: str | None = None,
                  body: Any = None, after: bool = False, delay: float = 0.0):
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        with self.lock:
            self.faults.append(Fault(method, path_prefix, status, headers,
                                     body if body is not None else {"error": {"message": "injected fault"}},
                                     times, after, delay))

    def requests_to(self, method: str, path_prefix: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    # -- dispatch -------------------------------------------------------------------------------

    def _dispatch(self, req: Request):
        with self.lock:
            self.requests.append(req)
            fault = next((f for f in self.faults if f.method == req.method and req.path.startswith(f.path_prefix)), None)
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
        for hook in list(self.hooks):
            hook(req)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and not fault.after:
            return fault.status, fault.body, fault.headers
        with self.lock:
            result = self.route(req)
        for hook in list(self.after_hooks):
            hook(req)
        if fault is not None:
            return fault.status, fault.body, fault.headers
        return result

    def route(self, req: Request):  # pragma: no cover - subclasses implement
        return 404, {"error": "no route"}, {}
