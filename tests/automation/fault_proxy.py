"""A loopback HTTP proxy between one `opsctl serve` replica and the fake Kubernetes API server, to
give that replica (and only it) the faults a cluster has, deterministically and counted:

    pause()/resume()   every request of the replica waits at the proxy, as if its process were
                       SIGSTOPped: nothing it sends reaches the API server until resumed, then all
                       of it does (a held write lands then, as a paused process's would)
    hold(match)        requests matching `match(method, path)` wait until `release()`: a write in
                       flight; `arrived` is set when the first one comes
    lose_answer(match) the next matching request is forwarded and applied, and its answer dropped
                       (the connection closed without a response)
    fail(match, status, count)  the next `count` matching requests are answered `status` (a Status
                       body) without being forwarded: transient 500, 429 or 409 from the server
    down(match)        matching requests are cut off unanswered and NOT forwarded (the API server
                       killed); `cut` counts them; `up()` ends it

Every wait is bounded (60 s). Headers pass through, the API server's Date among them.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

Match = Callable[[str, str], bool]
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def anything(method: str, path: str) -> bool:
    return True


def writes_to(fragment: str) -> Match:
    return lambda method, path: method in ("PUT", "PATCH", "POST") and fragment in path


class FaultProxy:
    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port)
        self.lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self._hold: Match | None = None
        self._released = threading.Event()
        self.arrived = threading.Event()
        self._lose: list[Match] = []
        self.lost: list[str] = []  # requests applied whose answers were dropped
        self._fail: list[list] = []  # [match, status, count left]
        self.failed = 0  # requests answered with an injected status
        self._down: Match | None = None
        self.cut = 0  # requests cut off while down
        self.unreachable = 0  # requests the API server behind could not take (it was down)
        self.server: ThreadingHTTPServer | None = None

    # -- faults -----------------------------------------------------------------------------------

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def hold(self, match: Match) -> None:
        self._released.clear()
        self.arrived.clear()
        self._hold = match

    def release(self) -> None:
        self._hold = None
        self._released.set()

    def lose_answer(self, match: Match) -> None:
        with self.lock:
            self._lose.append(match)

    def fail(self, match: Match, status: int, count: int) -> None:
        with self.lock:
            self._fail.append([match, status, count])

    def _injected(self, method: str, path: str) -> int | None:
        with self.lock:
            for rule in self._fail:
                if rule[2] > 0 and rule[0](method, path):
                    rule[2] -= 1
                    self.failed += 1
                    return rule[1]
        return None

    def down(self, match: Match = anything) -> None:
        self._down = match

    def up(self) -> None:
        self._down = None

    # -- serving ----------------------------------------------------------------------------------

    def start(self) -> "FaultProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                method, path = self.command, self.path
                down = proxy._down
                if down is not None and down(method, path):
                    with proxy.lock:
                        proxy.cut += 1
                    self.close_connection = True
                    return
                status = proxy._injected(method, path)
                if status is not None:
                    data = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                                       "message": f"injected {status}", "reason": "InternalError"}).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                hold = proxy._hold
                if hold is not None and hold(method, path):
                    proxy.arrived.set()
                    proxy._released.wait(60)
                proxy._running.wait(60)
                with proxy.lock:
                    lose = next((m for m in proxy._lose if m(method, path)), None)
                    if lose is not None:
                        proxy._lose.remove(lose)
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                    conn.request(method, path, body=body or None, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                except OSError:  # the API server is down: the client sees its connection cut
                    with proxy.lock:
                        proxy.unreachable += 1
                    self.close_connection = True
                    return
                finally:
                    conn.close()
                if lose is not None:
                    with proxy.lock:
                        proxy.lost.append(f"{method} {path}")
                    self.close_connection = True
                    return
                self.send_response_only(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client giving up on a held request closes its end: no error of the proxy's

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.resume()
        self.release()
        self.up()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
