"""Loopback servers that answer slowly: a Prometheus slow past its timeout, or trickling its answer."""

from __future__ import annotations

from tests.fakes.loopback import LoopbackServer, Response


class SlowServer(LoopbackServer):
    """Answers every request after `delay` seconds with `status` and `body` (JSON)."""

    def __init__(self, delay: float, status: int = 200, body: bytes = b'{"status":"success","data":{}}'):
        super().__init__()
        self.answer = Response(status, body, {"Content-Type": "application/json"}, delay=delay)

    def handle(self, request):
        return self.answer


class TrickleServer(SlowServer):
    """Sends its headers at once, then the body one byte every `interval` seconds: each read
    succeeds well within a socket timeout, and the whole answer takes len(body) * interval."""

    def __init__(self, interval: float = 1.0, body: bytes = b'{"status":"success","data":{"resultType":"vector","result":[]}}'):
        super().__init__(0, 200, body)
        self.answer.trickle = interval
