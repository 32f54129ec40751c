"""The drill's own configuration: the user's config and routing, pointed at the drill's processes.

Only addresses, secrets and timings change; the SLOs, the rules generator's settings, the routing
tree (matchers, grouping, `continue`, inhibitions), the policies, guards, freezes and the ticket
channel stay the user's. Timings are shortened so that the fault and its consequences take
minutes: every change is listed (`Shortened`) and goes into the report.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from opsctl.clock import format_duration, parse_duration

DRILL_EVALUATION = 10  # seconds: the smallest interval opsctl's rules allow (metrics come every 10 s)
SCRAPE_INTERVAL = 5  # seconds: twice per metric step, so a new step is seen within 5 s
AM_GROUP_WAIT = 2  # seconds, every route
AM_GROUP_INTERVAL = 10
AM_REPEAT_INTERVAL = 60


@dataclass
class Shortened:
    """What the drill changed in the user's timings, and why."""

    items: list[dict] = field(default_factory=list)

    def add(self, where: str, was: str, now: str, why: str) -> None:
        if was != now:
            self.items.append({"where": where, "was": was, "now": now, "why": why})


def _seconds(text: str | None, default: int) -> int:
    return parse_duration(str(text)) if text is not None else default


@dataclass(frozen=True)
class Fleet:
    """The internal Deployment a chain drill simulates (chain/kubeapi.py) for the user's `capacity`:
    its namespace and name, the pods it has (`replicas`, else `max_replicas`, as embedded drills
    count them), and the kubeconfig that reaches the loopback API serving it."""

    backend: str
    namespace: str
    deployment: str
    replicas: int
    kubeconfig: Path | None = None


def drill_fleet(user_cfg) -> Fleet | None:
    """The simulated Deployment for `user_cfg.capacity` (None without a capacity section)."""
    cap = user_cfg.capacity
    if cap is None:
        return None
    replicas = cap.replicas if cap.replicas is not None else cap.max_replicas
    return Fleet(cap.backend, cap.namespace or user_cfg.traffic.kubernetes.namespace, cap.deployment or "vllm",
                 int(replicas))


def _serve_the_fleet(raw: dict, capacity: dict, fleet: Fleet, shortened: Shortened) -> None:
    """serve reads the simulated Deployment through the real client (decisions/0355): capacity
    source kubernetes, its connection the drill's kubeconfig, the fleet never scaled."""
    was = capacity.get("source", "kubernetes")
    where = f"Deployment {fleet.namespace}/{fleet.deployment}"
    shortened.add("capacity.source", f"{was}" + (f" ({capacity.get('replicas')} replicas)" if was == "static" else
                                                  f" ({where})"),
                  f"kubernetes: the chain's simulated {where} on loopback ({fleet.replicas} pods)",
                  "the capacity guard and the canary restore read the pods the drill's faults leave ready, as"
                  " embedded drills count them (decisions/0355)")
    gpu = (((raw.get("cost") or {}).get("backends") or {}).get(fleet.backend) or {}).get("gpu")
    if isinstance(gpu, dict) and gpu.get("replicas") is None and gpu.get("replicas_query") is None and was == "static":
        # billing counted capacity.replicas (config/root.py): the same pods, now said where it is read
        shortened.add(f"cost.backends.{fleet.backend}.gpu.replicas", f"capacity.replicas ({capacity.get('replicas')})",
                      str(capacity.get("replicas")), "billing counts the same pods once capacity.source is kubernetes")
        gpu["replicas"] = capacity.get("replicas")
    capacity.update(source="kubernetes", namespace=fleet.namespace, deployment=fleet.deployment)
    capacity.pop("replicas", None)
    if capacity.get("autoscaler", "none") != "none":
        shortened.add("capacity.autoscaler", str(capacity["autoscaler"]), "none",
                      "the simulated fleet has no autoscaler: its pods are the fleet the config declares")
        capacity["autoscaler"] = "none"
        capacity.pop("autoscaler_name", None)
    if int(capacity.get("max_replicas", 1)) != fleet.replicas:
        shortened.add("capacity.max_replicas", str(capacity.get("max_replicas", 1)), str(fleet.replicas),
                      "the simulated fleet never scales (its API refuses writes): no scale is asked for")
        capacity["max_replicas"] = fleet.replicas
    traffic = raw.setdefault("traffic", {})
    connection = traffic.get("kubernetes") or {}
    was_at = connection.get("host") or connection.get("kubeconfig") or "$KUBECONFIG / ~/.kube/config / in-cluster"
    shortened.add("traffic.kubernetes", str(was_at), f"the drill's kubeconfig {fleet.kubeconfig}",
                  "serve's Kubernetes client reaches the loopback API of the simulated Deployment, never a cluster")
    traffic["kubernetes"] = {"kubeconfig": str(fleet.kubeconfig), "namespace": fleet.namespace,
                             "timeout": connection.get("timeout", 10)}
    state = raw.setdefault("state", {})
    if state.get("backend", "local") != "local":
        shortened.add("state.backend", str(state["backend"]), "local",
                      "the drill's state is its run directory's, never the cluster's")
        state["backend"] = "local"
        state.pop("kubernetes", None)


