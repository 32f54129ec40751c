"""Capacity of the internal backend: can its ready replicas carry a new share of the current traffic?

    needed rps = current request rate x share / 100 x (1 + headroom)
    capacity   = ready replicas x rps_per_replica

The current request rate is `sum(rate(llm_proxy_requests_total[W]))` over every backend and
outcome, from the metric source; None (no series) is no data, never zero. When short, `ensure()`
scales the Deployment through its scale subresource (resourceVersion in the patch, 409 -> re-read)
up to `max_replicas` and waits for ready replicas until `ready_timeout`; when GPUs are still short
it reports the share that fits, so a failover can move only that much. A failover does not wait
(`wait=False`): it moves what the ready replicas carry now and tops up as more become Ready.

With an HPA or a KEDA ScaledObject driving the Deployment (`capacity.autoscaler`), scaling raises
the autoscaler's minimum instead (minReplicas / minReplicaCount, compare-and-swap on its
resourceVersion), saving the original in annotation `opsctl.io/saved-min-replicas`;
`restore_minimum()` puts it back when the incident's traffic is restored.

A vendor backend listed in `capacity.vendors` has a provisioned throughput instead of replicas
(requests/s or tokens/s, configured or read from the endpoint's metrics by a query):

    needed = current requests/s (or prompt + completion tokens/s) x share / 100 x (1 + headroom)

`vendor_reading()` reads it; the capacity guard refuses a routine move toward the vendor beyond it
and caps a failover toward it at the share that fits.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable

from opsctl.errors import ConflictError, NoDataError, OpsctlError, UsageError
from opsctl.metrics import schema
from opsctl.traffic.capacity_reading import CapacityReading, EnsureResult, VendorReading

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.config import CapacityConfig, Config
    from opsctl.metrics.base import MetricSource
    from opsctl.traffic.kube import Kube


def _selector(metric: str, *matchers: str) -> str:
    body = ",".join(m for m in matchers if m)
    return f"{metric}{{{body}}}" if body else metric


def rate_query(capacity: "CapacityConfig", backend: str | None = None, scope: str = "") -> str:
    """`scope`: the service matcher (Config.service_matcher), so two services' traffic never sums."""
    window = capacity.rate_window.seconds
    selector = _selector(schema.REQUESTS, scope, f'backend="{backend}"' if backend else "")
    return f"sum(rate({selector}[{window}s]))"


def token_rate_queries(capacity: "CapacityConfig", scope: str = "") -> list[str]:
    window = capacity.rate_window.seconds
    return [f"sum(rate({_selector(m, scope)}[{window}s]))" for m in (schema.PROMPT_TOKENS, schema.COMPLETION_TOKENS)]


def vendor_reading(cfg: "Config", backend: str, source: "MetricSource", at: float) -> VendorReading:
    """The vendor's provisioned throughput (configured, or its query's answer) and the service's
    current traffic in the same unit, from the metric source (None where a query has no data)."""
    cap = _settings(cfg)
    vendor = cap.vendors[backend]
    unit = vendor.measure
    scope = cfg.service_matcher
    queries = [rate_query(cap, scope=scope)] if unit == "requests" else token_rate_queries(cap, scope)
    if vendor.query is not None:
        queries.append(vendor.query)
    answers = source.query_many(queries, at)
    if vendor.query is not None:
        provisioned, answers, where = answers[-1], answers[:-1], f"query {vendor.query}"
    else:
        provisioned = vendor.requests_per_second if unit == "requests" else vendor.tokens_per_second
        where = "configured"
    known = [a for a in answers if a is not None]
    total = sum(known) if len(known) == len(answers) else None
    return VendorReading(backend, unit, provisioned, vendor.headroom, total, where)


def _settings(cfg: "Config") -> "CapacityConfig":
    if cfg.capacity is None:
        raise UsageError("capacity is not configured (no `capacity:` section)")
    return cfg.capacity


def no_source() -> "MetricSource":
    """The metric source of a Capacity that only counts replicas (a failover's top-ups, releasing
    the autoscaler's minimum): asked for rates, it has no data."""
    raise NoDataError("no metric source: this capacity check counts replicas only")


