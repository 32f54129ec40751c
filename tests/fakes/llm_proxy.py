"""A loopback stand-in for the LLM proxy's metrics endpoint, driven by the fake Kubernetes API.

It plays the grammar service and both backends in a few lines: `rps` requests per second are split
by the weights of the traffic VirtualService's route, and requests to the vendor go through the
vendor egress VirtualService, so an Istio fault there (abort: that share gets the HTTP status;
delay: that share answers `fixedDelay` later) shows up in the counters the next time Prometheus
scrapes `/metrics`. Counts are deterministic (fractional accumulators, no randomness).
"""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opsctl.metrics import schema

ISTIO = ("networking.istio.io", "virtualservices")
LATENCY = {"internal": 0.1, "databricks": 0.15}
ABORTED_LATENCY = 0.01


def _seconds(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(ms|s|m|h)", text)
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


class FakeLLMProxy:
    def __init__(self, kube, *, rps: float = 200.0, split=("llm", "llm-inference", "primary"),
                 egress=("llm-staging", "databricks-egress"), hosts=None, vendor: str = "databricks"):
        self.kube = kube
        self.rps = rps
        self.split = split
        self.egress = egress
        self.hosts = hosts or {"vllm.llm.svc.cluster.local": "internal",
                               "databricks-egress.llm.svc.cluster.local": "databricks"}
        self.vendor = vendor
        self.backends = sorted(set(self.hosts.values()))
        self.lock = threading.Lock()
        self.requests = {(b, o): 0.0 for b in self.backends for o in schema.OUTCOMES}
        self.buckets = {(b, le): 0.0 for b in self.backends for le in schema.LE_LABELS}
        self.count = {b: 0.0 for b in self.backends}
        self.sum = {b: 0.0 for b in self.backends}
        self._stop = threading.Event()

    # -- the world as the fake cluster has it --------------------------------------------------------

    def weights(self) -> dict[str, float]:
        ns, name, route_name = self.split
        vs = self.kube.get(*ISTIO, ns, name)
        route = next(r for r in vs["spec"]["http"] if r.get("name") == route_name)
        out = {b: 0.0 for b in self.backends}
        for entry in route["route"]:
            out[self.hosts[entry["destination"]["host"]]] += float(entry.get("weight", 0))
        return out

    def fault(self) -> dict | None:
        vs = self.kube.get(*ISTIO, *self.egress)
        return (vs["spec"]["http"][0].get("fault") if vs else None) or None

    # -- counting ---------------------------------------------------------------------------------

    def _observe(self, backend: str, n: float, latency: float) -> None:
        for le, bound in zip(schema.LE_LABELS, (*schema.BUCKETS, float("inf"))):
            if latency <= bound:
                self.buckets[(backend, le)] += n
        self.count[backend] += n
        self.sum[backend] += n * latency

    def step(self, dt: float) -> None:
        weights, fault = self.weights(), self.fault()
        with self.lock:
            for backend in self.backends:
                n = self.rps * dt * weights[backend] / 100.0
                if n <= 0:
                    continue
                bad, slow, status, delay = 0.0, 0.0, 0, 0.0
                if backend == self.vendor and fault:
                    if "abort" in fault:
                        bad = n * fault["abort"]["percentage"]["value"] / 100.0
                        status = int(fault["abort"]["httpStatus"])
                    if "delay" in fault:
                        slow = n * fault["delay"]["percentage"]["value"] / 100.0
                        delay = _seconds(fault["delay"]["fixedDelay"])
                ok = n - bad
                self.requests[(backend, "ok")] += ok
                if bad:
                    outcome = schema.outcome_for_status(status)
                    self.requests[(backend, outcome)] += bad
                    self._observe(backend, bad, ABORTED_LATENCY)
                self._observe(backend, ok - slow, LATENCY[backend])
                if slow:
                    self._observe(backend, slow, LATENCY[backend] + delay)

    def exposition(self) -> str:
        with self.lock:
            lines = [f"# TYPE {schema.REQUESTS.removesuffix('_total')} counter"]
            lines += [f'{schema.REQUESTS}{{backend="{b}",outcome="{o}"}} {v!r}' for (b, o), v in self.requests.items()]
            lines.append(f"# TYPE {schema.DURATION} histogram")
            lines += [f'{schema.DURATION_BUCKET}{{backend="{b}",le="{le}"}} {v!r}' for (b, le), v in self.buckets.items()]
            lines += [f'{schema.DURATION_COUNT}{{backend="{b}"}} {v!r}' for b, v in self.count.items()]
            lines += [f'{schema.DURATION_SUM}{{backend="{b}"}} {v!r}' for b, v in self.sum.items()]
        return "\n".join(lines) + "\n"

    # -- serving ----------------------------------------------------------------------------------

    def start(self) -> "FakeLLMProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = proxy.exposition().encode()
                self.send_response(200 if self.path.startswith("/metrics") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.1):  # bounded by stop()
            now = time.monotonic()
            self.step(now - last)
            last = now

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
