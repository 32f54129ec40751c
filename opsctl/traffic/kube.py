"""The official kubernetes client, wrapped where it enters opsctl.

The client takes ~300 ms to import, so it is imported only inside these functions. Every call has
a timeout; API errors become opsctl errors (409 -> ConflictError, exit 5; `ApiException.body` is a
str holding a Status object, whose message is quoted). Writes use field manager `opsctl`.

Transient failures (429, 5xx, the server unreachable or the answer lost) are retried inside
`call()` with capped, jittered backoff under one deadline (the connection's `timeout`, at most
`RETRY_DEADLINE`, or the caller's `_deadline`), so an outage of a few seconds delays a call instead of failing it. Every write opsctl
sends carries the resourceVersion it read, so a retried write whose first try was applied meets
409 and its caller re-reads and recognises its own write (the change record's operation id, the
state document's content). `server_now()` is the API server's clock (the `Date` header of its
answers plus monotonic time since): what several hosts must order uses it, never their own clocks.
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import ConflictError, OpsctlError, UsageError

if TYPE_CHECKING:
    from opsctl.config import KubernetesSettings
    from opsctl.traffic.record import ChangeRecord

FIELD_MANAGER = "opsctl"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
TRANSIENT = (429, 500, 502, 503, 504)
RETRY_DEADLINE = 30.0  # the most seconds a call keeps retrying transient failures
RETRY_BASE, RETRY_CAP = 0.1, 2.0  # backoff: full jitter under base * 2^n, capped


def is_transient(exc: BaseException) -> bool:
    """A failure worth retrying: 429, 5xx, or no answer at all (unreachable, timed out, dropped)."""
    return getattr(exc, "unreachable", False) or getattr(exc, "status", None) in TRANSIENT


class Kube:
    """One API client per process and settings; `call()` runs an API method with opsctl's error mapping."""

    def __init__(self, settings: "KubernetesSettings", base_dir: Path | str = ".", *, resend: bool = True):
        self.settings = settings
        self.base_dir = Path(base_dir)
        # resend: urllib3 sends a request once more after a dropped connection or a read timeout, with
        # the same timeout (so a call may take twice its deadline). The Lease's own client turns it off.
        self.resend = resend
        self._client = None
        self._offset: float | None = None  # server time - monotonic time, from the answers' Date headers
        self._offset_lock = threading.Lock()
        # A call keeps retrying for as long as one attempt may take (`timeout`), at most RETRY_DEADLINE.
        self.retry_deadline = min(RETRY_DEADLINE, float(settings.timeout))
        self.transient_retries = 0  # how many transient failures call() retried (for tests and /metrics)

    @property
    def where(self) -> str:
        if self.settings.host:
            return self.settings.host
        if self._client is not None:
            return self._client.configuration.host
        return "the Kubernetes API"

    @property
    def client(self) -> Any:  # a kubernetes ApiClient (the client is untyped)
        if self._client is None:
            client = _api_client(self.settings, self.base_dir, resend=self.resend)
            send = client.call_api

            def call_api(*args: Any, **kwargs: Any) -> Any:  # every answer, error or not, tells the server's time
                response = send(*args, **kwargs)
                self._saw_date(response.getheader("Date"))
                return response

            client.call_api = call_api
            self._client = client
        return self._client

    # -- the API server's clock -------------------------------------------------------------------

    def _saw_date(self, header: str | None) -> None:
        if not header:
            return
        from email.utils import parsedate_to_datetime

        try:
            server = parsedate_to_datetime(header).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        # Date is whole seconds, rounded down: each answer bounds the server's time from below, so
        # the largest bound seen is the best estimate, and the estimate never runs backwards.
        offset = server - time.monotonic()
        with self._offset_lock:
            if self._offset is None or offset > self._offset:
                self._offset = offset

    def server_now(self) -> float:
        """The API server's time now: its last answers' Date plus monotonic time since. Before any
        answer, one cheap read asks it (`/version`); the local clock only when it cannot be reached."""
        if self._offset is None:
            try:
                self.call("read the API server's time", self._version, _deadline=2.0)
            except OpsctlError:
                pass
        if self._offset is None:
            from opsctl.clock import wall_now

            return wall_now()
        return time.monotonic() + self._offset

    def _version(self, **kwargs: Any) -> Any:
        from kubernetes.client import VersionApi

        return VersionApi(self.client).get_code(**kwargs)

    def core(self) -> Any:
        from kubernetes.client import CoreV1Api

        return CoreV1Api(self.client)

    def apps(self) -> Any:
        from kubernetes.client import AppsV1Api

        return AppsV1Api(self.client)

    def custom(self) -> Any:
        from kubernetes.client import CustomObjectsApi

        return CustomObjectsApi(self.client)

    def call(self, what: str, method: Callable[..., Any], *args: Any, _deadline: float | None = None,
             **kwargs: Any) -> Any:
        """Run `method`, retrying transient failures with capped backoff until `_deadline` seconds
        (default `retry_deadline`) have passed; 409, 404 and the rest raise at once."""
        deadline = time.monotonic() + (self.retry_deadline if _deadline is None else _deadline)
        for attempt in range(1, 1000):
            try:
                return self._call_once(what, method, args, dict(kwargs), deadline)
            except OpsctlError as exc:
                if not is_transient(exc):
                    raise
                wait = random.random() * min(RETRY_CAP, RETRY_BASE * 2 ** (attempt - 1))
                if time.monotonic() + wait >= deadline:
                    raise
                self.transient_retries += 1
                time.sleep(wait)  # backoff between tries of a remote call
        raise AssertionError("unreachable")

    def _call_once(self, what: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                   deadline: float) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        left = max(0.5, deadline - time.monotonic())
        kwargs.setdefault("_request_timeout", min(self.settings.timeout, left))
        try:
            return method(*args, **kwargs)
        except ApiException as exc:
            raise api_error(exc, what) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            error = OpsctlError(
                f"{what}: cannot reach {self.where}: {_cause(exc)}",
                hint="check traffic.kubernetes (host / kubeconfig / context) and that the API server is up",
            )
            error.unreachable = True
            raise error from exc

    def record_event(self, *, involved: dict[str, Any], reason: str, message: str, warning: bool = False,
                     action: str = "Update") -> str:
        """Create a core/v1 Event on `involved` (apiVersion, kind, name, namespace, uid)."""
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        host = socket.gethostname()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.", "namespace": involved["namespace"]},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "action": action,
            "source": {"component": FIELD_MANAGER, "host": host},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        event = self.call(
            f"record an Event on {involved['kind']} {involved['namespace']}/{involved['name']}",
            self.core().create_namespaced_event, involved["namespace"], body, field_manager=FIELD_MANAGER,
        )
        return f"Event {involved['namespace']}/{event.metadata.name} ({reason})"


