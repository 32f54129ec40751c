"""A loopback fake of the Kubernetes API server, speaking its REST protocol to the official client.

What it implements, as the real server does for these resources:
  core/v1 ConfigMaps and Events; apps/v1 Deployments with the `scale` and `status` subresources;
  coordination.k8s.io/v1 Leases; autoscaling/v2 HorizontalPodAutoscalers; KEDA keda.sh/v1alpha1
  ScaledObjects, networking.istio.io VirtualServices and gateway.networking.k8s.io HTTPRoutes
  (custom resources). GET (one, list), POST (create, generateName), PUT (replace), PATCH, DELETE.
  - resourceVersion: one cluster-wide counter; every write bumps it (`versions`, a test hook, turns
    the counter into opaque text: clients must never order versions). On every kind, a PUT or PATCH
    whose body carries metadata.resourceVersion different from the stored one is 409 Conflict (a
    Status body saying "the object has been modified"), and so is a DELETE whose DeleteOptions carry
    preconditions.resourceVersion (or uid) that no longer match; custom resources require
    resourceVersion on PUT. A POST of an existing name is 409 AlreadyExists.
  - PATCH content types: application/json-patch+json (RFC 6902, with `test`),
    application/merge-patch+json (RFC 7386: maps merge, null deletes, lists are replaced whole),
    application/strategic-merge-patch+json for built-in kinds only (lists with a patch merge key,
    e.g. containers by name, merge by key; `$patch` directives); custom resources answer 415 to it,
    as the real server does. Server-side apply is not implemented (415).
  - ?dryRun=All runs everything (validation, conflicts) and persists nothing; any other value is 400.
  - ?fieldManager=NAME is recorded in metadata.managedFields.
  - Admission: VirtualService HTTP route weights must sum to 100 (Istio's validating webhook);
    HTTPRoute weights are 0..1000000 and mirror percents 0..100 (the CRD schema); ConfigMap data
    values are strings.
  - Deployments: after a scale, readyReplicas reaches min(replicas, schedulable) after `ready_delay`
    seconds, as pods would start; `schedulable` models how many GPUs exist.
  - Autoscalers: an HPA (spec.scaleTargetRef) or a ScaledObject (spec.scaleTargetRef.name) on a
    Deployment drives its replicas as their controllers do at each sync: clamp(desired, min, max),
    where `desired` is what the metrics ask for (a test hook, default the minimum). A patch of the
    scale subresource is therefore overwritten at the next read, as on a real cluster.
  - Every answer carries a `Date` header (the server's clock, shifted by `clock_offset` seconds), which
    a client may take as the API server's time.
  - State (`state=FILE`, `--state FILE`): the objects and the resourceVersion counter are written to
    FILE atomically after every change, before the answer, and read back at start, so a restart
    (even after SIGKILL) keeps every acknowledged write, as etcd does. `down()` / `up()` stop and
    restart serving on the same port in-process (connections reset, the state read back from FILE).
  - Faults (`Fault`, `inject()`, `--fault SPEC`, or the control endpoint `/fake/faults`): by verb
    (get, list, create, update, patch, delete), resource (plural), optional name, and share of the
    matching requests: a delay (fixed or a range), an answer dropped after applying or before
    applying (the connection closes with no answer), a status code instead of applying (500, 409,
    429, 503...), or a hold until `release()`. One draw of a seedable RNG per matching request picks at
    most one fault: the shares of the faults a request matches partition [0, 1), in order.
Standalone: `python3 -m tests.fakes.kube_api --port 8001 [--seed objects.yaml] [--state FILE]
[--fault SPEC]... [--fault-seed N]` serves until interrupted; point `traffic.kubernetes.host` (and
`state.kubernetes.host`) at it. SPEC is `verb=update|patch,resource=configmaps,share=0.5,status=500`
(keys: verb, resource, name, share, delay (S or A-B), status, drop=before|after, hold, when=before|after,
times, retry_after). Mind that the official client (urllib3) retries a 429 or 503 carrying Retry-After
by itself, after sleeping that long, and an idempotent request (GET, PUT, DELETE) whose answer was
dropped: a replace whose answer was lost comes back as 409 against its own applied write. The control endpoint takes GET, POST (add), PUT (replace, optionally with `seed`), DELETE on
/fake/faults and POST /fake/release; it is never faulted nor logged.
Test hooks: seed objects, read them back, inject concurrent writers (the next N writes to an
object find it modified first), inject faults, read the request log and the recorded Events.
"""

from __future__ import annotations

