"""The Alertmanager configuration generated from the config, as the rules and runbooks are
(`opsctl slo routes`; docs/decisions/0230-generated-alertmanager-routing.md).

The tree, first match first:

1. The paging route: the one top-level route whose key is `automation.incident.paging_route_key`
   (default `{}/{severity="page"}`), grouped by `[service]`. Its receiver holds PagerDuty *and* the
   opsctl serve webhook, so both integrations see one notification with one group key
   (`{}/{severity="page"}:{service="NAME"}`): Alertmanager's PagerDuty page sends
   `dedup_key = sha256(groupKey)` and the automation pages with the same key
   (opsctl/incident/grouping.py), so they are one PagerDuty incident, and Alertmanager's page stays
   the safety net when serve is down. Every page reaches serve this way (a route's matchers are its
   key, so the paging route cannot be narrowed to the policies without changing the incident's key);
   serve answers a page no policy matches without a write.
2. One opsctl route per policy that can act on an alert outside the paging route: the policy's
   `match` (`name="v"`) and `match_re` (`name=~"v"`) plus the negation of the paging matcher, so
   nothing reaches serve twice. A policy whose `match` pins the paging matcher has no route of its
   own. A policy's `causes` are the alert's `cause` annotation, which Alertmanager cannot route on:
   serve filters on them.
3. Tickets (`severity="ticket"`) to the ticket queue, as before; anything else to the ticket queue
   (the root's receiver), so no alert is silently dropped.

Secrets are files (the PagerDuty `routing_key_file`, the webhooks' bearer `credentials_file`),
never values: `RouteTargets.secrets_dir` says where they are mounted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opsctl.errors import ConfigError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.config.automation import AutomationPolicy

PAGING_RECEIVER = "pagerduty-and-opsctl"
TICKET_RECEIVER = "ticket-queue"
OPSCTL_RECEIVER = "opsctl"
SERVE_PATH = "/v1/alertmanager"

# One matcher of a route key's segment as Alertmanager writes it: name, operator, quoted value.
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)(=~|!~|!=|=)"((?:[^"\\]|\\.)*)"')
_NEGATION = {"=": "!=", "!=": "=", "=~": "!~", "!~": "=~"}


@dataclass(frozen=True)
class RouteTargets:
    """Where the receivers are: opsctl serve, the ticket-queue bridge, and the directory the
    secrets are mounted in (`pagerduty/routing-key`, `tickets/token`, `opsctl/token`)."""

    serve_url: str = "http://opsctl.opsctl.svc:9095"
    ticket_url: str = "http://ticket-bridge.opsctl.svc:8080/v1/alerts"
    secrets_dir: str = "/etc/alertmanager/secrets"


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def text(self) -> str:
        value = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op}"{value}"'

    def negated(self) -> Matcher:
        return Matcher(self.name, _NEGATION[self.op], self.value)


def paging_matchers(route_key: str) -> list[Matcher]:
    """The matchers of the top-level route whose Alertmanager key is `route_key` (`{}/{a="b",...}`)."""
    where = "automation.incident.paging_route_key"
    found = re.fullmatch(r"\{\}/\{(.*)\}", route_key)
    if found is None or "}/{" in found.group(1):
        raise ConfigError(f"{where}: {route_key!r} is not the key of a top-level route",
                          hint='write it as {}/{severity="page"}: the root, then one route\'s matchers')
    body, out, pos = found.group(1), [], 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if m is None:
            raise ConfigError(f"{where}: cannot read the matchers {body!r}", hint='e.g. {}/{severity="page"}')
        out.append(Matcher(m.group(1), m.group(2), m.group(3).replace('\\"', '"').replace("\\\\", "\\")))
        pos = m.end()
        if pos < len(body):
            if body[pos] != ",":
                raise ConfigError(f"{where}: cannot read the matchers {body!r}", hint='e.g. {}/{severity="page"}')
            pos += 1
    if not out:
        raise ConfigError(f"{where}: {route_key!r} has no matcher: every alert would page",
                          hint='e.g. {}/{severity="page"}')
    return out


def policy_matchers(policy: AutomationPolicy) -> list[Matcher]:
    return ([Matcher(k, "=", str(v)) for k, v in sorted(policy.match.items())]
            + [Matcher(k, "=~", str(v)) for k, v in sorted(policy.match_re.items())])


def _only_pages(policy: list[Matcher], paging: list[Matcher]) -> bool:
    """Whether every alert the policy matches is one the paging route takes."""
    return all(p in policy for p in paging)


def _secret(targets: RouteTargets, *parts: str) -> str:
    return "/".join([targets.secrets_dir.rstrip("/"), *parts])


def _webhook(url: str, token_file: str) -> dict[str, Any]:
    return {"url": url, "send_resolved": True, "max_alerts": 0,
            "http_config": {"authorization": {"type": "Bearer", "credentials_file": token_file}}}


def _pagerduty(targets: RouteTargets) -> dict[str, Any]:
    return {
        "routing_key_file": _secret(targets, "pagerduty", "routing-key"),
        "send_resolved": True,
        "severity": "critical",
        # A group holds every alert of the service: without a common summary, name them (PagerDuty
        # refuses an event whose summary is blank).
        "description": ("{{ with .CommonAnnotations.summary }}{{ . }}{{ else }}{{ .CommonLabels.service }}:"
                        " {{ .Alerts.Firing | len }} alert(s) firing: {{ range .Alerts.Firing }}"
                        "{{ .Annotations.summary }}; {{ end }}{{ end }}"),
        "client": "opsctl burn-rate alerts",
        "links": [{"href": "{{ .CommonAnnotations.runbook_url }}", "text": "runbook"}],
        "details": {
            "service": "{{ .CommonLabels.service }}",
            "slo": "{{ range .Alerts.Firing }}{{ .Labels.slo }} {{ end }}",
            "backend": "{{ range .Alerts.Firing }}{{ .Labels.backend }} {{ end }}",
            "windows": "{{ range .Alerts.Firing }}{{ .Labels.long_window }}/{{ .Labels.short_window }} {{ end }}",
            "burn_rate": "{{ range .Alerts.Firing }}{{ .Annotations.burn_rate }}x {{ end }}",
            "firing": "{{ .Alerts.Firing | len }}",
        },
    }


def routing_document(cfg: Config, targets: RouteTargets | None = None) -> dict[str, Any]:
    """The Alertmanager configuration (a YAML document) for `cfg`'s policies."""
    targets = targets or RouteTargets()
    paging = paging_matchers(cfg.automation.incident.paging_route_key)
    serve = targets.serve_url.rstrip("/") + SERVE_PATH
    serve_token = _secret(targets, "opsctl", "token")
    routes: list[dict[str, Any]] = [{
        "receiver": PAGING_RECEIVER,
        "matchers": [m.text() for m in paging],
        "group_by": ["service"],
        "group_wait": "1s",
        "group_interval": "30s",
        "repeat_interval": "1h",
    }]
    outside = [m.negated() for m in paging] if len(paging) == 1 else None
    for policy in cfg.automation.policies:
        own = policy_matchers(policy)
        if _only_pages(own, paging):
            continue
        if outside is None:
            raise ConfigError(f"automation.policies.{policy.name}: it matches alerts outside the paging route "
                              f"{cfg.automation.incident.paging_route_key}, which has more than one matcher",
                              hint="pin the paging matcher in the policy's match, or give the paging route one matcher")
        routes.append({"receiver": OPSCTL_RECEIVER, "matchers": [m.text() for m in own + outside],
                       "group_by": ["..."], "group_wait": "10s", "group_interval": "1m",
                       "repeat_interval": "1h", "continue": True})
    routes.append({"receiver": TICKET_RECEIVER, "matchers": ['severity="ticket"'], "group_by": ["alertname", "slo"],
                   "group_wait": "5m", "repeat_interval": "24h"})
    receivers: list[dict[str, Any]] = [
        {"name": PAGING_RECEIVER, "pagerduty_configs": [_pagerduty(targets)],
         "webhook_configs": [_webhook(serve, serve_token)]},
        {"name": TICKET_RECEIVER, "webhook_configs": [_webhook(targets.ticket_url, _secret(targets, "tickets", "token"))]},
    ]
    if any(r["receiver"] == OPSCTL_RECEIVER for r in routes):
        receivers.append({"name": OPSCTL_RECEIVER, "webhook_configs": [_webhook(serve, serve_token)]})
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {"receiver": TICKET_RECEIVER, "group_by": ["alertname", "slo"], "group_wait": "30s",
                  "group_interval": "5m", "repeat_interval": "12h", "routes": routes},
        "inhibit_rules": [{"source_matchers": ['severity="page"'], "target_matchers": ['severity="ticket"'],
                           "equal": ["slo"]}],
        "receivers": receivers,
    }