def _api_client(settings: "KubernetesSettings", base_dir: Path, *, resend: bool = True) -> Any:
    from kubernetes import client

    configuration = _configuration(settings, base_dir)
    configuration.retries = 1 if resend else 0
    return client.ApiClient(configuration)


def _configuration(settings: "KubernetesSettings", base_dir: Path) -> Any:
    from kubernetes import client, config

    if settings.host:
        return client.Configuration(host=settings.host.rstrip("/"))
    kubeconfig = settings.kubeconfig
    if kubeconfig:
        path = Path(os.path.expanduser(kubeconfig))
        kubeconfig = str(path if path.is_absolute() else base_dir / path)
    else:
        env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        default = Path(os.path.expanduser(env or "~/.kube/config"))
        if default.is_file():
            kubeconfig = str(default)
    try:
        if kubeconfig:
            configuration = client.Configuration()
            config.load_kube_config(config_file=kubeconfig, context=settings.context,
                                    client_configuration=configuration, persist_config=False)  # type: ignore[no-untyped-call]  # kubernetes.config is untyped
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # untyped
        else:
            raise UsageError(
                "no Kubernetes access: no kubeconfig found and not running in a cluster",
                hint="set traffic.kubernetes.kubeconfig (or $KUBECONFIG), or traffic.kubernetes.host for `kubectl proxy`",
            )
    except config.ConfigException as exc:
        raise UsageError(f"cannot load Kubernetes credentials ({kubeconfig or 'in-cluster'}): {exc}") from exc
    return configuration


