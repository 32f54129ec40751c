"""A loopback HTTP server that answers only after a delay: a Prometheus slow past its timeout."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlowServer:
    def __init__(self, delay: float, status: int = 200, body: bytes = b'{"status":"success","data":{}}'):
        delay_s, code, payload = delay, status, body

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                time.sleep(delay_s)
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


class TrickleServer:
    """Sends its headers at once, then the body one byte every `interval` seconds: each read
    succeeds well within a socket timeout, and the whole answer takes len(body) * interval."""

    def __init__(self, interval: float = 1.0, body: bytes = b'{"status":"success","data":{"resultType":"vector","result":[]}}'):
        stop = threading.Event()
        self.stop = stop

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                for i in range(len(body)):
                    if stop.wait(interval):
                        return
                    try:
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                    except OSError:
                        return

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
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