# (what, get(), patch(body, dry_run), min field, max field, max default) of an autoscaler
Autoscaler = tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any], bool], None], str, str, int]


class Capacity:
    def __init__(self, cfg: "Config", source: Callable[[], "MetricSource"], at: Callable[[], float], *,
                 kube: "Kube | None" = None, clock: "Clock | None" = None):
        from opsctl.clock import WallClock

        self.cfg = cfg
        self.settings: CapacityConfig = _settings(cfg)
        self._source = source
        self._at = at
        self._kube = kube
        self.clock: Clock = clock or WallClock()
        s = self.settings
        self.namespace = s.namespace or cfg.traffic.kubernetes.namespace
        self.where = f"Deployment {self.namespace}/{s.deployment}" if s.source == "kubernetes" else "static replicas"

    @property
    def kube(self) -> "Kube":
        if self._kube is None:
            from opsctl.traffic.registry import kube_for

            self._kube = kube_for(self.cfg.traffic.kubernetes, self.cfg.base_dir)
        return self._kube

    # -- reading ----------------------------------------------------------------------------------

    def ready_replicas(self) -> int:
        return self._replicas()[0]

    def read_replicas(self) -> tuple[int, int]:
        """(ready, desired) replicas: the Deployment's status and spec, or the static count twice."""
        return self._replicas()

    def _replicas(self) -> tuple[int, int]:
        """(ready, desired) replicas of the Deployment."""
        s = self.settings
        if s.source == "static":
            replicas = s.replicas or 0  # set: the config refuses source static without replicas
            return replicas, replicas
        dep = self._deployment()
        ready = (dep.get("status") or {}).get("readyReplicas") or 0
        desired = (dep.get("spec") or {}).get("replicas") or 0
        return int(ready), int(desired)

    def _deployment(self) -> dict[str, Any]:
        """The Deployment as plain JSON: only replicas and status are needed, so the client's full
        model (strict about every field of the pod template) is not built."""
        import json

        response = self.kube.call(f"read {self.where}", self.kube.apps().read_namespaced_deployment_status,
                                  self.settings.deployment, self.namespace, _preload_content=False)
        deployment: dict[str, Any] = json.loads(response.data)
        return deployment

    def _rates(self) -> tuple[float | None, float | None]:
        try:
            source = self._source()
        except NoDataError:
            return None, None
        total, own = source.query_many([rate_query(self.settings, scope=self.cfg.service_matcher),
                                        rate_query(self.settings, self.settings.backend, self.cfg.service_matcher)],
                                       self._at())
        return total, own

    def read(self) -> CapacityReading:
        ready, desired = self._replicas()
        total, own = self._rates()
        s = self.settings
        return CapacityReading(s.backend, ready, desired, s.max_replicas, s.rps_per_replica, s.headroom,
                               total, own, self.where)

    # -- scaling ----------------------------------------------------------------------------------

    def ensure(self, share: int, *, dry_run: bool, reason: str = "",
               progress: Callable[[str], None] | None = None, wait: bool = True, preview: bool = False) -> EnsureResult:
        """Make the ready replicas carry `share`% of current traffic, scaling up to max_replicas.
        With wait=False the scale is asked for and what the replicas ready now carry is reported.
        With preview=True only read: what the replicas would carry once scaled as a change would."""
        reading = self.read()
        result = EnsureResult(share, reading.max_share(), reading)
        needed = reading.replicas_for(share)
        if needed is None or reading.ready >= needed:
            return result
        s = self.settings
        target = min(needed, s.max_replicas)
        if target <= reading.ready:
            result.notes.append(f"already at {reading.ready} ready replicas; max_replicas is {s.max_replicas}")
            return result
        if s.source == "static":
            result.notes.append("static capacity: opsctl cannot scale it")
            return result
        if preview:  # read-only: what the change would ask for, nothing sent (not even a server-side dry run)
            if target > reading.desired:
                result.scaled_from, result.scaled_to = reading.desired, target
            result.notes.append(f"preview: would scale {self.where} to {target} replicas and wait for them")
            result.fits = reading.max_share(target)
            return result
        if target > reading.desired:
            result.scaled_from, result.scaled_to = reading.desired, target
            if s.autoscaler != "none":
                target = self._raise_minimum(target, dry_run=dry_run, reason=reason, share=share)
                result.scaled_to = target
            else:
                self._scale_to(target, dry_run=dry_run, reason=reason, share=share)
        if not wait and not dry_run:
            result.fits = reading.max_share()
            result.notes.append(f"moving what the {reading.ready} ready replicas carry now; {target} asked for,"
                                " topping up as they become Ready")
            return result
        if dry_run:
            result.notes.append(f"dry run: would scale {self.where} to {target} replicas and wait for them")
            result.fits = reading.max_share(target)  # what it would carry once ready
            result.reading = reading
            return result
        ready, waited, timed_out = self._wait_ready(target, progress)
        reading.ready = ready
        result.reading = reading
        result.fits = reading.max_share(ready)
        result.waited = waited
        result.timed_out = timed_out
        if timed_out:
            result.notes.append(f"only {ready} of {target} replicas ready after {s.ready_timeout}")
        return result

    def _scale_to(self, replicas: int, *, dry_run: bool, reason: str, share: int) -> None:
        from opsctl.traffic.kube import FIELD_MANAGER, MERGE_PATCH

        s = self.settings
        apps = self.kube.apps()
        last: ConflictError | None = None
        for _ in range(self.cfg.traffic.conflict_attempts):
            scale = self.kube.call(f"read the scale of {self.where}", apps.read_namespaced_deployment_scale,
                                   s.deployment, self.namespace)
            current = (scale.spec.replicas if scale.spec else None) or 0
            if current >= replicas:
                return  # someone (an HPA, a person) already scaled at least as far
            body = {"metadata": {"resourceVersion": scale.metadata.resource_version}, "spec": {"replicas": replicas}}
            try:
                self.kube.call(f"scale {self.where}", apps.patch_namespaced_deployment_scale, s.deployment,
                               self.namespace, body, field_manager=FIELD_MANAGER,
                               dry_run="All" if dry_run else None, _content_type=MERGE_PATCH)
            except ConflictError as exc:
                last = exc
                continue
            if not dry_run:
                self._event(current, replicas, reason, share)
            return
        raise ConflictError(f"could not scale {self.where}: {self.cfg.traffic.conflict_attempts} attempts met"
                            f" concurrent changes ({last})")

    # -- autoscalers (HPA, KEDA ScaledObject) ----------------------------------------------------

    SAVED = "opsctl.io/saved-min-replicas"

    def _autoscaler(self) -> Autoscaler:
        """(what, get(), patch(body), min field, max field, max default) for the configured autoscaler."""
        s = self.settings
        name = s.autoscaler_name or s.deployment
        if s.autoscaler == "hpa":
            from kubernetes.client import AutoscalingV2Api

            api = AutoscalingV2Api(self.kube.client)
            what = f"HorizontalPodAutoscaler {self.namespace}/{name}"

            def get_hpa() -> dict[str, Any]:
                import json

                raw = self.kube.call(f"read {what}", api.read_namespaced_horizontal_pod_autoscaler, name, self.namespace,
                                     _preload_content=False)
                hpa: dict[str, Any] = json.loads(raw.data)
                return hpa

            def patch_hpa(body: dict[str, Any], dry_run: bool) -> None:
                from opsctl.traffic.kube import FIELD_MANAGER, MERGE_PATCH

                self.kube.call(f"patch {what}", api.patch_namespaced_horizontal_pod_autoscaler, name, self.namespace,
                               body, field_manager=FIELD_MANAGER, dry_run="All" if dry_run else None,
                               _content_type=MERGE_PATCH, _preload_content=False)

            return what, get_hpa, patch_hpa, "minReplicas", "maxReplicas", 1
        custom = self.kube.custom()
        what = f"ScaledObject {self.namespace}/{name}"

        def get() -> dict[str, Any]:
            scaled: dict[str, Any] = self.kube.call(f"read {what}", custom.get_namespaced_custom_object, "keda.sh",
                                                    "v1alpha1", self.namespace, "scaledobjects", name)
            return scaled

        def patch(body: dict[str, Any], dry_run: bool) -> None:
            from opsctl.traffic.kube import FIELD_MANAGER, MERGE_PATCH

            self.kube.call(f"patch {what}", custom.patch_namespaced_custom_object, "keda.sh", "v1alpha1",
                           self.namespace, "scaledobjects", name, body, field_manager=FIELD_MANAGER,
                           dry_run="All" if dry_run else None, _content_type=MERGE_PATCH)

        return what, get, patch, "minReplicaCount", "maxReplicaCount", 100

    def _raise_minimum(self, replicas: int, *, dry_run: bool, reason: str, share: int) -> int:
        """Raise the autoscaler's minimum to `replicas` (capped at its maximum); returns the new minimum."""
        what, get, patch, low_key, high_key, high_default = self._autoscaler()
        last: ConflictError | None = None
        for _ in range(self.cfg.traffic.conflict_attempts):
            obj = get()
            spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
            low: int = spec.get(low_key, 1 if low_key == "minReplicas" else 0)
            wanted: int = min(replicas, spec.get(high_key, high_default))
            if low >= wanted:
                return low  # already at least that high
            annotations = meta.get("annotations") or {}
            body: dict[str, Any] = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "spec": {low_key: wanted}}
            if self.SAVED not in annotations:  # the first raise saves the original; later ones keep it
                body["metadata"]["annotations"] = {self.SAVED: str(low)}
            try:
                patch(body, dry_run)
            except ConflictError as exc:
                last = exc
                continue
            if not dry_run:
                self._event(low, wanted, reason, share, what=f"{what} {low_key}")
            return wanted
        raise ConflictError(f"could not raise the minimum of {what}: {self.cfg.traffic.conflict_attempts} attempts"
                            f" met concurrent changes ({last})")

    def restore_minimum(self) -> str | None:
        """Put the autoscaler's minimum back to what it was before opsctl raised it; a description of
        what was done, or None when nothing was raised."""
        if self.settings.source != "kubernetes" or self.settings.autoscaler == "none":
            return None
        what, get, patch, low_key, _high, _default = self._autoscaler()
        for _ in range(self.cfg.traffic.conflict_attempts):
            obj = get()
            meta = obj.get("metadata") or {}
            saved = (meta.get("annotations") or {}).get(self.SAVED)
            if saved is None or not saved.isdigit():
                return None
            body = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {self.SAVED: None}},
                    "spec": {low_key: int(saved)}}
            try:
                patch(body, False)
            except ConflictError:
                continue
            return f"{what} {low_key} back to {saved}"
        return None

    def _event(self, before: int, after: int, reason: str, share: int, what: str | None = None) -> None:
        try:
            meta = self._deployment()["metadata"]
            self.kube.record_event(
                involved={"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                          "namespace": meta["namespace"], "uid": meta.get("uid")},
                reason="ScaledForTraffic",
                message=(f"opsctl raised {what} {before} -> {after}" if what else
                         f"opsctl scaled {before} -> {after} replicas") + f" to carry {share}% of traffic"
                        + (f": {reason}" if reason else ""),
                action="Scale",
            )
        except OpsctlError:
            pass  # the scale happened; a missing Event is not worth failing a failover over

    def _wait_ready(self, target: int, progress: Callable[[str], None] | None) -> tuple[int, float, bool]:
        s = self.settings
        timeout = s.ready_timeout.seconds
        poll = max(s.poll_interval.seconds, 0) or 1
        started = self.clock.now()
        deadline = started + timeout
        polls = int(timeout / poll) + 2  # the loop is bounded even if the clock misbehaves
        ready = 0
        for _ in range(polls):
            ready, _desired = self._replicas()
            if ready >= target:
                return ready, self.clock.now() - started, False
            now = self.clock.now()
            if now >= deadline:
                break
            if progress:
                progress(f"waiting for {self.where}: {ready}/{target} replicas ready"
                         f" ({int(deadline - now)}s left)")
            self.clock.sleep(min(poll, max(deadline - now, 0)))
        return ready, self.clock.now() - started, True
