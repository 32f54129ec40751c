"""A loopback Kubernetes API serving the chain drill's simulated internal Deployment.

`opsctl serve` in a chain drill keeps `capacity.source: kubernetes`: its capacity guard and its
canary restore (traffic/canary_readiness.py) read the Deployment through the real `kubernetes`
client, from this server, as they would from a cluster. The Deployment's `spec.replicas` is the
fleet the user's config declares (`replicas`, else `max_replicas`, as embedded drills count it) and
its `status.readyReplicas` the pods the simulated faults leave ready now: the share the chain's
exporter draws its steps with (ProxyExporter.ready_share, simworld.ready_share: each GPU capacity
loss acting now, its waves and end included), rounded down (decisions/0355).

It answers what the client's capacity path reads: `GET /version`, the Deployment, its `/status`
and its `/scale` subresource (autoscaling/v1 Scale). Everything else is a Kubernetes Status: 404
for another object, 401 without the bearer token the drill's kubeconfig carries, 405 for a watch,
403 for every write (the drill's role is read-only: the simulated fleet never scales). Bound to
127.0.0.1, requests bodies capped, stopped with the drill.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from email.utils import formatdate
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

from opsctl.drills.chain.serving import QuietHandler, ThreadedServer

MAX_BODY = 1024 * 1024  # bytes of a request body read (and discarded) before a refusal
USER = "system:serviceaccount:opsctl-drill:chain"
GIT_VERSION = "v1.30.0-opsctl-drill"


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Kubernetes `Status` object, as the API server sends with every failure."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


class SimulatedDeployment:
    """The Deployment `namespace/name` of `replicas` pods, `ready_share(at)` of them ready at `at`."""

    def __init__(self, namespace: str, name: str, replicas: int, ready_share: Callable[[float], float], *,
                 clock: Callable[[], float] = time.time, token: str | None = None):
        self.namespace = namespace
        self.name = name
        self.replicas = int(replicas)
        self.ready_share = ready_share
        self.clock = clock
        self.token = token or secrets.token_urlsafe(24)
        self.uid = str(uuid.uuid4())
        self.created = clock()
        self.reads: list[dict[str, Any]] = []  # (at, path, ready) per read: the drill's evidence
        self.refused: list[dict[str, Any]] = []  # writes and watches refused
        self._ready: int | None = None
        self._version = 1
        self._lock = threading.Lock()
        self._http = ThreadedServer("chain-kube-api")

    # -- the object ---------------------------------------------------------------------------

    def ready_at(self, at: float) -> int:
        from opsctl.drills.simworld import ready_pods

        return ready_pods(self.replicas, self.ready_share(at))

    def _observe(self, at: float) -> tuple[int, str]:
        """(ready pods, resourceVersion) now: the version moves whenever the status does."""
        ready = self.ready_at(at)
        with self._lock:
            if self._ready is not None and ready != self._ready:
                self._version += 1
            self._ready = ready
            return ready, str(self._version)

    def _metadata(self, version: str) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "uid": self.uid, "resourceVersion": version,
                "generation": 1, "creationTimestamp": _rfc3339(self.created),
                "labels": {"app.kubernetes.io/name": self.name, "opsctl.io/drill": "chain"}}

    def deployment(self, at: float) -> dict[str, Any]:
        ready, version = self._observe(at)
        state: dict[str, Any] = {"observedGeneration": 1, "replicas": self.replicas, "updatedReplicas": self.replicas}
        if ready:  # the API server omits a zero count, as the client's model allows
            state["readyReplicas"] = ready
            state["availableReplicas"] = ready
        if self.replicas - ready:
            state["unavailableReplicas"] = self.replicas - ready
        whole = ready >= self.replicas
        state["conditions"] = [{
            "type": "Available", "status": "True" if whole else "False",
            "reason": "MinimumReplicasAvailable" if whole else "MinimumReplicasUnavailable",
            "message": f"{ready} of {self.replicas} replicas ready (the chain drill's simulated pods)",
            "lastUpdateTime": _rfc3339(at), "lastTransitionTime": _rfc3339(at)}]
        labels = {"app.kubernetes.io/name": self.name}
        return {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": self._metadata(version),
                "spec": {"replicas": self.replicas, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels},
                                      "spec": {"containers": [{"name": "vllm", "image": "opsctl-drill/simulated"}]}},
                         "strategy": {"type": "RollingUpdate"}},
                "status": state}

    def scale(self, at: float) -> dict[str, Any]:
        _ready, version = self._observe(at)
        return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": self._metadata(version),
                "spec": {"replicas": self.replicas},
                "status": {"replicas": self.replicas, "selector": f"app.kubernetes.io/name={self.name}"}}

    # -- the API ------------------------------------------------------------------------------

    def answer(self, method: str, target: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for one request: the API server's routing for this one object."""
        url = urlparse(target)
        path = url.path.rstrip("/")
        at = self.clock()
        if authorization != f"Bearer {self.token}":
            return 401, status(401, "Unauthorized", "Unauthorized")
        if path == "/version" and method == "GET":
            return 200, {"major": "1", "minor": "30", "gitVersion": GIT_VERSION, "platform": "linux/amd64"}
        base = f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{self.name}"
        sub = {base: "", f"{base}/status": "status", f"{base}/scale": "scale"}.get(path)
        resource = "deployments" + (f"/{sub}" if sub else "")
        if method != "GET":
            verb = {"PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}.get(method, method.lower())
            self._refuse(at, method, path)
            return 403, status(403, "Forbidden", (
                f'{resource}.apps "{self.name}" is forbidden: User "{USER}" cannot {verb} resource "{resource}" in API'
                f' group "apps" in the namespace "{self.namespace}": the chain drill\'s simulated fleet is read-only'
                if sub is not None else
                f'forbidden: User "{USER}" cannot {verb} path "{path}": the chain drill serves one Deployment, read-only'),
                {"name": self.name, "group": "apps", "kind": resource} if sub is not None else None)
        if sub is None:
            parts = path.split("/")
            if len(parts) in (8, 9) and parts[:4] == ["", "apis", "apps", "v1"] and parts[4] == "namespaces" \
                    and parts[6] == "deployments":  # another Deployment, as the API server words it
                return 404, status(404, "NotFound", f'deployments.apps "{parts[7]}" not found (the chain drill serves'
                                                    f' Deployment {self.namespace}/{self.name} only)',
                                   {"name": parts[7], "group": "apps", "kind": "deployments"})
            return 404, status(404, "NotFound", "the server could not find the requested resource (the chain drill"
                                                f" serves Deployment {self.namespace}/{self.name} only)")
        if parse_qs(url.query).get("watch", ["false"])[0] in ("1", "true"):
            self._refuse(at, "WATCH", path)
            return 405, status(405, "MethodNotAllowed", f"watch is not served for {resource} {self.namespace}/"
                                                        f"{self.name} by the chain drill's loopback API")
        body = self.scale(at) if sub == "scale" else self.deployment(at)
        with self._lock:
            self.reads.append({"at": at, "path": path, "ready": (body.get("status") or {}).get("readyReplicas", 0)
                               if sub != "scale" else None})
            del self.reads[:-1000]  # bounded: the last thousand reads
        return 200, body

    def _refuse(self, at: float, method: str, path: str) -> None:
        with self._lock:
            self.refused.append({"at": at, "method": method, "path": path})
            del self.refused[:-1000]

    # -- the kubeconfig -----------------------------------------------------------------------

    def kubeconfig(self, url: str) -> dict[str, Any]:
        """A kubeconfig for `url` (plain HTTP on loopback) with this server's bearer token."""
        return {"apiVersion": "v1", "kind": "Config", "current-context": "opsctl-drill",
                "clusters": [{"name": "opsctl-drill", "cluster": {"server": url}}],
                "users": [{"name": "opsctl-drill", "user": {"token": self.token}}],
                "contexts": [{"name": "opsctl-drill", "context": {"cluster": "opsctl-drill", "user": "opsctl-drill",
                                                                  "namespace": self.namespace}}]}

    def write_kubeconfig(self, path: Path, url: str) -> Path:
        """Write the kubeconfig (it holds the token: mode 0600, atomically)."""
        import yaml

        from opsctl.statefile import write_text_atomic

        write_text_atomic(Path(path), yaml.safe_dump(self.kubeconfig(url), sort_keys=False), mode=0o600)
        return Path(path)

    # -- HTTP ---------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        api = self

        class Handler(QuietHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    code, reply = 413, status(413, "RequestEntityTooLarge", "request entity too large")
                else:
                    if length:
                        self.rfile.read(length)
                    code, reply = api.answer(method, self.path, self.headers.get("Authorization"))
                self.send_response(code)
                body = json.dumps(reply).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Date", formatdate(usegmt=True))
                self.send_header("Audit-Id", str(uuid.uuid4()))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._serve("GET")

            def do_PATCH(self):
                self._serve("PATCH")

            def do_PUT(self):
                self._serve("PUT")

            def do_POST(self):
                self._serve("POST")

            def do_DELETE(self):
                self._serve("DELETE")

        self._http.start(Handler, host, port)
        return self.url

    @property
    def url(self) -> str:
        return self._http.url

    def stop(self) -> None:
        self._http.stop()


def _rfc3339(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