def status_message(body: str | None) -> str:
    """The message of the Status object in an error body (a str), else the body's start."""
    if not body:
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:300]
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:500]
    return body.strip()[:300]


def api_error(exc: Any, what: str) -> OpsctlError:  # exc: a kubernetes ApiException
    """The opsctl error for an ApiException; `.status` keeps the HTTP status for callers that branch on it."""
    error = _api_error(exc, what)
    error.status = exc.status
    return error


def _api_error(exc: Any, what: str) -> OpsctlError:
    message = status_message(exc.body) or (exc.reason or "")
    status = exc.status
    if status == 409:
        return ConflictError(f"{what}: conflict with a concurrent change: {message}")
    if status == 404:
        return UsageError(f"{what}: not found: {message}", hint="check the namespace and name in the traffic / capacity config")
    if status in (401, 403):
        return OpsctlError(
            f"{what}: the API server refused access (HTTP {status}): {message}",
            hint="opsctl needs get and patch on the target, patch on deployments/scale, and create on events",
        )
    if status in (400, 415, 422):
        return UsageError(f"{what}: the API server rejected the request (HTTP {status}): {message}")
    return OpsctlError(f"{what}: the API server failed (HTTP {status}): {message}")


def _cause(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc)[:300]


class CustomObject:
    """One namespaced custom object (a VirtualService, an HTTPRoute) that an actuator reads and
    merge-patches. A dict patch on a custom object is a JSON merge patch, which replaces lists whole:
    callers send whole lists recomputed from the object as read, and `patch()` puts that object's
    resourceVersion in the body, so the API server answers 409 if anything changed in between."""

    def __init__(self, kube: Kube, *, group: str, version: str, plural: str, kind: str, namespace: str,
                 name: str, target: str):
        self.kube = kube
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespace, self.name, self.target = namespace, name, target
        self.last: dict[str, Any] | None = None  # the object as last read or written

    def get(self) -> dict[str, Any]:
        last: dict[str, Any] = self.kube.call(
            f"read {self.target}", self.kube.custom().get_namespaced_custom_object,
            self.group, self.version, self.namespace, self.plural, self.name,
        )
        self.last = last
        return last

    def at_version(self, version: str) -> dict[str, Any]:
        """The object as read at `version`; ConflictError if it has moved on since."""
        obj = self.last if self.last is not None and self.last["metadata"]["resourceVersion"] == version else self.get()
        if obj["metadata"]["resourceVersion"] != version:
            raise ConflictError(f"{self.target} changed since it was read (resourceVersion {version}"
                                f" -> {obj['metadata']['resourceVersion']})")
        return obj

    def record(self, obj: dict[str, Any]) -> "ChangeRecord":
        """The change record in the object's annotation (an empty one when absent or damaged)."""
        from opsctl.traffic import record as records

        try:
            return records.parse(((obj.get("metadata") or {}).get("annotations") or {}).get(records.ANNOTATION),
                                 self.target)
        except OpsctlError:
            return records.empty()

    def patch_spec(self, spec: dict[str, Any], version: str, *, dry_run: bool,
                   record: "ChangeRecord | None" = None) -> dict[str, Any]:
        body: dict[str, Any] = {"metadata": {"resourceVersion": version}, "spec": spec}
        if record is not None:  # the record rides in the same write as the split
            from opsctl.traffic import record as records

            body["metadata"]["annotations"] = {records.ANNOTATION: record.encode()}
        result: dict[str, Any] = self.kube.call(
            f"patch {self.target}", self.kube.custom().patch_namespaced_custom_object,
            self.group, self.version, self.namespace, self.plural, self.name, body,
            field_manager=FIELD_MANAGER, dry_run="All" if dry_run else None, _content_type=MERGE_PATCH,
        )
        if not dry_run:
            self.last = result
        return result

    def record_event(self, message: str, *, warning: bool) -> str | None:
        if self.last is None:
            return None
        return self.kube.record_event(
            involved=object_ref(self.last, f"{self.group}/{self.version}", self.kind),
            reason="TrafficSplitChanged", message=message, warning=warning,
        )


def object_ref(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """An ObjectReference for an Event, from an object as a dict."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
