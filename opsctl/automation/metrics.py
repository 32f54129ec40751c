"""`GET /metrics` of `opsctl serve`, in the Prometheus text format (prometheus_client, own registry).

    opsctl_webhook_deliveries_total{source, result}       every request to a webhook endpoint, by answer:
                                                          accepted, duplicate, unauthorized, forbidden,
                                                          bad_request, too_large, unsupported_media_type,
                                                          queue_full
    opsctl_automation_actions_total{policy, action, status}
                                                          every action: status applied, noop, dry_run,
                                                          skipped, refused (by a guard), failed
    opsctl_automation_action_latency_seconds{action}      delivery arrival -> action done (restore:
                                                          hold-down end -> done)
    opsctl_automation_events_total{result}                events handled: done, retried, failed, and
                                                          no_policy (recorded, never queued)
    opsctl_automation_queue_depth / _queue_capacity       queued + in-flight events, and the bound
    opsctl_automation_deliveries_waiting                  deliveries waiting for a retry: a try could not act
                                                          (pending again, attempts > 0, or being retried),
                                                          counted by the maintenance sweep (every second),
                                                          never lower than events_total shows; 0 on a follower
    opsctl_serve_leader                                   1 while this replica acts (leader or single)
    opsctl_serve_recording                                deliveries being recorded off the event loop
    opsctl_serve_ready                                    1 when the last background readiness check passed
"""

from __future__ import annotations

from typing import Callable

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ServeMetrics:
    def __init__(self, queue_depth: Callable[[], int], queue_capacity: int,
                 leader: Callable[[], bool] = lambda: True, waiting: Callable[[], int] = lambda: 0):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

        # no *_created series: they double the output and nobody queries them
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        self.registry = CollectorRegistry(auto_describe=True)
        self._watched: set[str] = set()
        self.deliveries = Counter("opsctl_webhook_deliveries", "Webhook requests by source and answer.",
                                  ["source", "result"], registry=self.registry)
        self.actions = Counter("opsctl_automation_actions", "Actions by policy, action and outcome status"
                               " (refused: by a traffic guard).", ["policy", "action", "status"], registry=self.registry)
        self.latency = Histogram("opsctl_automation_action_latency_seconds",
                                 "Seconds from the delivery's arrival to the action's end.", ["action"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.events = Counter("opsctl_automation_events", "Queued events handled, by result.", ["result"],
                              registry=self.registry)
        depth = Gauge("opsctl_automation_queue_depth", "Events queued or being handled.", registry=self.registry)
        depth.set_function(queue_depth)
        capacity = Gauge("opsctl_automation_queue_capacity", "Bound of the event queue.", registry=self.registry)
        capacity.set(queue_capacity)
        waits = Gauge("opsctl_automation_deliveries_waiting", "Deliveries waiting for a retry after a try that"
                      " could not act (as the last maintenance sweep counted them).", registry=self.registry)
        waits.set_function(waiting)
        leading = Gauge("opsctl_serve_leader", "1 while this replica acts (the leader, or the only replica).",
                        registry=self.registry)
        leading.set_function(lambda: 1.0 if leader() else 0.0)

    def watch(self, name: str, documentation: str, value: Callable[[], float]) -> None:
        """A gauge read from `value()` at each scrape (registered once per name)."""
        from prometheus_client import Gauge

        if name in self._watched:
            return
        self._watched.add(name)
        Gauge(name, documentation, registry=self.registry).set_function(value)

    def delivery(self, source: str, result: str) -> None:
        self.deliveries.labels(source, result).inc()

    def action(self, policy: str, action: str, status: str, seconds: float) -> None:
        self.actions.labels(policy, action, status).inc()
        self.latency.labels(action).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
