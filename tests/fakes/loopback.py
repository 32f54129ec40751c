"""A threaded HTTP server on 127.0.0.1 for fakes: subclasses answer `handle(request) -> Response`."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Response:
    status: int = 200
    body: bytes | dict | list = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    trickle: float = 0.0  # >0: the headers at once, then the body one byte every `trickle` seconds


class LoopbackServer:
    """Start with `with Fake(...) as fake:`; `fake.url` is http://127.0.0.1:PORT."""

    def __init__(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                response = fake._dispatch(request)
                payload = response.body
                headers = dict(response.headers)
                if isinstance(payload, (dict, list)):
                    payload = json.dumps(payload).encode()
                    headers.setdefault("Content-Type", "application/json")
                try:
                    self.send_response(response.status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if not response.trickle:
                        self.wfile.write(payload)
                        return
                    for i in range(len(payload)):
                        if fake._stopping.wait(response.trickle):
                            self.close_connection = True
                            return
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (a timeout under test)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self._stopping = threading.Event()  # set on exit: a delayed or trickling answer ends
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _dispatch(self, request: Request) -> Response:
        with self.lock:
            self.requests.append(request)
        response = self.handle(request)
        if response.delay:
            self._stopping.wait(response.delay)
        return response

    def handle(self, request: Request) -> Response:  # pragma: no cover - subclasses answer
        return Response(404, {"error": "not found"})

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