def drill_config(user_cfg, run_dir: Path, *, prometheus_url: str, token_file: Path, shortened: Shortened,
                 freeze=None, span: tuple[float, float] | None = None, fleet: Fleet | None = None) -> dict:
    """The raw YAML of the drill's config (for `opsctl serve` and `opsctl slo rules`). `freeze`: the
    scenario's drill freeze (Scenario.freeze), declared over `span` (wall clock, UTC) as embedded
    drills declare it over theirs (env/base.with_drill_freeze): stricter guards, never looser.
    `fleet` (with its kubeconfig): serve reads the internal pods from the chain's loopback
    Deployment (decisions/0355); without it the capacity is static (all pods ready)."""
    from opsctl.config import BUILTIN_CONFIG, load_yaml_file

    source = BUILTIN_CONFIG if user_cfg.source_path == "<built-in>" else Path(user_cfg.source_path)
    raw = copy.deepcopy(load_yaml_file(Path(source), "config file"))
    raw["state_dir"] = str(Path(run_dir).resolve())
    raw.setdefault("slos", {})["dir"] = str(user_cfg.slo_dir.resolve())
    runbooks = raw.setdefault("runbooks", {})
    for key in ("dir", "templates", "golden"):
        value = getattr(user_cfg.runbooks, key, None)
        if value:
            runbooks[key] = str(user_cfg.path(value).resolve())
    raw.setdefault("drills", {})["scenarios"] = str(user_cfg.path(user_cfg.drills.scenarios).resolve())
    metrics = raw.setdefault("metrics", {})
    metrics["source"] = "prometheus"
    metrics["prometheus"] = {"url": prometheus_url, "timeout": 10, "report_deadline": 60}
    # Pages serve sends (its `page` action) land in the drill's own ledger, never on the real on-call.
    raw["paging"] = {"provider": "local"}
    tickets = raw.setdefault("tickets", {})
    channels = {tickets.get("provider", "local")} | {
        (v or {}).get("provider") or tickets.get("provider", "local") for v in (tickets.get("vendors") or {}).values()}
    if channels != {"local"}:
        # serve files its tickets unmarked: a local rehearsal must never reach a real vendor desk.
        shortened.add("tickets.provider", "/".join(sorted(channels)), "local",
                      "serve's tickets are not marked as drills: a local chain drill files them in its own ledger"
                      " (--live --chain uses the real channel)")
        tickets["provider"] = "local"
        for vendor in (tickets.get("vendors") or {}).values():
            if isinstance(vendor, dict):
                vendor["provider"] = "local"
    traffic = raw.setdefault("traffic", {})
    traffic["actuator"] = "file"
    traffic["file"] = {"path": "traffic/split.json"}
    capacity = raw.get("capacity")
    if capacity and fleet is not None:
        _serve_the_fleet(raw, capacity, fleet, shortened)
    elif capacity and capacity.get("source", "static") != "static":
        capacity["source"] = "static"
        capacity["replicas"] = capacity.get("replicas") or capacity.get("max_replicas")
    if freeze is not None and span is not None:
        import time

        fmt = "%Y-%m-%dT%H:%M"
        start, end = span
        raw["freezes"] = [*(raw.get("freezes") or []), {
            "name": freeze.name, "timezone": "UTC", "start": time.strftime(fmt, time.gmtime(start // 60 * 60)),
            "end": time.strftime(fmt, time.gmtime(end // 60 * 60 + 60)), "reason": freeze.reason}]
        shortened.add(f"freeze {freeze.name}", "over the scenario's simulated drill",
                      "over the drill's wall-clock span",
                      "the scenario's drill freeze is declared where serve's guards read the time: the wall clock")
    automation = raw.setdefault("automation", {})
    automation["token"] = {"file": str(token_file)}
    alerting = raw.setdefault("alerting", {})
    interval = _seconds(alerting.get("evaluation_interval"), 60)
    shortened.add("alerting.evaluation_interval", format_duration(interval), format_duration(DRILL_EVALUATION),
                  "rule groups evaluate every 10 s, so each step of the fault is seen at once")
    alerting["evaluation_interval"] = format_duration(DRILL_EVALUATION)
    scale = DRILL_EVALUATION / interval
    for severity, default in (("page", 120), ("ticket", 900)):
        section = alerting.setdefault(severity, {})
        was = _seconds(section.get("for_duration"), default)
        now = max(DRILL_EVALUATION, int(round(was * scale / 10)) * 10) if was else 0
        shortened.add(f"alerting.{severity}.for_duration", format_duration(was), format_duration(now),
                      "scaled with the evaluation interval: the same number of evaluations must agree")
        section["for_duration"] = format_duration(now)
        section.setdefault("min_request_rate", 1.0 if severity == "page" else 0.1)
    return raw


def _walk_routes(route: dict, path: str, shortened: Shortened) -> None:
    for key, limit in (("group_wait", AM_GROUP_WAIT), ("group_interval", AM_GROUP_INTERVAL),
                       ("repeat_interval", AM_REPEAT_INTERVAL)):
        if key in route or path == "route":
            was = _seconds(route.get(key), {"group_wait": 30, "group_interval": 300, "repeat_interval": 14400}[key])
            now = min(was, limit)
            shortened.add(f"alertmanager {path}.{key}", format_duration(was), format_duration(now),
                          "Alertmanager's waits, shortened so a notification leaves within seconds")
            route[key] = format_duration(now)
    for i, child in enumerate(route.get("routes") or []):
        _walk_routes(child, f"{path}.routes[{i}]", shortened)


def drill_routing(raw: dict, *, pagerduty_url: str, routing_key_file: Path, serve_url: str, serve_token_file: Path,
                  bridge_url: str, bridge_token_file: Path, shortened: Shortened) -> tuple[dict, list[str]]:
    """Alertmanager's config with its receivers pointed at the drill: PagerDuty at the loopback
    Events API sink, the `opsctl serve` webhook (path /v1/alertmanager) at the drill's serve, any
    other webhook at the drill's ticket bridge. Receivers of other kinds are not rehearsed and are
    dropped (listed in the returned notes); the routing tree is kept as it is."""
    am = copy.deepcopy(raw)
    notes = []
    am.setdefault("route", {})
    _walk_routes(am["route"], "route", shortened)
    for receiver in am.get("receivers") or []:
        name = receiver.get("name")
        for i, pd in enumerate(receiver.get("pagerduty_configs") or []):
            for key in ("routing_key", "service_key", "service_key_file"):
                pd.pop(key, None)
            pd["routing_key_file"] = str(routing_key_file)
            pd["url"] = pagerduty_url
            pd.pop("http_config", None)
            notes.append(f"receiver {name}: PagerDuty Events API v2 -> the drill's PagerDuty endpoint")
        for hook in receiver.get("webhook_configs") or []:
            path = urlparse(hook.get("url", "")).path or "/"
            to_serve = path.rstrip("/").endswith("/v1/alertmanager")
            hook["url"] = (serve_url if to_serve else bridge_url).rstrip("/") + path
            hook.pop("url_file", None)
            hook["http_config"] = {"authorization": {"type": "Bearer", "credentials_file": str(
                serve_token_file if to_serve else bridge_token_file)}}
            notes.append(f"receiver {name}: webhook {path} -> the drill's "
                         + ("opsctl serve" if to_serve else "ticket-queue bridge"))
        for key in list(receiver):
            if key.endswith("_configs") and key not in ("pagerduty_configs", "webhook_configs"):
                receiver.pop(key)
                notes.append(f"receiver {name}: {key} not rehearsed by a chain drill (dropped)")
    glob = am.setdefault("global", {})
    for key in list(glob):
        if key.startswith(("smtp_", "slack_", "opsgenie_", "victorops_", "wechat_", "telegram_", "webex_")):
            glob.pop(key)
    return am, notes