import copy
import json
import random
import socket
import threading
import time
import uuid
from typing import Callable
from dataclasses import asdict, dataclass, field
from email.utils import formatdate
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CORE = ""
BUILTIN_GROUPS = {"", "apps", "coordination.k8s.io", "autoscaling"}
RESOURCES = {
    # (group, plural): (kind, namespaced versions)
    ("", "configmaps"): ("ConfigMap", ("v1",)),
    ("", "events"): ("Event", ("v1",)),
    ("apps", "deployments"): ("Deployment", ("v1",)),
    ("coordination.k8s.io", "leases"): ("Lease", ("v1",)),
    ("autoscaling", "horizontalpodautoscalers"): ("HorizontalPodAutoscaler", ("v2",)),
    ("keda.sh", "scaledobjects"): ("ScaledObject", ("v1alpha1",)),
    ("networking.istio.io", "virtualservices"): ("VirtualService", ("v1", "v1beta1", "v1alpha3")),
    ("gateway.networking.k8s.io", "httproutes"): ("HTTPRoute", ("v1", "v1beta1")),
}
# Strategic merge: list fields merged by key (the rest are replaced), as in the built-in types' patchMergeKey.
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "details": self.details, "code": self.code}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------------------------
# Patch semantics


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target, patch, field_name: str | None = None):
    """The part of Kubernetes' strategic merge patch the built-in kinds here use."""
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "delete":
            return None
        if directive == "replace":
            return {k: v for k, v in copy.deepcopy(patch).items() if k != "$patch"}
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
                continue
            if key.startswith("$deleteFromPrimitiveList/"):
                name = key.split("/", 1)[1]
                result[name] = [v for v in result.get(name) or [] if v not in value]
                continue
            if value is None:
                result.pop(key, None)
                continue
            merged = strategic_merge_patch(result.get(key), value, key)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        return result
    if isinstance(patch, list):
        key = MERGE_KEYS.get(field_name or "")
        if key is None or not isinstance(target, list):
            return [v for v in copy.deepcopy(patch) if not (isinstance(v, dict) and v.get("$patch") == "delete")]
        result = copy.deepcopy(target)
        for item in patch:
            if not isinstance(item, dict) or key not in item:
                raise ApiError(422, "Invalid", f"strategic merge patch: list {field_name} items need merge key {key!r}")
            index = next((i for i, cur in enumerate(result) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
            if item.get("$patch") == "delete":
                if index is not None:
                    result.pop(index)
            elif index is None:
                result.append({k: v for k, v in item.items() if k != "$patch"})
            else:
                result[index] = strategic_merge_patch(result[index], item, None)
        return result
    return copy.deepcopy(patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"json patch: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts: list[str], path: str):
    for part in parts:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            raise ApiError(422, "Invalid", f"json patch: path {path!r} does not exist")
    return doc


def json_patch(doc, ops):
    """RFC 6902 JSON patch."""
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        parts = _pointer(path)
        if kind == "test":
            if _walk(doc, parts, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"json patch: test failed at {path!r}")
            continue
        if kind in ("move", "copy"):
            source = _pointer(op["from"])
            value = copy.deepcopy(_walk(doc, source, op["from"]))
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": path, "value": value}])
            continue
        if not parts:
            if kind in ("add", "replace"):
                doc = copy.deepcopy(op["value"])
                continue
            raise ApiError(422, "Invalid", "json patch: cannot remove the whole document")
        parent = _walk(doc, parts[:-1], path)
        last = parts[-1]
        if isinstance(parent, dict):
            if kind == "add":
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "replace":
                if last not in parent:
                    raise ApiError(422, "Invalid", f"json patch: replace of missing path {path!r}")
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                if last not in parent:
                    raise ApiError(422, "Invalid", f"json patch: remove of missing path {path!r}")
                del parent[last]
            else:
                raise ApiError(422, "Invalid", f"json patch: unknown op {kind!r}")
        elif isinstance(parent, list):
            if kind == "add":
                index = len(parent) if last == "-" else int(last)
                if index > len(parent):
                    raise ApiError(422, "Invalid", f"json patch: index out of range at {path!r}")
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind in ("replace", "remove"):
                if not last.isdigit() or int(last) >= len(parent):
                    raise ApiError(422, "Invalid", f"json patch: index out of range at {path!r}")
                if kind == "replace":
                    parent[int(last)] = copy.deepcopy(op["value"])
                else:
                    parent.pop(int(last))
            else:
                raise ApiError(422, "Invalid", f"json patch: unknown op {kind!r}")
        else:
            raise ApiError(422, "Invalid", f"json patch: {path!r} is not in a container")
    return doc


# ---------------------------------------------------------------------------------------------
# The server


@dataclass
class DeploymentSim:
    ready_delay: float = 0.5
    schedulable: int = 1000  # pods beyond this stay Pending (no GPU)
    changed_at: float = 0.0


@dataclass
class Request:
    method: str
    path: str
    query: dict
    content_type: str
    body: object
    authorization: str | None = None
    fault: str | None = None  # what an injected fault did to this request, if anything
    at: float = field(default_factory=time.time)  # when it reached the fake (wall clock, for benchmarks)


VERBS = ("get", "list", "create", "update", "patch", "delete")
REASONS = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests",
           500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    """One injected fault: which requests it matches, what share of them it hits, and what it does.

    `verb` and `resource` are one name, several separated by `|`, or `*`; `name` narrows to one object.
    `delay` is seconds (a number) or a range [low, high] drawn from the fake's RNG, spent `when`
    before or after applying. Then at most one of: `status` (answered instead of applying), `drop`
    ("before": the connection closes and nothing is applied; "after": applied, then the connection
    closes with no answer), `hold` (the request waits, `when` before or after applying, until
    `release()`). `times` bounds how often it fires (None: without end); `fired` counts."""

    verb: str = "*"
    resource: str = "*"
    name: str | None = None
    share: float = 1.0
    delay: float | tuple[float, float] | list[float] | None = None
    status: int | None = None
    drop: str | None = None
    hold: bool = False
    when: str = "before"
    times: int | None = None
    retry_after: int | None = 1  # the Retry-After header of a 429 or 503, as the real server sends (None: none)
    fired: int = 0

    def __post_init__(self):
        for verb in self.verb.split("|"):
            if verb != "*" and verb not in VERBS:
                raise ValueError(f"fault: unknown verb {verb!r} (one of {', '.join(VERBS)} or *)")
        if not 0.0 <= float(self.share) <= 1.0:
            raise ValueError(f"fault: share {self.share} is not within [0, 1]")
        self.share = float(self.share)
        if isinstance(self.delay, (list, tuple)):
            low, high = (float(v) for v in self.delay)
            if not 0 <= low <= high:
                raise ValueError(f"fault: delay range {self.delay} needs 0 <= low <= high")
            self.delay = (low, high)
        elif self.delay is not None and float(self.delay) < 0:
            raise ValueError("fault: a delay cannot be negative")
        if sum(bool(x) for x in (self.status, self.drop, self.hold)) > 1:
            raise ValueError("fault: at most one of status, drop and hold")
        if self.status is not None and not 400 <= int(self.status) <= 599:
            raise ValueError(f"fault: status {self.status} is not an error code")
        if self.drop not in (None, "before", "after"):
            raise ValueError(f"fault: drop is 'before' or 'after', not {self.drop!r}")
        if self.when not in ("before", "after"):
            raise ValueError(f"fault: when is 'before' or 'after', not {self.when!r}")
        if not (self.delay or self.status or self.drop or self.hold):
            raise ValueError("fault: give a delay, a status, a drop or a hold")

    def matches(self, verb: str, resource: str, name: str | None) -> bool:
        return ((self.verb == "*" or verb in self.verb.split("|"))
                and (self.resource == "*" or resource in self.resource.split("|"))
                and (self.name is None or self.name == name)
                and (self.times is None or self.fired < self.times))

    @classmethod
    def parse(cls, spec: str) -> "Fault":
        """`verb=update|patch,resource=configmaps,share=0.5,delay=2-10` (the CLI's --fault)."""
        fields: dict = {}
        for item in filter(None, (p.strip() for p in spec.split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                if key == "hold":
                    fields["hold"] = True
                    continue
                raise ValueError(f"fault: {item!r} is not key=value")
            if key in ("verb", "resource", "name", "drop", "when"):
                fields[key] = value
            elif key == "share":
                fields[key] = float(value)
            elif key in ("status", "times"):
                fields[key] = int(value)
            elif key == "retry_after":
                fields[key] = None if value in ("", "none") else int(value)
            elif key == "delay":
                low, dash, high = value.partition("-")
                fields[key] = (float(low), float(high)) if dash else float(low)
            elif key == "hold":
                fields[key] = value.lower() in ("1", "true", "yes")
            else:
                raise ValueError(f"fault: unknown key {key!r}")
        return cls(**fields)

    def describe(self) -> dict:
        out = asdict(self)
        if isinstance(self.delay, tuple):
            out["delay"] = list(self.delay)
        return out


class _Drop(Exception):
    """Close the connection without an answer."""


class FakeKubeAPI:
    def __init__(self, *, state: str | Path | None = None, faults: list[Fault] | None = None,
                 fault_seed: int | None = 0, clock_offset: float = 0.0):
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str, str], dict] = {}
        self.rv = 1000
        self.requests: list[Request] = []
        self.sims: dict[tuple[str, str], DeploymentSim] = {}
        self.conflicts: dict[tuple[str, str, str, str], int] = {}
        self.desired: dict[tuple[str, str], int] = {}  # (namespace, deployment) -> replicas the metrics ask for
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None
        self.state_path = Path(state) if state is not None else None
        self.state_writes = 0
        self.faults: list[Fault] = list(faults or [])
        self.rng = random.Random(fault_seed)
        self.clock_offset = clock_offset  # seconds added to the Date header's clock
        # The text of the resourceVersion a write hands out, from the counter (None: the counter as is).
        # A real API server's versions are opaque: a test sets e.g. a decreasing or non-numeric one.
        self.versions: Callable[[int], str] | None = None
        self.port = 0
        self._released = threading.Condition(self.lock)
        self._release_generation = 0
        self._holding = 0
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        if self.state_path is not None:
            self._load()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, port: int = 0) -> "FakeKubeAPI":
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                # As a real API server (Go's net/http) does: without it the headers and the body of an
                # answer, two writes, meet Nagle and the client's delayed ACK, ~40 ms per request.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with api.lock:
                    api._connections.add(self.connection)

            def finish(self):
                with api.lock:
                    api._connections.discard(self.connection)
                super().finish()

            def date_time_string(self, timestamp=None):
                return formatdate((time.time() if timestamp is None else timestamp) + api.clock_offset, usegmt=True)

            def _send(self, code: int, body, headers: dict | None = None):
                data = json.dumps(body).encode()
                self.send_response(code)  # with Date (date_time_string above) and Server
                self.send_header("Content-Type", "application/json")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if urlsplit(self.path).path.startswith("/fake/"):
                    self._send(*api.control(self.command, urlsplit(self.path).path, raw))
                    return
                try:
                    code, body, headers = api.serve(self.command, self.path, self.headers.get("Content-Type", ""),
                                                    raw, self.headers.get("Authorization"))
                except _Drop:
                    self.close_connection = True
                    return
                self._send(code, body, headers)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                import sys

                if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, OSError)):
                    super().handle_error(request, client_address)  # a client closing keep-alive is no error

        self._stopping.clear()
        self.server = Server(("127.0.0.1", port or self.port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.server is not None:
            self._stopping.set()
            with self.lock:
                self._released.notify_all()
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=5)
            with self.lock:
                connections = list(self._connections)
            for conn in connections:  # as a killed server does: open connections are reset
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.server = None

    def down(self) -> None:
        """The API server dies: it stops serving, in-flight delayed or held requests are dropped
        (unapplied when the fault was before applying), open connections are reset."""
        self.stop()

    def up(self) -> "FakeKubeAPI":
        """The API server comes back on the same port; with `state`, with what the state file holds
        (memory is discarded, as a new process would have it)."""
        if self.state_path is not None:
            self._load()
        return self.start(self.port)

    # -- state ----------------------------------------------------------------------------------

    def _load(self) -> None:
        with self.lock:
            self.objects.clear()
            if self.state_path is None or not self.state_path.exists():
                return
            data = json.loads(self.state_path.read_text())
            self.rv = int(data["resourceVersion"])
            for obj in data["objects"]:
                group, plural = self._kind_key(obj)
                meta = obj["metadata"]
                self.objects[(group, plural, meta["namespace"], meta["name"])] = obj
            self.desired = {(ns, name): n for ns, name, n in data.get("autoscalerDesired", [])}

    def _save(self) -> None:
        if self.state_path is None:
            return
        from opsctl.statefile import atomic_file

        data = {"resourceVersion": self.rv, "objects": list(self.objects.values()),
                "autoscalerDesired": [[ns, name, n] for (ns, name), n in self.desired.items()]}
        with atomic_file(self.state_path) as fh:
            json.dump(data, fh, separators=(",", ":"))
        self.state_writes += 1

    # -- faults ---------------------------------------------------------------------------------

    def inject(self, fault: Fault | None = None, **fields) -> Fault:
        """Add a fault (a `Fault`, or its fields as keywords); it applies from the next request."""
        fault = fault if fault is not None else Fault(**fields)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()
            self.release()

    def seed_faults(self, seed: int) -> None:
        with self.lock:
            self.rng.seed(seed)

    def release(self) -> None:
        """Let every request held so far go on."""
        with self.lock:
            self._release_generation += 1
            self._released.notify_all()

    def held(self) -> int:
        """How many requests wait on a hold now."""
        with self.lock:
            return self._holding

    @staticmethod
    def _classify(method: str, path: str) -> tuple[str, str, str | None] | None:
        segs = [s for s in urlsplit(path).path.split("/") if s]
        rest = segs[2:] if segs[:2] == ["api", "v1"] else segs[3:] if segs[:1] == ["apis"] else None
        if rest is None or len(rest) < 3 or rest[0] != "namespaces":
            return None
        name = rest[3] if len(rest) > 3 else None
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(method)
        return (verb, rest[2], name) if verb else None

    def _pick(self, method: str, path: str) -> tuple[Fault | None, float]:
        """At most one fault for this request (one draw: the matching shares partition [0, 1)) and its delay."""
        what = self._classify(method, path)
        if what is None:
            return None, 0.0
        with self.lock:
            matching = [f for f in self.faults if f.matches(*what)]
            if not matching:
                return None, 0.0
            draw, edge = self.rng.random(), 0.0
            for fault in matching:
                edge += fault.share
                if draw < edge:
                    fault.fired += 1
                    delay = fault.delay or 0.0
                    if isinstance(delay, tuple):
                        delay = self.rng.uniform(*delay)
                    return fault, float(delay)
        return None, 0.0

    def _wait(self, fault: Fault, delay: float, when: str) -> None:
        """Spend a fault's delay or hold at this point; a server going down meanwhile drops the request."""
        if fault.when != when:
            return
        if delay and self._stopping.wait(delay):
            raise _Drop
        if fault.hold:
            with self.lock:
                generation = self._release_generation
                self._holding += 1
                try:
                    while self._release_generation == generation and not self._stopping.is_set():
                        self._released.wait(1.0)
                finally:
                    self._holding -= 1
            if self._stopping.is_set():
                raise _Drop

    def serve(self, method: str, raw_path: str, content_type: str, raw: bytes,
              authorization: str | None = None) -> tuple[int, dict, dict]:
        """One request through the faults: (code, body, extra headers), or _Drop for no answer."""
        fault, delay = self._pick(method, raw_path)
        if fault is None:
            return (*self.handle(method, raw_path, content_type, raw, authorization), {})
        self._wait(fault, delay, "before")
        if fault.status or fault.drop == "before":
            with self.lock:
                parts = urlsplit(raw_path)
                self.requests.append(Request(method, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()},
                                             content_type.split(";")[0].strip(), None, authorization,
                                             f"status {fault.status}" if fault.status else "dropped before applying"))
            if fault.drop:
                raise _Drop
            code = int(fault.status)
            reason = REASONS.get(code, "InternalError")
            message = {409: "Operation cannot be fulfilled: the object has been modified; please apply your changes"
                            " to the latest version and try again",
                       429: "the server has received too many requests and has temporarily limited the rate"}.get(
                code, f"injected fault: {reason}")
            headers = {"Retry-After": str(fault.retry_after)} if code in (429, 503) and fault.retry_after is not None else {}
            return code, ApiError(code, reason, message).status(), headers
        code, body = self.handle(method, raw_path, content_type, raw, authorization, fault="faulted")
        self._wait(fault, delay, "after")
        if fault.drop == "after":
            with self.lock:
                self.requests[-1].fault = "dropped after applying"
            raise _Drop
        return code, body, {}

    def control(self, method: str, path: str, raw: bytes) -> tuple[int, dict]:
        """The control endpoint for a fake in another process: /fake/faults and /fake/release."""
        try:
            body = json.loads(raw) if raw else {}
            if path == "/fake/release" and method == "POST":
                self.release()
            elif path == "/fake/faults":
                if method == "DELETE":
                    self.clear_faults()
                elif method in ("POST", "PUT"):
                    items = body.get("faults", []) if isinstance(body, dict) else body
                    faults = [Fault(**{k: v for k, v in item.items() if k != "fired"}) for item in items]
                    with self.lock:
                        if method == "PUT":
                            self.faults = []
                            if isinstance(body, dict) and body.get("seed") is not None:
                                self.rng.seed(int(body["seed"]))
                        self.faults.extend(faults)
                elif method != "GET":
                    raise ValueError(f"{method} is not allowed on {path}")
            else:
                return 404, ApiError(404, "NotFound", f"no control endpoint {path}").status()
            with self.lock:
                return 200, {"faults": [f.describe() for f in self.faults], "held": self._holding,
                             "resourceVersion": str(self.rv)}
        except (ValueError, TypeError, AttributeError) as exc:
            return 400, ApiError(400, "BadRequest", str(exc)).status()

    # -- test hooks -----------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self.rv += 1
        return self.versions(self.rv) if self.versions is not None else str(self.rv)

    def seed(self, obj: dict) -> dict:
        """Store an object as if created (uid, resourceVersion, creationTimestamp assigned)."""
        with self.lock:
            group, plural = self._kind_key(obj)
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("namespace", "default")
            meta["uid"] = str(uuid.uuid4())
            meta["resourceVersion"] = self._next_rv()
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            if plural == "deployments":
                replicas = obj.setdefault("spec", {}).setdefault("replicas", 1)
                obj["status"] = {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                                 "updatedReplicas": replicas, "observedGeneration": 1}
            self.objects[(group, plural, meta["namespace"], meta["name"])] = obj
            self._save()
            return copy.deepcopy(obj)

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            self._reconcile_all()
            obj = self.objects.get((group, plural, namespace, name))
            return copy.deepcopy(obj) if obj else None

    def simulate_deployment(self, namespace: str, name: str, *, ready_delay: float = 0.5, schedulable: int = 1000):
        with self.lock:
            self.sims[(namespace, name)] = DeploymentSim(ready_delay, schedulable, time.monotonic())

    def set_autoscaler_desired(self, namespace: str, deployment: str, replicas: int) -> None:
        """What the autoscaler's metrics ask for (before its min/max clamp)."""
        with self.lock:
            self.desired[(namespace, deployment)] = replicas
            self._save()

    def inject_conflicts(self, group: str, plural: str, namespace: str, name: str, count: int) -> None:
        """The next `count` writes to the object find it changed by another writer just before."""
        with self.lock:
            self.conflicts[(group, plural, namespace, name)] = count

    def events(self, involved_name: str | None = None) -> list[dict]:
        with self.lock:
            return [copy.deepcopy(o) for (g, p, _ns, _n), o in sorted(self.objects.items(), key=lambda kv: int(kv[1]["metadata"]["resourceVersion"]))
                    if p == "events" and (involved_name is None or o.get("involvedObject", {}).get("name") == involved_name)]

    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]

    # -- request handling -----------------------------------------------------------------------

    def _kind_key(self, obj: dict) -> tuple[str, str]:
        api_version = obj.get("apiVersion", "v1")
        group = api_version.split("/")[0] if "/" in api_version else ""
        for (g, plural), (kind, _versions) in RESOURCES.items():
            if g == group and kind == obj.get("kind"):
                return g, plural
        raise ValueError(f"the fake does not serve {api_version} {obj.get('kind')}")

    def handle(self, method: str, raw_path: str, content_type: str, raw: bytes,
               authorization: str | None = None, fault: str | None = None) -> tuple[int, dict]:
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return 400, ApiError(400, "BadRequest", "the body of the request is not valid JSON").status()
        with self.lock:
            self.requests.append(Request(method, parts.path, query, content_type.split(";")[0].strip(), body,
                                         authorization, fault))
            before = self.rv
            try:
                return self._dispatch(method, parts.path, query, content_type.split(";")[0].strip(), body)
            except ApiError as exc:
                return exc.code, exc.status()
            finally:
                if self.rv != before or (method == "DELETE" and not query.get("dryRun")):
                    self._save()  # before the answer: what was acknowledged survives a restart

    def _route(self, path: str):
        segs = [s for s in path.split("/") if s]
        if segs[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 3:
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        if len(rest) < 3 or rest[0] != "namespaces":
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        namespace, plural = rest[1], rest[2]
        name = rest[3] if len(rest) > 3 else None
        sub = rest[4] if len(rest) > 4 else None
        resource = RESOURCES.get((group, plural))
        if resource is None or version not in resource[1]:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        if sub is not None and not (plural == "deployments" and sub in ("scale", "status")):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        return group, version, plural, namespace, name, sub, resource[0]

    def _dispatch(self, method, path, query, content_type, body):
        group, version, plural, namespace, name, sub, kind = self._route(path)
        dry_run = query.get("dryRun")
        if dry_run is not None and dry_run != "All":
            raise ApiError(400, "BadRequest", f'Invalid dry run value: "{dry_run}"; only "All" is accepted')
        manager = query.get("fieldManager")
        if manager is not None and not 0 < len(manager) <= 128:
            raise ApiError(422, "Invalid", "fieldManager must be 1 to 128 characters")
        if name is None:
            if method == "GET":
                items = [self._present(o, group, version) for (g, p, ns, _n), o in self.objects.items()
                         if g == group and p == plural and ns == namespace]
                return 200, {"kind": f"{kind}List", "apiVersion": f"{group}/{version}" if group else version,
                             "metadata": {"resourceVersion": str(self.rv)}, "items": items}
            if method == "POST":
                return 201, self._create(group, version, plural, kind, namespace, body, dry_run, manager)
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        key = (group, plural, namespace, name)
        self._reconcile(key)
        if key not in self.objects:
            raise ApiError(404, "NotFound", f'{plural}{"." + group if group else ""} "{name}" not found',
                           {"name": name, "group": group, "kind": plural})
        if method in ("PUT", "PATCH"):
            self._concurrent_writer(key)
        current = self.objects[key]
        if sub == "scale":
            return self._scale(method, key, current, content_type, body, dry_run, manager)
        if method == "GET":
            return 200, self._present(current, group, version)
        if method == "DELETE":
            pre = (body or {}).get("preconditions") or {} if isinstance(body, dict) else {}
            meta = current["metadata"]
            if (pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]) or (
                    pre.get("uid") and pre["uid"] != meta.get("uid")):
                raise ApiError(409, "Conflict",
                               f'Operation cannot be fulfilled on {plural}{"." + group if group else ""} "{name}":'
                               " the precondition for the delete does not hold (the object has been modified)",
                               {"name": name, "group": group, "kind": plural})
            if not dry_run:
                del self.objects[key]
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": {"name": name, "kind": plural}}
        if method == "PUT":
            if body is None:
                raise ApiError(400, "BadRequest", "a replace needs a body")
            if group not in BUILTIN_GROUPS and not (body.get("metadata") or {}).get("resourceVersion"):
                raise ApiError(422, "Invalid", f'{kind}.{group} "{name}" is invalid: metadata.resourceVersion:'
                                               " Invalid value: 0x0: must be specified for an update")
            updated = body
        elif method == "PATCH":
            updated = self._patched(current, group, content_type, body)
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")
        return 200, self._update(key, kind, group, version, current, updated, dry_run, manager)

    def _patched(self, current: dict, group: str, content_type: str, body) -> dict:
        if content_type == "application/json-patch+json":
            return json_patch(current, body)
        if content_type == "application/merge-patch+json":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            return merge_patch(current, body)
        if content_type == "application/strategic-merge-patch+json":
            if group not in BUILTIN_GROUPS:
                raise ApiError(415, "UnsupportedMediaType",
                               "the body of the request was in an unknown format - accepted media types include:"
                               " application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "a strategic merge patch must be a JSON object")
            return strategic_merge_patch(current, body)
        raise ApiError(415, "UnsupportedMediaType", f"the fake API server does not implement {content_type or 'this'} patches")

    def _concurrent_writer(self, key) -> None:
        left = self.conflicts.get(key, 0)
        if left > 0:
            self.conflicts[key] = left - 1
            obj = self.objects[key]
            annotations = obj["metadata"].setdefault("annotations", {})
            annotations["fake.example/concurrent-writes"] = str(int(annotations.get("fake.example/concurrent-writes", "0")) + 1)
            obj["metadata"]["resourceVersion"] = self._next_rv()

    def _check_rv(self, key, kind: str, current: dict, updated: dict) -> None:
        sent = (updated.get("metadata") or {}).get("resourceVersion")
        if sent and sent != current["metadata"]["resourceVersion"]:
            group, plural, _ns, name = key
            raise ApiError(409, "Conflict",
                           f'Operation cannot be fulfilled on {plural}{"." + group if group else ""} "{name}": the object'
                           " has been modified; please apply your changes to the latest version and try again",
                           {"name": name, "group": group, "kind": plural})

    def _update(self, key, kind, group, version, current, updated, dry_run, manager) -> dict:
        if not isinstance(updated, dict):
            raise ApiError(422, "Invalid", f"{kind}: the result is not an object")
        self._check_rv(key, kind, current, updated)
        updated = copy.deepcopy(updated)
        meta = updated.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "name", "namespace", "managedFields"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
        updated["apiVersion"], updated["kind"] = current["apiVersion"], current["kind"]
        if key[1] == "deployments":
            updated["status"] = current.get("status", {})
        self._validate(kind, updated)
        meta["generation"] = current["metadata"].get("generation", 1) + (
            1 if updated.get("spec") != current.get("spec") else 0)
        if dry_run:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
            return self._present(updated, group, version)
        meta["resourceVersion"] = self._next_rv()
        self._manage(meta, manager, f"{group}/{version}" if group else version)
        self.objects[key] = updated
        if key[1] == "deployments" and updated["spec"].get("replicas") != current["spec"].get("replicas"):
            self._scaled(key)
        return self._present(updated, group, version)

    def _create(self, group, version, plural, kind, namespace, body, dry_run, manager) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "a create needs an object body")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", f"{kind} is invalid: metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the object does not match the namespace on the request")
        meta["namespace"] = namespace
        key = (group, plural, namespace, meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists',
                           {"name": meta["name"], "kind": plural})
        obj["apiVersion"] = f"{group}/{version}" if group else version
        obj["kind"] = kind
        self._validate(kind, obj)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        if dry_run:
            return obj
        meta["resourceVersion"] = self._next_rv()
        self._manage(meta, manager, obj["apiVersion"])
        self.objects[key] = obj
        return copy.deepcopy(obj)

    @staticmethod
    def _manage(meta: dict, manager: str | None, api_version: str) -> None:
        if not manager:
            return
        entries = [e for e in meta.get("managedFields") or [] if e.get("manager") != manager]
        entries.append({"manager": manager, "operation": "Update", "apiVersion": api_version, "time": _now(),
                        "fieldsType": "FieldsV1", "fieldsV1": {}})
        meta["managedFields"] = entries

    def _present(self, obj: dict, group: str, version: str) -> dict:
        out = copy.deepcopy(obj)
        if group not in BUILTIN_GROUPS:
            out["apiVersion"] = f"{group}/{version}"
        return out

    # -- admission ------------------------------------------------------------------------------

    def _validate(self, kind: str, obj: dict) -> None:
        name = obj.get("metadata", {}).get("name")
        if kind == "ConfigMap":
            for k, v in (obj.get("data") or {}).items():
                if not isinstance(v, str):
                    raise ApiError(422, "Invalid", f'ConfigMap "{name}" is invalid: data[{k}]: must be a string')
        elif kind == "VirtualService":
            for i, route in enumerate((obj.get("spec") or {}).get("http") or []):
                dests = route.get("route") or []
                weights = [d.get("weight") for d in dests]
                if any(w is not None and (not isinstance(w, int) or w < 0) for w in weights):
                    raise ApiError(400, "BadRequest", f"admission webhook \"validation.istio.io\" denied the request:"
                                                      f" http[{i}]: weight must be a non-negative integer")
                if len(dests) > 1 and sum(w or 0 for w in weights) != 100:
                    raise ApiError(400, "BadRequest", f"admission webhook \"validation.istio.io\" denied the request:"
                                                      f" http[{i}]: total destination weight {sum(w or 0 for w in weights)} != 100")
                pct = (route.get("mirrorPercentage") or {}).get("value")
                if pct is not None and not 0 <= pct <= 100:
                    raise ApiError(400, "BadRequest", "admission webhook denied: mirrorPercentage must be in [0, 100]")
        elif kind == "HTTPRoute":
            for i, rule in enumerate((obj.get("spec") or {}).get("rules") or []):
                for ref in rule.get("backendRefs") or []:
                    w = ref.get("weight", 1)
                    if not isinstance(w, int) or not 0 <= w <= 1000000:
                        raise ApiError(422, "Invalid", f'HTTPRoute "{name}" is invalid: spec.rules[{i}].backendRefs.weight')
                for f in rule.get("filters") or []:
                    if f.get("type") == "RequestMirror":
                        mirror = f.get("requestMirror") or {}
                        if "backendRef" not in mirror:
                            raise ApiError(422, "Invalid", f"spec.rules[{i}].filters.requestMirror.backendRef: Required value")
                        if not 0 <= mirror.get("percent", 100) <= 100:
                            raise ApiError(422, "Invalid", f"spec.rules[{i}].filters.requestMirror.percent: 0-100")
        elif kind == "Lease":
            spec = obj.get("spec") or {}
            duration = spec.get("leaseDurationSeconds")
            if duration is not None and (not isinstance(duration, int) or duration <= 0):
                raise ApiError(422, "Invalid", f'Lease "{name}" is invalid: spec.leaseDurationSeconds: must be greater than 0')
            transitions = spec.get("leaseTransitions")
            if transitions is not None and (not isinstance(transitions, int) or transitions < 0):
                raise ApiError(422, "Invalid", f'Lease "{name}" is invalid: spec.leaseTransitions: must be >= 0')
        elif kind == "HorizontalPodAutoscaler":
            spec = obj.get("spec") or {}
            low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
            if not (spec.get("scaleTargetRef") or {}).get("name"):
                raise ApiError(422, "Invalid", f'HorizontalPodAutoscaler "{name}" is invalid: spec.scaleTargetRef.name: Required value')
            if not isinstance(high, int) or not isinstance(low, int) or low < 1 or high < low:
                raise ApiError(422, "Invalid", f'HorizontalPodAutoscaler "{name}" is invalid: need 1 <= minReplicas <= maxReplicas')
        elif kind == "ScaledObject":
            spec = obj.get("spec") or {}
            low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
            if not (spec.get("scaleTargetRef") or {}).get("name"):
                raise ApiError(422, "Invalid", f'ScaledObject "{name}" is invalid: spec.scaleTargetRef.name: Required value')
            if not isinstance(high, int) or not isinstance(low, int) or low < 0 or high < low:
                raise ApiError(400, "BadRequest", 'admission webhook "vscaledobject.kb.io" denied the request:'
                                                  " MinReplicaCount=%s must be less than MaxReplicaCount=%s" % (low, high))
        elif kind == "Deployment":
            replicas = (obj.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(422, "Invalid", f'Deployment "{name}" is invalid: spec.replicas: must be >= 0')

    # -- deployments ----------------------------------------------------------------------------

    def _scaled(self, key) -> None:
        _g, _p, namespace, name = key
        sim = self.sims.setdefault((namespace, name), DeploymentSim())
        sim.changed_at = time.monotonic()
        obj = self.objects[key]
        want = obj["spec"]["replicas"]
        status = obj.setdefault("status", {})
        status["replicas"] = want
        if status.get("readyReplicas", 0) > want:  # scale-down takes effect at once
            status["readyReplicas"] = status["availableReplicas"] = want

    def _autoscaler_bounds(self, namespace: str, name: str) -> tuple[int, int] | None:
        """(min, max) of the HPA or ScaledObject that drives this Deployment, if any."""
        for (g, p, ns, _n), obj in self.objects.items():
            if ns != namespace or p not in ("horizontalpodautoscalers", "scaledobjects"):
                continue
            spec = obj.get("spec") or {}
            ref = spec.get("scaleTargetRef") or {}
            if ref.get("name") != name or ref.get("kind", "Deployment") != "Deployment":
                continue
            if p == "horizontalpodautoscalers":
                return spec.get("minReplicas", 1), spec["maxReplicas"]
            return spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        return None

    def _autoscale(self, key) -> None:
        """The autoscaler's sync: replicas = clamp(desired, min, max), overwriting any scale patch."""
        bounds = self._autoscaler_bounds(key[2], key[3])
        if bounds is None:
            return
        low, high = bounds
        desired = self.desired.get((key[2], key[3]), low)
        want = max(low, min(high, desired))
        obj = self.objects[key]
        if obj["spec"].get("replicas") != want:
            obj["spec"]["replicas"] = want
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self._scaled(key)

    def _reconcile(self, key) -> None:
        if key[1] != "deployments" or key not in self.objects:
            return
        self._autoscale(key)
        obj = self.objects[key]
        sim = self.sims.get((key[2], key[3]))
        if sim is None:
            return
        status = obj.setdefault("status", {})
        target = min(obj["spec"]["replicas"], sim.schedulable)
        if status.get("readyReplicas", 0) < target and time.monotonic() - sim.changed_at >= sim.ready_delay:
            status["readyReplicas"] = status["availableReplicas"] = status["updatedReplicas"] = target
            status["observedGeneration"] = obj["metadata"].get("generation", 1)
            obj["metadata"]["resourceVersion"] = self._next_rv()  # the controller's status update

    def _reconcile_all(self) -> None:
        for key in list(self.objects):
            self._reconcile(key)

    def _scale(self, method, key, deployment, content_type, body, dry_run, manager):
        meta = deployment["metadata"]
        scale = {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                         "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": deployment["spec"]["replicas"]},
            "status": {"replicas": deployment.get("status", {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in
                                            ((deployment["spec"].get("selector") or {}).get("matchLabels") or {}).items())},
        }
        if method == "GET":
            return 200, scale
        if method == "PUT":
            updated = body
        elif method == "PATCH":
            updated = self._patched(scale, "apps", content_type, body)
        else:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on scale")
        replicas = (updated.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "Invalid", f'Scale "{meta["name"]}" is invalid: spec.replicas: must be >= 0')
        patched_deployment = copy.deepcopy(deployment)
        patched_deployment["spec"]["replicas"] = replicas
        patched_deployment["metadata"]["resourceVersion"] = (updated.get("metadata") or {}).get("resourceVersion")
        result = self._update(key, "Deployment", "apps", "v1", deployment, patched_deployment, dry_run, manager)
        scale["spec"]["replicas"] = replicas
        scale["metadata"]["resourceVersion"] = result["metadata"]["resourceVersion"]
        return 200, scale


def main(argv: list[str] | None = None) -> int:
    """Serve the fake on a fixed port until interrupted, so scenarios can be tried by hand."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python3 -m tests.fakes.kube_api", description=main.__doc__)
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--seed", action="append", default=[],
                        help="a YAML or JSON file of objects (a list, or documents separated by ---) to create first")
    parser.add_argument("--ready-delay", type=float, default=2.0, help="seconds until scaled pods are Ready")
    parser.add_argument("--state", metavar="FILE",
                        help="keep the objects and the resourceVersion counter in FILE across restarts (a seed"
                             " object already in it is not created again)")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC",
                        help="inject a fault, e.g. 'verb=update|patch,resource=configmaps,share=0.2,status=500'")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the RNG that picks faulted requests")
    parser.add_argument("--clock-offset", type=float, default=0.0, help="seconds added to the Date header's clock")
    args = parser.parse_args(argv)
    try:
        faults = [Fault.parse(spec) for spec in args.fault]
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    api = FakeKubeAPI(state=args.state, faults=faults, fault_seed=args.fault_seed, clock_offset=args.clock_offset)
    for path in args.seed:
        import yaml

        with open(path) as fh:
            for doc in yaml.safe_load_all(fh):
                for obj in doc if isinstance(doc, list) else [doc]:
                    if obj and api.get(*api._kind_key(obj), (obj.get("metadata") or {}).get("namespace", "default"),
                                       (obj.get("metadata") or {}).get("name")) is None:
                        api.seed(obj)
    for (_g, plural, namespace, name) in list(api.objects):
        if plural == "deployments":
            api.simulate_deployment(namespace, name, ready_delay=args.ready_delay)
    api.start(port=args.port)
    print(f"fake Kubernetes API on {api.url} (Ctrl-C stops it)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    api.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
