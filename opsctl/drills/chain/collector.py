"""The chain's Collector: every poll, each component is asked what happened (Prometheus' rules and
alerts, Alertmanager, the PagerDuty endpoint, serve's /metrics and log, the audit log, the ticket
desk) and the hops (hops.py) move forward on its own evidence."""

from __future__ import annotations

import json
import re
import time
import urllib.error
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from opsctl.drills.chain.components import http_get
from opsctl.drills.chain.hops import ORDER, TITLES, Hop, Targets
from opsctl.drills.chain.readings import (BURN_RECORDS, _clock, _fired_at, _for, _incident_backend, _rfc3339, _split,
                                          _sum, _value, burn_query, parse_metrics)

if TYPE_CHECKING:
    from opsctl.audit import AuditLog
    from opsctl.drills.chain.pdsink import PagerDutySink
    from opsctl.tickets.base import TicketProvider

_LOG = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ opsctl\.automation: policy (\S+): (\w+) (\w+)"
                  r"( \(dry run\))?: (.*)$")


@dataclass
class Collector:
    """Polls every component and moves the hops forward; `say` adds a timeline line per hop reached."""

    targets: Targets
    sink: PagerDutySink | None  # None for a live chain drill: its LiveCollector reads the real pager
    desks: Callable[[str], TicketProvider]  # vendor -> ticket desk of the drill's config
    audit: AuditLog | None  # of the drill's state dir (None live: the actuator's split is read instead)
    say: Callable[[float, str, str], None]
    hops: dict[str, Hop] = field(default_factory=dict)
    actions: list[dict] = field(default_factory=list)
    serve_counts: dict[str, float] = field(default_factory=dict)
    am_counts: dict[str, float] = field(default_factory=dict)
    rule_errors: list[str] = field(default_factory=list)
    _accepted: list[tuple[float, float]] = field(default_factory=list)  # (poll time, serve's accepted count)
    firing_labels: list[dict] = field(default_factory=list)  # the faulted backend's firing page alerts
    page_rules: list[dict] = field(default_factory=list)  # every page rule that can fire for it (name + labels)
    # every alert seen firing, any backend or severity: (slo, severity, windows) -> (first firing, ChainAlert)
    firing_seen: dict = field(default_factory=dict)
    ticket_records: list[dict] = field(default_factory=list)  # every ticket the desks hold (observed.py reads them)

    def __post_init__(self):
        t = self.targets
        for key in ORDER:
            required = {"actuator": t.expect_failover, "ticket": t.ticket_category is not None}.get(key, True)
            self.hops[key] = Hop(key, required=required)

    def _reach(self, key: str, at: float, evidence: str) -> None:
        if self.hops[key].reach(at, evidence):
            self.say(at, key, evidence)

    def poll(self) -> None:
        for step in (self._prometheus, self._alertmanager, self._pagerduty, self._serve, self._actuator,
                     self._ticket):
            try:
                step()
            except (OSError, ValueError, KeyError, urllib.error.URLError) as exc:
                key = {"_prometheus": "rule-firing", "_alertmanager": "alertmanager", "_pagerduty": "pagerduty",
                       "_serve": "serve", "_actuator": "actuator", "_ticket": "ticket"}[step.__name__]
                self.hops[key].last = f"{TITLES[key][0]} did not answer: {exc}"

    # -- Prometheus -----------------------------------------------------------------------------

    def _relevant(self, labels: dict) -> bool:
        return labels.get("severity") == "page" and labels.get("backend") in self.targets.watched

    def _prometheus(self) -> None:
        data = json.loads(http_get(f"{self.targets.prometheus}/api/v1/rules?type=alert"))["data"]
        errors, seen, firing, rules = [], [], [], []
        # one poll can find several alerts pending or firing (a slow poll under load): each hop takes
        # the earliest instant among them, not the first in the API's order
        earliest: dict[str, tuple[float, str]] = {}

        def candidate(key: str, at: float, evidence: str) -> None:
            if key not in earliest or at < earliest[key][0]:
                earliest[key] = (at, evidence)

        for group in data.get("groups", []):
            for rule in group.get("rules", []):
                static = {"alertname": rule.get("name", ""), **(rule.get("labels") or {})}
                if static.get("severity") == "page" and static.get("backend", self.targets.backend) in self.targets.watched:
                    rules.append(static)
                if rule.get("health") == "err":
                    errors.append(f"{rule.get('name')}: {rule.get('lastError')}")
                for alert in rule.get("alerts") or []:
                    self._seen_firing(alert, rule, group)
                    if not self._relevant(alert.get("labels", {})):
                        continue
                    labels = alert["labels"]
                    what = (f"{labels.get('alertname')} {labels.get('slo')} {labels.get('long_window')}/"
                            f"{labels.get('short_window')}")
                    seen.append(f"{what} {alert.get('state')}")
                    active = _rfc3339(alert.get("activeAt"))
                    if active is not None:
                        candidate("rule-pending", active, f"Prometheus: {what} pending since its evaluation at"
                                  f" {_clock(active)} (burn {_value(alert)})")
                    if alert.get("state") == "firing":
                        firing.append(dict(labels))
                        at = _fired_at(active, rule, group)
                        candidate("rule-firing", at, f"Prometheus: {what} firing (for: {_for(rule)}, at its"
                                  f" evaluation of {_clock(at)})")
        for state, key in (("pending", "rule-pending"), ("firing", "rule-firing")):
            if self.hops[key].at is None:
                for found in self._history(state):
                    candidate(key, *found)
                    if state == "firing":  # an alert with `for: 0` is never pending: it was due at once
                        candidate("rule-pending", *found)
        for key in ("rule-pending", "rule-firing"):
            if key in earliest:
                self._reach(key, *earliest[key])
        self.rule_errors = errors
        self.firing_labels = firing or self.firing_labels
        self.page_rules = rules or self.page_rules
        last = "; ".join(seen[:3]) or (f"no page-level alert for backend {self._watched()} pending or firing"
                                       + self._burn_1h())
        if errors:
            last += f"; rules failing: {'; '.join(errors[:3])}"
        for key in ("rule-pending", "rule-firing"):
            self.hops[key].last = f"Prometheus: {last}"

    def _history(self, state: str) -> list[tuple[float, str]]:
        """The first evaluation at which a watched page alert was `state`, from Prometheus' own
        `ALERTS` series since the fault: a poll that comes late (a loaded machine) may no longer see
        the alert that fired first (its expression dipped, its activeAt reset), while the page it
        caused is already out. At most one range query per state and poll, until the hop is reached."""
        from urllib.parse import urlencode

        fault = self.hops["fault"].at
        if fault is None:
            return []
        now = time.time()
        watched = "|".join(re.escape(b) for b in self.targets.watched)
        query = f'timestamp(ALERTS{{alertstate="{state}",severity="page",backend=~"{watched}"}})'
        step = 5.0  # finer than the drill's 10 s evaluation: every evaluation's sample is seen
        start = max(fault - step, now - 10_000 * step)  # under Prometheus' 11,000 points per series
        url = (f"{self.targets.prometheus}/api/v1/query_range?"
               + urlencode({"query": query, "start": f"{start:.3f}", "end": f"{now:.3f}", "step": f"{step:g}"}))
        found: list[tuple[float, str]] = []
        for series in json.loads(http_get(url))["data"].get("result", []):
            stamps = [float(v) for _, v in series.get("values", []) if float(v) >= fault]
            if stamps:
                labels = series.get("metric", {})
                at = min(stamps)
                found.append((at, f"Prometheus: {labels.get('alertname')} {labels.get('slo')}"
                                  f" {labels.get('long_window')}/{labels.get('short_window')} {state} at its"
                                  f" evaluation of {_clock(at)} (its ALERTS series)"))
        return found

    def _seen_firing(self, alert: dict, rule: dict, group: dict) -> None:
        from opsctl.drills.chain.alert_seen import alert_of

        if alert.get("state") != "firing":
            return
        labels = alert.get("labels") or {}
        key = (labels.get("slo", ""), labels.get("severity", ""),
               f"{labels.get('long_window', '')}/{labels.get('short_window', '')}:{labels.get('alertname', '')}")
        if key not in self.firing_seen:
            at = _fired_at(_rfc3339(alert.get("activeAt")), rule, group)
            self.firing_seen[key] = (at, alert_of(labels, alert.get("annotations") or {}))

    def _watched(self) -> str:
        return " or ".join(self.targets.watched)

    def _burn_1h(self) -> str:
        """The faulted backends' burn rates over 1h from the recorded rules: how far from paging."""
        from urllib.parse import quote

        out: dict[str, dict[str, float]] = {}
        for b in self.targets.watched:
            for name in BURN_RECORDS:
                q = quote(burn_query(name, b, self.targets.recorded_scope))
                try:
                    body = json.loads(http_get(f"{self.targets.prometheus}/api/v1/query?query={q}"))
                except (OSError, ValueError):
                    return ""
                for r in body.get("data", {}).get("result", []):
                    out.setdefault(r["metric"].get("slo"), {})[name] = float(r["value"][1])
        burns = sorted(((v["slo:sli_error:ratio_rate1h"] / v["slo:error_budget:ratio"], slo) for slo, v in out.items()
                        if v.get("slo:error_budget:ratio") and "slo:sli_error:ratio_rate1h" in v), reverse=True)
        if not burns:
            return ""
        return "; burn over 1h: " + ", ".join(f"{slo} {burn:.1f}x" for burn, slo in burns[:3])

    # -- Alertmanager ---------------------------------------------------------------------------

    def _alertmanager(self) -> None:
        alerts = json.loads(http_get(f"{self.targets.alertmanager}/api/v2/alerts"))
        mine = [a for a in alerts if self._relevant(a.get("labels", {}))]
        samples = parse_metrics(http_get(f"{self.targets.alertmanager}/metrics").decode())
        counts = {
            "pagerduty sent": _sum(samples, "alertmanager_notifications_total{", 'integration="pagerduty"'),
            "pagerduty failed": _sum(samples, "alertmanager_notifications_failed_total{", 'integration="pagerduty"'),
            "webhook sent": _sum(samples, "alertmanager_notifications_total{", 'integration="webhook"'),
            "webhook failed": _sum(samples, "alertmanager_notifications_failed_total{", 'integration="webhook"'),
        }
        self.am_counts = counts
        shown = ", ".join(f"{k} {int(v)}" for k, v in counts.items())
        if mine:
            receivers = sorted({r.get("name") for a in mine for r in a.get("receivers", [])})
            state = mine[0].get("status", {}).get("state")
            at = _rfc3339(mine[0].get("updatedAt")) or time.time()
            self._reach("alertmanager", at, f"Alertmanager: {len(mine)} alert(s) {state}, routed to"
                        f" {', '.join(receivers) or 'no receiver'}")
            self.hops["alertmanager"].last = (f"Alertmanager: {len(mine)} alert(s), receivers"
                                              f" {', '.join(receivers) or 'none'}; notifications: {shown}")
            known = self.targets.pagerduty_receivers
            pd = self.hops["pagerduty"]
            if known is not None and pd.at is None and not set(receivers) & known:
                # Routing is deterministic: an alert routed past every PagerDuty receiver never pages.
                pd.failed = (f"Alertmanager routes the page to {', '.join(receivers) or 'no receiver'}, none of which"
                             f" notifies PagerDuty ({', '.join(sorted(known)) or 'no PagerDuty receiver'} would)")
                self.hops["acknowledged"].failed = "nothing to acknowledge: the page never reached PagerDuty"
        else:
            self.hops["alertmanager"].last = f"Alertmanager holds no page alert for {self._watched()}; {shown}"
        self.hops["pagerduty"].last = f"Alertmanager notifications: {shown}"
        self.hops["serve"].last = f"Alertmanager notifications: {shown}"

    # -- PagerDuty ------------------------------------------------------------------------------

    def _pagerduty(self) -> None:
        if self.sink is None:
            raise RuntimeError("a local chain's collector needs the drill's PagerDuty endpoint")
        events, incidents = self.sink.snapshot()
        rejected = [e for e in events if not e["accepted"]]
        if rejected:
            self.hops["pagerduty"].last += (f"; the PagerDuty endpoint refused {len(rejected)} event(s):"
                                            f" {'; '.join(rejected[-1].get('errors') or [])}")
        # Only an incident for a faulted backend's page counts: the service-wide SLO pages too, and its
        # incident can open first (another alert's group), before the backend's own rule fires.
        # An incident is a service's (the paging route groups by service, decisions/0230): it is for
        # the faulted backend when any trigger of its dedup key names that backend (or none names one).
        named: dict[str, set[str]] = {}
        for event in events:
            if event["accepted"] and event["action"] == "trigger":
                said = _incident_backend(event)
                named.setdefault(event["dedup_key"], set()).update(said.split() if said else ())
        opened = sorted((i for i in incidents if not named.get(i["dedup_key"]) or _incident_backend(i) is None
                         or bool(set(self.targets.watched) & named[i["dedup_key"]])),
                        key=lambda i: i["created_at"])
        others = len(incidents) - len(opened)
        if others:
            self.hops["pagerduty"].last = (f"PagerDuty endpoint: {others} incident(s) for other backends"
                                           f" than {self._watched()}")
        if opened:
            first = opened[0]
            self.hops["pagerduty"].title_seen = self.hops["pagerduty"].title_seen or first["summary"]
            self._reach("pagerduty", first["created_at"], f"PagerDuty endpoint: incident {first['id']}"
                        f" {first['summary']!r} ({first['severity']})")
            acked = [i for i in opened if i["acknowledged_at"] is not None]
            if acked:
                self._reach("acknowledged", acked[0]["acknowledged_at"],
                            f"PagerDuty endpoint: {acked[0]['id']} acknowledged by {acked[0]['acknowledged_by'] or 'on-call'}")
            self.hops["acknowledged"].last = f"PagerDuty incident {first['id']} is {first['status']}"
        else:
            self.hops["acknowledged"].last = "no PagerDuty incident to acknowledge"

    # -- serve ----------------------------------------------------------------------------------

    def _serve(self) -> None:
        samples = parse_metrics(http_get(f"{self.targets.serve}/metrics").decode())
        deliveries = {m.group(1): v for k, v in samples.items()
                      if (m := re.match(r'opsctl_webhook_deliveries_total\{.*result="(\w+)".*source="alertmanager"', k))}
        no_policy = _sum(samples, "opsctl_automation_events_total{", 'result="no_policy"')
        self.serve_counts = {**deliveries, "no_policy": no_policy}
        shown = ", ".join(f"{k} {int(v)}" for k, v in sorted(deliveries.items())) or "none"
        now, accepted = time.time(), deliveries.get("accepted", 0.0)
        self._accepted.append((now, accepted))
        fired = self.hops["rule-firing"].at
        # Serve's counter does not say which alert a delivery carried (a ticket alert may come first):
        # the page's delivery is one accepted after the page alert fired.
        before = max((n for t, n in self._accepted if fired is not None and t <= fired), default=0.0)
        if fired is not None and accepted > before:
            self._reach("serve", now, f"opsctl serve accepted {int(accepted - before)} Alertmanager delivery(ies)"
                        " since the page alert fired (its /metrics)")
        else:
            self.hops["serve"].last += f"; opsctl serve deliveries: {shown}"
        self.actions = self._log_actions()
        policy = self.hops["policy"]
        if self.actions:
            first = self.actions[0]
            failover = next((a for a in self.actions if a["action"] == "failover"), None)
            decided = failover or first
            self._reach("policy", decided["at"], f"opsctl serve: policy {decided['policy']}: {decided['action']}"
                        f" {decided['status']}{' (dry run)' if decided['dry_run'] else ''}: {decided['detail']}")
            if self.targets.expect_failover and failover is not None and failover["status"] not in ("applied", "noop"):
                policy.failed = f"the failover was {failover['status']}: {failover['detail']}"
                if self.hops["actuator"].at is None:
                    self.hops["actuator"].failed = f"nothing applied: {policy.failed}"
            elif self.targets.expect_failover and failover is None:
                policy.last = "opsctl serve acted (" + ", ".join(f"{a['action']} {a['status']}" for a in self.actions) + ") but did not fail over"
        else:
            policy.last = (f"opsctl serve: deliveries {shown}; events no policy matched: {int(no_policy)}"
                           if deliveries else "opsctl serve received nothing to decide on")
            self._unmatched(no_policy)
        self.hops["actuator"].last = policy.failed or policy.last if policy.at is None or policy.failed else \
            f"policy decided at {_clock(policy.at)}; no applied failover in the audit log yet"

    def _unmatched(self, no_policy: float) -> None:
        """The hop that cannot happen any more: serve received the page alert and counted events no
        policy matched, and the alert's labels match none of the policies serve runs (the same
        matching, in-process): no failover and no ticket will follow, so the drill ends now."""
        from opsctl.automation.policy import matching

        if self.hops["serve"].at is None or no_policy < 1 or not self.firing_labels or not self.targets.policies:
            return
        policies = list(self.targets.policies)
        # A page rule that has not fired yet (the 1h/5m pair after the fast tier) may still match:
        # the hop cannot happen only when no page alert the rules can raise for the backend would.
        if any(matching(policies, labels) for labels in self.firing_labels + self.page_rules):
            return
        labels = self.firing_labels[0]
        what = ", ".join(f"{k}={labels[k]}" for k in ("alertname", "slo", "backend", "severity") if labels.get(k))
        names = ", ".join(p.name for p in self.targets.policies)
        policy = self.hops["policy"]
        policy.failed = (f"no policy matched {what} (serve counted {int(no_policy)} event(s) no policy matched;"
                         f" policies: {names})")
        for key in ("actuator", "ticket"):
            hop = self.hops[key]
            if hop.required and hop.at is None and hop.failed is None:
                hop.failed = f"cannot happen: the hop policy failed ({policy.failed})"

    def _log_actions(self) -> list[dict]:
        from datetime import datetime, timezone

        out: list[dict] = []
        try:
            text = self.targets.serve_log.read_text(errors="replace")
        except OSError:
            return out
        for line in text.splitlines():
            m = _LOG.match(line)
            if m:
                at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()
                out.append({"at": at, "policy": m.group(2), "action": m.group(3), "status": m.group(4),
                            "dry_run": bool(m.group(5)), "detail": m.group(6)})
        return out

    # -- actuator -------------------------------------------------------------------------------

    def _actuator(self) -> None:
        if self.audit is None:
            raise RuntimeError("a local chain's collector needs the drill's audit log")
        entries = self.audit.find(lambda e: e.get("kind") == "traffic" and e.get("action") == "failover"
                                  and not e.get("dry_run"))
        entries.sort(key=lambda e: e.get("ts", 0))
        applied = [e for e in entries if e.get("outcome") == "applied"]
        if applied:
            e = applied[0]
            moved = f"{_split(e.get('before'))} -> {_split(e.get('after'))}"
            self._reach("actuator", e["ts"], f"audit log: failover applied by {e.get('actor')} through the"
                        f" {e.get('actuator')} actuator: {moved}")
        elif entries:
            e = entries[-1]
            self.hops["actuator"].last = f"audit log: failover {e.get('outcome')}: {e.get('reason') or ''}"

    # -- ticket ---------------------------------------------------------------------------------

    def _ticket(self) -> None:
        vendor, want = self.targets.ticket_vendor, self.targets.ticket_category
        if vendor is None:
            return
        ticket_actions = [a for a in self.actions if a["action"] == "ticket"]
        desk = self.desks(vendor)
        records = []
        channel = getattr(desk, "channel", None)
        if channel is not None and getattr(channel, "name", None) == "local":
            # a local desk here is the drill's own ledger (setup.drill_config points serve's tickets at it,
            # never at a real desk): every ticket in it is the drill's, whatever serve marked
            records = [{**t, "drill": True} for t in channel.tickets()]
        else:
            for a in ticket_actions:
                m = re.search(r"ticket (\S+) \(", a["detail"])
                if m:
                    status = desk.status(m.group(1))
                    records.append({"id": status.id, "opsctl_category": status.category,
                                    "category": status.category_value, "created_at": a["at"]})
        from opsctl.tickets.base import category_name

        vendor_cfg = getattr(desk, "vendor_cfg", None)
        for t in records:  # the vendor's category value, in opsctl's name (None: unmapped)
            t.setdefault("vendor", vendor)
            t["routed_category"] = (category_name(vendor_cfg, t.get("category")) if vendor_cfg is not None
                                    else t.get("opsctl_category"))
        self.ticket_records = records
        hop = self.hops["ticket"]
        if records:
            t = records[0]
            routed = t.get("category")
            self._reach("ticket", t.get("created_at") or time.time(),
                        f"{vendor} ticket {t['id']} in category {t.get('opsctl_category')!r} (the vendor's"
                        f" {routed!r})")
            if want is not None and t.get("opsctl_category") != want:
                hop.failed = (f"ticket {t['id']} was filed in {t.get('opsctl_category')!r}, the scenario expects"
                              f" {want!r}")
        elif ticket_actions:
            a = ticket_actions[-1]
            hop.last = f"opsctl serve: ticket {a['status']}: {a['detail']}"
        else:
            hop.last = "opsctl serve filed no ticket (no ticket action in its log)"

    # -- the verdict ----------------------------------------------------------------------------

    def broken(self) -> list[Hop]:
        return [h for h in self.hops.values() if h.required and not h.passed]

    def settled(self) -> bool:
        """Every required hop happened, or is known never to (failed without happening)."""
        return not any(h.required and h.at is None and h.failed is None for h in self.hops.values())
