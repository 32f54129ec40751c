"""One `opsctl serve` for the fleet: every service of the catalog behind one webhook (issue 25 item 3).

    FleetService   one AutomationService per service (its own policies, rate limits, split, state,
                   delivery log, episodes, queue, workers, maintenance thread and Lease), and in front
                   of them the routing: each alert goes to the service its `metrics.service_label`
                   label names (default `service`), and to no other
    serve_fleet    the HTTP server (server.build_app) in front of a FleetService, one webhook token

Routing (docs/decisions/0035-one-serve-for-the-fleet.md):
  - an alert whose service label names a catalog service is handed to that service alone, as a
    message of its own alerts (same group key, receiver, status), so its delivery keys, episodes
    and policies are the ones it has when served alone;
  - an alert with no service label, or naming a service the catalog does not hold, is never acted
    on: counted (`opsctl_fleet_alerts_unrouted_total{reason}`), logged with its fingerprint and
    the value it carried, and named in the answer. A message of nothing but such alerts is answered
    422 (Alertmanager does not retry a 4xx, and counts it in its failed notifications); a message
    with some routed is answered as the routed ones were, the unrouted listed in the body;
  - a message for several services is handed to them concurrently (ROUTERS threads), and answered
    503 when any of them could not record it: Alertmanager retries the whole message, and the
    services that had recorded their part answer the retry as a duplicate;
  - a PagerDuty event names an incident, not a service: it goes to every service, and only the
    service holding an episode of that incident records anything against it.

Failure isolation: a service's actions run on its own workers (`automation.workers`, bounded queue
`automation.queue_size`), so a failing or hung actuator of one service holds that service's workers
only; its Lease is its own (`opsctl-<service>-serve`), so one service's leadership, fencing term
and elector stall never touch another's.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TYPE_CHECKING, Callable, NoReturn

from opsctl.automation.service import Answer, AutomationService
from opsctl.errors import ConfigError

if TYPE_CHECKING:
    from types import FrameType

    from prometheus_client.metrics_core import Metric
    from prometheus_client.samples import Sample

    from opsctl.automation.actions import Executor
    from opsctl.automation.payloads import Alert, AlertmanagerMessage, PagerDutyEvent
    from opsctl.config import Config

log = logging.getLogger("opsctl.automation")

ROUTERS = 8  # threads handing one message's parts to their services at once
MAX_NAMED = 20  # unrouted alerts named in one answer
MAX_UNKNOWN, OTHER = 50, "_other_"  # unknown service names counted (and logged once) each, then together
# What the server itself reads: one value for the whole fleet (set it in the catalog's _defaults.yaml).
SERVER_SETTINGS = ("bind", "token", "basic_auth_username", "pagerduty_secrets", "body_limit", "read_timeout",
                   "max_connections", "pagerduty_max_age", "dry_run")


def check_fleet(cfgs: list["Config"]) -> str:
    """The service label the fleet routes on; refused (exit 2) when the services disagree on it or
    on a setting the one server reads, or when a service would be ready only while leading (with a
    Lease per service a replica leads some services and follows others)."""
    if not cfgs:
        raise ConfigError("the catalog has no service to serve")
    first = cfgs[0]
    labels = {c.service_label for c in cfgs}
    if len(labels) != 1 or not first.service_label:
        raise ConfigError("one opsctl serve routes alerts by one service label: the catalog's services set"
                          f" metrics.service_label to {', '.join(sorted(repr(x) for x in labels))}",
                          hint="set metrics.service_label once, in the catalog's _defaults.yaml")
    for name in SERVER_SETTINGS:
        values = {c.service: getattr(c.automation, name) for c in cfgs}
        odd = [s for s, v in values.items() if v != values[first.service]]
        if odd:
            raise ConfigError(f"automation.{name} differs between services ({first.service} and {odd[0]}):"
                              " one opsctl serve has one value for it",
                              hint="set it once, in the catalog's _defaults.yaml")
    for c in cfgs:
        if c.automation.leader_election.ready_only_when_leader:
            raise ConfigError(f"{c.source_path}: automation.leader_election.ready_only_when_leader cannot hold for"
                              " a fleet: each service has its own Lease, so a replica leads some and follows others")
    return first.service_label


class _Policies:
    """What the server logs at start-up: how many policies the fleet acts by."""

    def __init__(self, services: dict[str, AutomationService]):
        self.policies = [p for s in services.values() for p in s.engine.policies]


class FleetMetrics:
    """`GET /metrics` of the fleet: each service's own series with `service="<name>"` added, and the
    server's (requests refused before any service is known, unrouted alerts, the recording and
    readiness gauges) without it."""

    def __init__(self, services: dict[str, AutomationService]):
        from prometheus_client import CollectorRegistry, Counter, disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        self.services = services
        self.own = CollectorRegistry(auto_describe=True)
        self._watched: set[str] = set()
        self.deliveries = Counter("opsctl_webhook_deliveries", "Webhook requests by source and answer.",
                                  ["source", "result"], registry=self.own)
        self.unrouted = Counter("opsctl_fleet_alerts_unrouted", "Alerts no service of the catalog takes, by"
                                " reason (missing_label, unknown_service): never acted on.", ["reason"],
                                registry=self.own)
        for reason in ("missing_label", "unknown_service"):
            self.unrouted.labels(reason)
        self.unknown = Counter("opsctl_fleet_alerts_unknown_service", "Alerts naming a service the catalog does"
                               f" not hold, by that name (the first {MAX_UNKNOWN} names; later ones as {OTHER})",
                               ["name"], registry=self.own)
        self._unknown_names: set[str] = set()
        self._unknown_lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Merged(self))

    def unknown_service(self, name: str) -> bool:
        """Count an alert naming `name`, a service the catalog lacks: True the first time (log it once)."""
        with self._unknown_lock:
            first = name not in self._unknown_names and len(self._unknown_names) < MAX_UNKNOWN
            if first:
                self._unknown_names.add(name)
            self.unknown.labels(name if name in self._unknown_names else OTHER).inc()
            return first

    def watch(self, name: str, documentation: str, value: Callable[[], float]) -> None:
        from prometheus_client import Gauge

        if name in self._watched:
            return
        self._watched.add(name)
        Gauge(name, documentation, registry=self.own).set_function(value)

    def delivery(self, source: str, result: str) -> None:
        self.deliveries.labels(source, result).inc()

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _Merged:
    """One family per metric name: the server's samples as they are, each service's with its name."""

    def __init__(self, metrics: FleetMetrics):
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        from prometheus_client.metrics_core import Metric

        families: dict[str, Metric] = {}
        sources = [(None, self.metrics.own)] + [(n, s.metrics.registry) for n, s in self.metrics.services.items()]
        for service, registry in sources:
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(family.name, family.documentation, family.type,
                                                            family.unit)
                merged.samples.extend(_label(s, service) for s in family.samples)
        return list(families.values())


def _label(sample: Sample, service: str | None) -> Sample:
    if service is None:
        return sample
    return sample._replace(labels={**sample.labels, "service": service})


class FleetService:
    """The services of a catalog behind one webhook, each acting alone (see the module's doc)."""

    def __init__(self, cfgs: list["Config"], executors: Callable[["Config"], "Executor"], *,
                 services: dict[str, AutomationService] | None = None):
        self.label = check_fleet(cfgs)
        self.cfgs = {c.service: c for c in cfgs}
        self.services = services or {c.service: AutomationService(c, executors(c)) for c in cfgs}
        self.metrics = FleetMetrics(self.services)
        self.engine = _Policies(self.services)
        self._routers = ThreadPoolExecutor(ROUTERS, thread_name_prefix="opsctl-route")
        self.started = False

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        for name, service in self.services.items():
            try:
                service.start()
            except Exception:  # one service that cannot start leaves the others serving
                log.exception("service %s: start-up failed", name)
        self.started = True

    def stop(self, timeout: float = 10.0) -> None:
        """Every service stops at once (each finishes what it holds and releases its Lease), so the
        fleet stops within one service's bound, not the sum of them."""
        threads = [threading.Thread(target=s.stop, args=(timeout,), name=f"opsctl-stop-{n}", daemon=True)
                   for n, s in self.services.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 5.0)
        self._routers.shutdown(wait=False, cancel_futures=True)
        self.started = False

    def ready(self) -> tuple[bool, str]:
        """Ready while any service can take deliveries: a service whose state cannot be reached must
        not take the others' webhooks away. The reason names every service that is not ready."""
        if not self.started:
            return False, "not started"
        bad = {}
        for name, service in self.services.items():
            ok, why = service.ready()
            if not ok:
                bad[name] = why
        if len(bad) == len(self.services):
            return False, "no service ready: " + "; ".join(f"{n}: {w}" for n, w in bad.items())
        ready = len(self.services) - len(bad)
        text = f"ready, {ready} of {len(self.services)} services"
        return True, text + ("; not ready: " + "; ".join(f"{n}: {w}" for n, w in bad.items()) if bad else "")

    # -- routing ------------------------------------------------------------------------------

    def route(self, message: "AlertmanagerMessage") -> tuple[dict[str, list[Alert]], list[dict[str, Any]]]:
        """The message's alerts by the service they name, and those no service takes (with why)."""
        parts: dict[str, list[Alert]] = {}
        unrouted: list[dict[str, Any]] = []
        for alert in message.alerts:
            value = alert.labels.get(self.label)
            if not value:
                unrouted.append({"fingerprint": alert.fingerprint, "reason": "missing_label",
                                 "detail": f"no {self.label} label"})
            elif value not in self.services:
                unrouted.append({"fingerprint": alert.fingerprint, "reason": "unknown_service", "service": value[:100],
                                 "detail": f"{self.label}={value[:100]!r} is not in the catalog"})
            else:
                parts.setdefault(value, []).append(alert)
        return parts, unrouted

    def urgent(self, message: "AlertmanagerMessage") -> bool:
        """Whether a policy of the service an alert names matches it (server.py's urgent lane)."""
        parts, _ = self.route(message)
        return any(self.services[name].urgent(dataclasses.replace(message, alerts=tuple(alerts)))
                   for name, alerts in parts.items())

    def accept_alertmanager(self, message: "AlertmanagerMessage", received_at: float) -> Answer:
        parts, unrouted = self.route(message)
        for item in unrouted:
            self.metrics.unrouted.labels(item["reason"]).inc()
            if item["reason"] != "unknown_service":
                log.warning("alert %s: %s: not acted on by any service (known: %s)", item["fingerprint"][:32],
                            item["detail"], ", ".join(sorted(self.services))[:300])
            elif self.metrics.unknown_service(item["service"]):  # one line per name, not per alert
                log.warning("alert %s: %s: not acted on by any service (known: %s); its alerts are counted in"
                            " opsctl_fleet_alerts_unknown_service_total, not logged again", item["fingerprint"][:32],
                            item["detail"], ", ".join(sorted(self.services))[:300])
        if not parts:
            self.metrics.delivery("alertmanager", "unrouted")
            return Answer(422, {"error": f"no alert names a service of the catalog in its {self.label} label:"
                                         " nothing recorded, nothing done",
                                "unrouted": unrouted[:MAX_NAMED], "unrouted_count": len(unrouted)})
        answers = self._each({name: functools.partial(self.services[name].accept_alertmanager,
                                                      dataclasses.replace(message, alerts=tuple(alerts)), received_at)
                              for name, alerts in parts.items()})
        body = _combined(answers)
        if unrouted:
            body["unrouted"], body["unrouted_count"] = unrouted[:MAX_NAMED], len(unrouted)
        return Answer(body.pop("_status"), body)

    def accept_pagerduty(self, event: "PagerDutyEvent", webhook_id: str, received_at: float) -> Answer:
        answers = self._each({name: functools.partial(service.accept_pagerduty, event, webhook_id, received_at)
                              for name, service in self.services.items()})
        body = _combined(answers)
        return Answer(body.pop("_status"), body)

    def _each(self, calls: dict[str, Callable[[], Answer]]) -> dict[str, Answer]:
        """Each call on its own router thread (one service's slow recording does not hold another's
        back); a single call runs here. An unexpected error is that service's 503."""
        def safe(name: str, call: Callable[[], Answer]) -> Answer:
            try:
                return call()
            except Exception:  # noqa: BLE001 - the sender retries; the others' parts stand
                log.exception("service %s: delivery failed", name)
                return Answer(503, {"error": "delivery failed: retry later"})

        if len(calls) == 1:
            [(name, call)] = calls.items()
            return {name: safe(name, call)}
        futures = {name: self._routers.submit(safe, name, call) for name, call in calls.items()}
        return {name: f.result() for name, f in futures.items()}


def _combined(answers: dict[str, Answer]) -> dict[str, Any]:
    """One answer for the services' answers: 503 when any was (the sender retries the message, the
    others answer the retry as a duplicate), else 202; `status` accepted when any part was new."""
    worst = 503 if any(a.status >= 500 for a in answers.values()) else max(a.status for a in answers.values())
    statuses = {a.body.get("status") for a in answers.values()}
    status = ("retry" if worst >= 500 else "accepted" if "accepted" in statuses
              else "duplicate" if statuses == {"duplicate"} else sorted(map(str, statuses))[0])
    body = {"_status": worst, "status": status, "services": {n: a.body for n, a in answers.items()}}
    for key in ("events", "new", "queued"):
        body[key] = sum(int(a.body.get(key, 0)) for a in answers.values())
    if worst >= 500:
        body["error"] = "a service could not record its part: retry later"
    return body


def serve_fleet(cfgs: list["Config"], *, bind: str | None, token_file: str | None, dry_run: bool,
                log_level: str = "info") -> None:
    """Every service of the catalog behind one server, under uvicorn until SIGINT/SIGTERM."""
    import signal

    import uvicorn

    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.auth import PagerDutySignatures, TokenAuth
    from opsctl.automation.server import OneLineFormatter, build_app, resolve_token, timed_protocol
    from opsctl.config import _check_bind
    from opsctl.errors import UsageError

    check_fleet(cfgs)
    if dry_run:
        cfgs = [dataclasses.replace(c, automation=dataclasses.replace(c.automation, dry_run=True)) for c in cfgs]
    first = cfgs[0]
    settings = first.automation
    try:
        host, port = _check_bind(bind or settings.bind)
    except ValueError as exc:
        raise UsageError(f"--bind: {exc}") from None
    token = TokenAuth.of(resolve_token(first, token_file), settings.basic_auth_username)
    secrets = [ref.resolve() for ref in settings.pagerduty_secrets]
    pagerduty = PagerDutySignatures.of(secrets) if secrets else None

    def executor(cfg: "Config") -> "Executor":
        if cfg.automation.dry_run:
            return DryRunExecutor()
        from opsctl.automation.executors import open_executor

        return open_executor(cfg)

    logging.basicConfig(level=getattr(logging, log_level.upper()))
    for handler in logging.getLogger().handlers:
        handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    fleet = FleetService(cfgs, executor)
    read_timeout = float(settings.read_timeout_seconds)
    # FleetService answers every call build_app makes on an AutomationService (accept_*, metrics, readiness)
    app = build_app(fleet, token, pagerduty, settings.body_limit, read_timeout,  # type: ignore[arg-type]
                    settings.pagerduty_max_age_seconds)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on",
                            timeout_keep_alive=5, limit_concurrency=settings.max_connections, server_header=False,
                            http=timed_protocol(read_timeout), h11_max_incomplete_event_size=16384)
    log.info("opsctl serve: listening on http://%s:%d for %d services (%s), routing on label %r%s", host, port,
             len(cfgs), ", ".join(fleet.services)[:300], fleet.label,
             ": dry run, nothing is changed" if settings.dry_run else "")

    def exit_cleanly(signum: int, frame: "FrameType | None") -> NoReturn:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, exit_cleanly)
    uvicorn.Server(config).run()
