"""`opsctl drill run SCENARIO --live --chain`: the same hops through the user's own chain.

The user's Prometheus (metrics.prometheus.url), Alertmanager (drills.live.alertmanager_url) and
`opsctl serve` (drills.live.serve_url), the configured pager, ticket channel and actuator; real
faults (an Istio fault on a backend's route, the internal Deployment scaled down) only in
drills.live.fault_namespaces. Preflight refuses as a live drill does (a real incident open, an
alert firing, an interrupted drill, a component not answering, another live drill running). Stop
conditions abort: a real incident (one the chain did not open), a page-level alert on a backend
the drill did not fault. Rollbacks remove the faults; the split is serve's to restore (its policy's
hold-down), and the report says what is left when the drill ends.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING

from opsctl.drills.chain.components import http_get
from opsctl.drills.chain.collector import Collector
from opsctl.drills.chain.progress import _Stop
from opsctl.drills.chain.readings import _sum, outcomes_query, parse_metrics
from opsctl.drills.chain.runner import ChainDrill
from opsctl.drills.engine import Refused
from opsctl.drills.preflight import take_live_lock
from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.traffic.split import Split


class LiveChainDrill(ChainDrill):
    mode = "live-chain"

    def __init__(self, scenario, user_cfg, *, timeout: int | None, progress=None):
        super().__init__(scenario, user_cfg, routing=None, timeout=timeout, history=0, progress=progress)
        self.cfg = user_cfg
        self._lock = None
        self._injectors: dict = {}
        self.original_split: Split | None = None

    def _prepare(self) -> None:
        missing = [f for f in self.scenario.faults if f.live is None]
        if missing:
            raise OpsctlError(f"{self.scenario.path}: a live chain drill needs fault.live for {missing[0].kind}")

    def _chain_problems(self) -> list[str]:
        return [] if self.scenario.faults else [f"{self.scenario.path}: a chain drill needs a fault"]

    def _setup(self) -> None:
        from opsctl.drills.chain.plan import live_checks
        from opsctl.traffic.registry import open_actuator

        self._set_phase("preflight")
        self._lock = take_live_lock(self.user_cfg)
        checks = live_checks(self.user_cfg)  # this run holds its lock: never "interrupted"
        self.checks = list(checks)
        for c in checks:
            self._say("check", f"{'ok' if c.ok else 'REFUSED'}: {c.name}: {c.message}")
        failed = [c for c in checks if not c.ok]
        if failed:
            raise Refused("; ".join(f"{c.name}: {c.message}" for c in failed))
        live = self.user_cfg.drills.live
        self.urls = {"prometheus": self.user_cfg.metrics.prometheus.url.rstrip("/"),
                     "alertmanager": live.alertmanager_url.rstrip("/"), "serve": live.serve_url.rstrip("/")}
        stored = open_actuator(self.user_cfg).read()
        if stored.split is None:
            raise Refused(f"the current split is unknown ({stored.note})")
        self.original_split = stored.split
        self.state.data["split"]["original"] = stored.split.to_dict(list(self.user_cfg.backends))
        self.state.save()
        from opsctl.drills.chain.setup import Shortened

        self.shortened = Shortened()  # nothing is shortened: the user's own timings
        self.facts = {"urls": self.urls, "pager": self.user_cfg.paging.provider,
                      "actuator": self.user_cfg.traffic.actuator, "shortened": []}

    def _steady(self) -> None:
        self._set_phase("steady")
        data = json.loads(http_get(f"{self.urls['prometheus']}/api/v1/rules?type=alert"))["data"]
        names = {r.get("name") for g in data.get("groups", []) for r in g.get("rules", [])}
        if "SloBurnRatePage" not in names:
            raise Refused(f"Prometheus at {self.urls['prometheus']} has no SloBurnRatePage rule: deploy"
                          " `opsctl slo rules` first")
        self._say("probe", "ok: the burn-rate rules are loaded; no burn-rate alert firing (preflight)")

    # -- faults -------------------------------------------------------------------------------

    def _injector(self, name: str):
        if name not in self._injectors:
            from opsctl.drills.faults.registry import injector

            self._injectors[name] = injector(name, self.user_cfg, self.state.run_id)
        return self._injectors[name]

    def _fault_on(self, fault_id: str, fault, backend: str) -> dict:
        from opsctl.drills.faults.registry import injector_for_fault

        name = injector_for_fault(fault, live=True)
        inj = self._injector(name)
        now = time.time()
        record = inj.prepare(fault, backend, now)
        record.update(id=fault_id, removed_at=None)
        self.state.data["faults"].append(record)
        self.state.save()  # before anything changes: `drill cleanup` can undo it after a crash
        what = inj.apply(record)
        record["applied_at"] = time.time()
        self.state.save()
        self._say("setup", f"live fault {fault_id}: {what}")
        return {"id": fault_id, "kind": fault.kind, "backend": backend, "params": dict(fault.params),
                "on_at": record["applied_at"], "off_at": None}

    def _faults_off(self) -> None:
        for record in self.state.data.get("faults", []) if self._state else []:
            if record.get("removed_at") is not None or record.get("applied_at") is None:
                continue
            try:
                message = self._injector(record["injector"]).remove(record, time.time())
                record["removed_at"] = time.time()
                self.rollbacks.append({"action": "remove-faults", "status": "done", "message": message})
            except OpsctlError as exc:
                self.rollbacks.append({"action": "remove-faults", "status": "failed", "message": exc.message})
            self.state.save()

    def _restore_traffic(self) -> None:
        from opsctl.traffic.registry import open_actuator

        if self.original_split is None:
            return
        now = open_actuator(self.user_cfg).read().split
        order = list(self.user_cfg.backends)
        if now == self.original_split:
            self.rollbacks.append({"action": "restore-traffic", "status": "done", "message": "the split is as before"})
        else:
            self.rollbacks.append({"action": "restore-traffic", "status": "skipped", "message": (
                f"the split is {now.describe(order) if now else 'unknown'} (was {self.original_split.describe(order)}):"
                " opsctl serve restores it after its hold-down once the alert resolves; check `opsctl traffic status`")})

    def _outcomes(self, backend: str, start: float, end: float) -> dict:
        from urllib.parse import quote

        span = max(10, int(end - start))
        q = outcomes_query(backend, span, self.cfg.service_matcher)
        body = json.loads(http_get(f"{self.urls['prometheus']}/api/v1/query?query={quote(q)}&time={end}"))
        return {r["metric"].get("outcome", "?"): float(r["value"][1]) for r in body["data"]["result"]}

    # -- evidence -----------------------------------------------------------------------------

    def _make_collector(self, targets):
        return LiveCollector(targets, None, self._desk, None, lambda at, kind, message: self._say(kind, message, at=at),
                             cfg=self.user_cfg, t0=self.t0, original=self.original_split)

    def _stop_conditions(self) -> None:
        faulted = {f["backend"] for f in self.fault_records}
        data = json.loads(http_get(f"{self.urls['prometheus']}/api/v1/alerts"))["data"]["alerts"]
        for a in data:
            labels = a.get("labels", {})
            if a.get("state") == "firing" and labels.get("severity") == "page" and labels.get("backend") not in faulted \
                    and labels.get("backend") != "all":
                raise _Stop(f"stop condition: {labels.get('slo')} pages on {labels.get('backend')}, a backend the"
                            " drill did not fault")
        collector = self.collector
        if not isinstance(collector, LiveCollector):  # made by _make_collector, before the first poll
            raise RuntimeError("the live chain drill's collector is not made yet")
        for incident in collector.other_incidents():
            raise _Stop(f"stop condition: real incident {incident.id} {incident.title!r} is {incident.status}")

    def finish(self, outcome, data, paths) -> None:
        try:
            super().finish(outcome, data, paths)
        finally:
            if self._lock is not None:
                self._lock.close()


class LiveCollector(Collector):
    """Evidence from the user's components: serve's /metrics (its log is the cluster's), the pager's
    incidents, the actuator's split."""

    def __init__(self, *args, cfg, t0: float, original, **kw):
        super().__init__(*args, **kw)
        self.cfg, self.t0, self.original = cfg, t0, original
        self.baseline: dict[str, float] | None = None
        self.mine: set[str] = set()
        self._others: list = []

    def _actions(self, samples) -> dict[tuple[str, str, str], float]:
        out = {}
        for k, v in samples.items():
            m = re.match(r'opsctl_automation_actions_total\{(.*)\}', k)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                out[(labels.get("policy", ""), labels.get("action", ""), labels.get("status", ""))] = v
        return out

    def _serve(self) -> None:
        samples = parse_metrics(http_get(f"{self.targets.serve}/metrics").decode())
        counts = {"accepted": _sum(samples, "opsctl_webhook_deliveries_total{", 'result="accepted"',
                                   'source="alertmanager"')}
        actions = self._actions(samples)
        if self.baseline is None:  # counters run since serve started: count what the drill adds
            self.baseline = {**counts, **{"|".join(k): v for k, v in actions.items()}}
            return
        now = time.time()
        if counts["accepted"] > self.baseline["accepted"]:
            self._reach("serve", now, f"opsctl serve accepted {int(counts['accepted'] - self.baseline['accepted'])}"
                                      " new Alertmanager delivery(ies) (its /metrics)")
        new = {k: v - self.baseline.get("|".join(k), 0.0) for k, v in actions.items()}
        new = {k: v for k, v in new.items() if v > 0}
        failover = [(k, v) for k, v in new.items() if k[1] == "failover"]
        if new:
            policy, action, status = (failover or list(new.items()))[0][0]
            self._reach("policy", now, f"opsctl serve /metrics: policy {policy}: {action} {status}")
            if self.targets.expect_failover and failover and not any(k[2] in ("applied", "noop") for k, _ in failover):
                self.hops["policy"].failed = f"the failover was {failover[0][0][2]} (see serve's log)"
        else:
            self.hops["policy"].last = "opsctl serve /metrics: no new action"
        tickets = [k for k in new if k[1] == "ticket" and k[2] in ("applied", "noop")]
        if tickets:
            configured = next((p for p in self.cfg.automation.policies if p.name == tickets[0][0]), None)
            category = _ticket_category(configured, self.cfg.runbooks.tickets)
            self._reach("ticket", now, f"opsctl serve /metrics: policy {tickets[0][0]} filed the vendor ticket"
                                       f" (its configured category {category!r})")
            want = self.targets.ticket_category
            if want is not None and category != want:
                self.hops["ticket"].failed = f"policy {tickets[0][0]} files in {category!r}, the scenario expects {want!r}"

    def _actuator(self) -> None:
        from opsctl.traffic.registry import open_actuator

        split = open_actuator(self.cfg).read().split
        backend = self.targets.backend
        order = list(self.cfg.backends)
        if split is not None and self.original is not None and \
                split.weights.get(backend, 0) < self.original.weights.get(backend, 0):
            self._reach("actuator", time.time(), f"{self.cfg.traffic.actuator} actuator: {self.original.describe(order)}"
                                                 f" -> {split.describe(order)}")
        else:
            self.hops["actuator"].last = f"split {split.describe(order) if split else 'unknown'}"

    def _ticket(self) -> None:
        pass  # from serve's /metrics, above

    def _pagerduty(self) -> None:
        from opsctl.drills.safety import is_drill_incident
        from opsctl.paging.registry import open_pager

        listing = getattr(open_pager(self.cfg), "open_incidents", None)
        if listing is None:
            self.hops["pagerduty"].last += f"; the {self.cfg.paging.provider} pager cannot list incidents"
            return
        opened, others = [], []
        for i in listing():
            if is_drill_incident(i):
                continue
            created = getattr(i, "created_at", None)
            if created is not None and created >= self.t0 - 5 and self.targets.backend in (i.title or ""):
                opened.append(i)
                self.mine.add(i.id)
            elif i.id not in self.mine:
                others.append(i)
        self._others = others
        if opened:
            first = min(opened, key=lambda i: i.created_at)
            self._reach("pagerduty", first.created_at, f"{self.cfg.paging.provider}: incident {first.id} {first.title!r}")
            if first.acknowledged_at is not None:
                self._reach("acknowledged", first.acknowledged_at, f"{self.cfg.paging.provider}: {first.id} acknowledged")
            else:
                self.hops["acknowledged"].last = f"incident {first.id} is {first.status}"

    def other_incidents(self) -> list:
        return list(self._others)


def _ticket_category(policy, tickets) -> str | None:
    """The category a policy files in: its own, else the one its causes lead to through
    runbooks.tickets (as serve's policy engine chooses it); None when its causes lead to several."""
    if policy is None or policy.actions.ticket is None:
        return None
    if policy.actions.ticket.category:
        return policy.actions.ticket.category
    causes = policy.causes or [None]
    found = {tickets.category_for(c) for c in causes}
    return found.pop() if len(found) == 1 else None