def automation_document(cfg: Config, targets: RouteTargets | None = None) -> dict[str, Any]:
    """The part an existing Alertmanager adds (`--part automation`): the paging route and the
    policies' opsctl routes, with their receivers. Put its routes first under your `route.routes`
    (they replace your own PagerDuty route for pages: the paging receiver pages too)."""
    whole = routing_document(cfg, targets)
    routes = [r for r in whole["route"]["routes"] if r["receiver"] in (PAGING_RECEIVER, OPSCTL_RECEIVER)]
    names = {r["receiver"] for r in routes}
    return {"route": {"receiver": PAGING_RECEIVER, "routes": routes},
            "receivers": [r for r in whole["receivers"] if r["name"] in names]}


AUTOMATION_HEADER = (
    "# The paging route and opsctl serve's routes on their own (`opsctl slo routes --part automation`),\n"
    "# for an Alertmanager that already has a config: put these routes first under your `route.routes`\n"
    "# (they replace your PagerDuty route for pages: the paging receiver holds PagerDuty and serve, so\n"
    "# Alertmanager's page and the automation's are one PagerDuty incident) and add the receivers.\n"
    "# deploy/alertmanager.yml holds the same routes inside the full routing. Do not edit, regenerate.\n"
    "# Check with: amtool check-config FILE\n")


def header() -> str:
    return ("# Alertmanager routing generated by `opsctl slo routes` from the config's automation.policies:\n"
            "# do not edit, regenerate (`opsctl slo routes --check FILE` says whether it is current).\n"
            "#   pages (the paging route, grouped by service) -> PagerDuty + opsctl serve: one group key,\n"
            "#     so Alertmanager's page and the automation's are one PagerDuty incident\n"
            "#   alerts a policy acts on outside it          -> opsctl serve\n"
            "#   tickets, and anything else                  -> the ticket queue\n"
            "# Secrets are files mounted into Alertmanager (pagerduty/routing-key, tickets/token, opsctl/token).\n"
            "# Check with: amtool check-config FILE\n")


def render(cfg: Config, targets: RouteTargets | None = None, *, part: str = "all") -> str:
    """The YAML text of the whole configuration (`part="all"`) or of the automation's part."""
    import yaml

    document = automation_document(cfg, targets) if part == "automation" else routing_document(cfg, targets)
    body: str = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=120)
    return (AUTOMATION_HEADER if part == "automation" else header()) + body


__all__ = ["Matcher", "automation_document", "PAGING_RECEIVER", "RouteTargets", "paging_matchers", "policy_matchers", "render",
           "routing_document"]
