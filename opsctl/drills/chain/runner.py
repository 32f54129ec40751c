"""`opsctl drill run SCENARIO --chain`: the scenario's fault sent down the real chain, hop by hop.

    preflight   the binaries are on PATH, the scenario fits the config and the chain (its faults
                are ones the exporter can switch), the routing file loads
    setup       the drill's config, the generated rules (promtool-checked), the baseline history
                backfilled with promtool, then exporter, PagerDuty endpoint, ticket bridge,
                Alertmanager, Prometheus and `opsctl serve` started and ready
    steady      Prometheus scrapes the exporter and no page-level alert is pending or firing
    method      the faults switch on (pauses capped); every second each component is asked what
                happened (hops.py); the simulated on-call acknowledges the PagerDuty incident
    verdict     every required hop happened (and right: a failover applied, the ticket in the
                expected category), else the drill fails naming the first broken hop and its last
                evidence; the scenario's own deadlines are judged on the same measurements
    rollbacks   faults off, incidents resolved, every process stopped (always, also on Ctrl-C)
    report      Markdown, JSON, HTML under <state_dir>/drills/<run-id>/ with the processes' logs
"""

from __future__ import annotations

import json
import math
import os
import secrets
import signal
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from opsctl.drills.engine import DrillResult
from opsctl.drills.lifecycle import Aborted, Lifecycle, Outcome, Refused
from opsctl.drills.phases import Facts, HopSignals, Judgement, Results, Rollback, Signals, Steady
from opsctl.drills.prepared import Prepared
from opsctl.errors import ConfigError, OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.chain.exporter import ProxyExporter
    from opsctl.drills.chain.hops import Collector, Targets
    from opsctl.drills.chain.pdsink import PagerDutySink
    from opsctl.drills.report_model import DrillReport
    from opsctl.drills.state import RunState
    from opsctl.tickets.base import TicketProvider

POLL = 1.0  # seconds between asking every component what happened
DEFAULT_TIMEOUT = 240  # seconds from the fault for every hop to happen
DEFAULT_HISTORY = 6 * 3600  # seconds of backfilled baseline: every page window (1h, 6h) has data
ACK_CAP = 20  # seconds: the simulated on-call's acknowledgement, at most (the scenario's, shortened)
PAUSE_CAP = 10  # seconds: a method step's pause, at most
STEADY_TIMEOUT = 90  # seconds for Prometheus to scrape and evaluate the rules once


class _Stop(Aborted):
    """A stop condition, a signal or a steady state not met mid-chain: the drill aborts."""


class ChainDrill:
    exporter: Prepared[ProxyExporter] = Prepared("the drill's exporter is not started yet")
    sink: Prepared[PagerDutySink] = Prepared("the drill's PagerDuty endpoint is not started yet")
    state: Prepared[RunState] = Prepared("the drill's run state is not created yet")

    mode = "chain"

    def __init__(self, scenario, user_cfg, *, routing: Path | None, timeout: int | None = DEFAULT_TIMEOUT,
                 history: int = DEFAULT_HISTORY, progress: Callable[[str], None] | None = None):
        self.scenario = scenario
        self.user_cfg = user_cfg
        self.routing_path = Path(routing) if routing is not None else None
        self.timeout = timeout
        self.history = history
        self.progress = progress or (lambda line: None)
        self.timeline: list[dict] = []
        self.phase = "preflight"
        self.t0: float | None = None
        self.stop_reason: str | None = None
        self.processes: list = []
        self.servers: list = []
        # set as the drill reaches them (the properties below say when one is read before)
        self._exporter: ProxyExporter | None = None
        self._sink: PagerDutySink | None = None
        self._state: RunState | None = None
        self.collector: Collector | None = None  # made once the first fault is on
        self.checks: list = []  # the preflight checks that ran (a live chain drill's)
        self.facts: dict = {}
        self.rollbacks: list[dict] = []
        self.prediction: dict = {}
        self.group_wait = 0.0  # the drill's Alertmanager routes' longest group_wait (0: not known)
        self.routing: dict | None = None  # the drill's Alertmanager config, once written (setup)
        self.serve_receivers: frozenset = frozenset()  # its receivers whose webhook is serve's
        self.attribution: list[dict] = []
        self.budget: dict = {}
        self.fault_records: list[dict] = []

    # =========================================================================================

    def run(self) -> DrillResult:
        from opsctl.drills.chain.binaries import find_all
        from opsctl.drills.scenario import check_against_config
        from opsctl.drills.state import RunState
        from opsctl.slo.loading import load_slos

        wall = time.monotonic()
        self.slos = load_slos([self.user_cfg.slo_dir], self.user_cfg.backends, config=self.user_cfg)
        problems = check_against_config(self.scenario, self.user_cfg, [s.name for s in self.slos],
                                        live=self.mode == "live-chain")
        problems += self._chain_problems()
        if problems:
            raise ConfigError(f"{self.scenario.path}: the scenario cannot run as a chain drill", problems=problems)
        self._prepare()
        self.state = RunState.create(self.user_cfg.drills_path, scenario=self.scenario, mode=self.mode,
                                     config_path=self.user_cfg.source_path)
        self.dir = self.state.dir
        try:
            shutil.copyfile(self.scenario.path, self.dir / "scenario.yaml")
        except OSError:
            pass
        self._say("phase", f"drill {self.state.run_id}: {self.scenario.title} ({self.mode})")
        restore = self._signals()
        self.lifecycle = Lifecycle(self, declared_rollbacks=tuple(self.scenario.rollbacks))
        try:
            outcome, data, paths = self.lifecycle.run(wall)
        finally:
            restore()
            self._stop_all()
            self.state.release()
        return DrillResult(self.state.run_id, outcome.outcome, outcome.exit_code, data,
                           {k: str(v) for k, v in paths.items()})

    # -- the World this drill is to the lifecycle (lifecycle.py) ---------------------------------

    @property
    def run_dir(self):
        return self.dir

    def say(self, kind: str, message: str) -> None:
        self._say(kind, message)

    def set_phase(self, phase: str) -> None:
        self._set_phase(phase)

    @staticmethod
    def _aborting(call) -> None:
        try:
            call()
        except OpsctlError as exc:  # a component that failed: the drill aborts with its one line
            raise Aborted(exc.message) from exc

    def prepare(self) -> Facts:
        self._aborting(self._setup)
        return Facts(checks=tuple(self.checks), facts=dict(self.facts))

    def steady_state(self, prepared: Facts) -> Steady:
        self._aborting(self._steady)
        return Steady()  # the probe is said on the timeline: Prometheus scrapes, the rules evaluate

    def method(self, steady: Steady) -> HopSignals:
        self._aborting(self._method)
        return self._hop_signals()

    def partial(self, phase: str) -> Facts | Steady | Signals | None:
        if phase == "preflight":
            return Facts(checks=tuple(self.checks), facts=dict(self.facts))
        if phase == "steady-state":
            return Steady()
        return self._hop_signals()

    def _hop_signals(self) -> HopSignals:
        return HopSignals(t0=self.t0, hops=dict(self.collector.hops) if self.collector else {},
                          prediction=dict(self.prediction), attribution=tuple(self.attribution),
                          budget=dict(self.budget))

    def judge(self, signals: Signals | None, stopped: str | None) -> Judgement:
        """A required hop that did not happen (or happened wrong) fails the drill; the report judges
        the scenario's own expectations on the same hops."""
        hops = signals.hops if isinstance(signals, HopSignals) else {}
        return Judgement(failed=tuple(f"hop {h.key}" for h in hops.values() if h.required and not h.passed))

    def roll_back(self, order: list[str]) -> Rollback:
        self._rollbacks(order)
        return Rollback(actions=tuple(self.rollbacks))

    def report(self, outcome: Outcome, results: Results, wall_seconds: float) -> dict:
        from opsctl.drills.chain.report import chain_report

        self._stop_all()  # before the report: the logs are complete
        self.state.data.update(outcome=outcome.outcome, abort_reason=results.abort_reason, finished_at=time.time(),
                               window={"start": self.t0, "end": self._fault_end()})
        return chain_report(self, results, outcome.outcome, outcome.exit_code, wall_seconds)

    def finish(self, outcome: Outcome, data: DrillReport, paths: dict) -> None:
        self.state.data["report"] = {k: str(v) for k, v in paths.items()}
        self.state.data["phase"] = "done"
        self.state.save()

    def _prepare(self) -> None:
        from opsctl.drills.chain.binaries import find_all

        self.binaries = find_all()
        self.routing_raw = self._load_routing()

    def _chain_problems(self) -> list[str]:
        from opsctl.drills.chain.faults import KINDS

        faults = self.scenario.faults
        out = [f"{self.scenario.path}: fault kind {f.kind!r} has no chain exporter fault (known: {', '.join(KINDS)})"
               for f in faults if f.kind not in KINDS]
        if not faults:
            out.append(f"{self.scenario.path}: a chain drill needs a fault to send down the chain (method has none)")
        out += self._quality_refusal()
        return out

    def _quality_refusal(self) -> list[str]:
        """A quality scenario is refused, with the reason, rather than left to wait out its timeout:
        the chain does not yet scale the quality rules' `for:`, backfill as far back as they compare,
        nor check their minimum traffic against the scenario's rate."""
        from opsctl.quality.rules import plan_quality

        sc = self.scenario
        quality = [f.kind for f in sc.faults if f.kind == "quality-regression"] or [
            e.alert for e in sc.expectations if e.expect == "detected" and (e.alert or "").startswith("Quality")]
        if not quality:
            return []
        plan = plan_quality(self.user_cfg)
        if plan is None:
            return [f"{sc.path}: a quality scenario in a chain drill, but quality.rules.enabled is false: nothing would fire"]
        longest_for = max((a.for_seconds for a in plan.alerts), default=0)
        needs = max((a.needs_per_side() for a in plan.alerts), default=0.0)  # the noise guard, per window
        return [f"{sc.path}: a chain drill does not run quality scenarios yet: the quality rules compare with"
                f" {plan.offset} earlier (the chain backfills {self.history / 3600:g}h), their for: {longest_for}s is not"
                f" shortened, and the noisiest needs {needs:,.0f} requests per {plan.window} on each side (the scenario"
                f" sends {sc.embedded.peak_rps:g}/s at peak; the chain's traffic rate is not checked against it): run it"
                f" embedded (opsctl drill run {sc.path})"]

    def _routing(self) -> Path:
        if self.routing_path is None:  # a live chain drill routes through the user's own Alertmanager
            raise RuntimeError("a local chain drill needs an Alertmanager routing file")
        return self.routing_path

    def _load_routing(self) -> dict:
        from opsctl.config import load_yaml_file

        raw = load_yaml_file(self._routing(), "Alertmanager routing file")
        if not isinstance(raw, dict) or not isinstance(raw.get("route"), dict) or not raw.get("receivers"):
            raise ConfigError(f"{self.routing_path}: not an Alertmanager config (route and receivers needed)")
        return raw

    # -- progress and signals --------------------------------------------------------------------

    def _say(self, kind: str, message: str, at: float | None = None) -> None:
        at = time.time() if at is None else at
        self.timeline.append({"at": at, "phase": self.phase, "kind": kind, "message": message})
        offset = "" if self.t0 is None else f" {at - self.t0:+7.1f}s"
        self.progress(f"[chain {time.strftime('%H:%M:%S', time.gmtime(at))}{offset}] {self.phase:<10} {kind:<12} {message}")
        if self._state is not None:
            self._state.data["timeline"] = self.timeline

    def _signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):
            if self.stop_reason is None:
                self.stop_reason = f"interrupted by {signal.Signals(signum).name}"

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for s, h in previous.items():
                signal.signal(s, h)
        return restore

    def _check_stop(self) -> None:
        if self.stop_reason:
            raise _Stop(self.stop_reason)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.state.set_phase(phase)

    # =========================================================================================
    # Setup

    def _secret(self, name: str, value: str) -> Path:
        folder = self.dir / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value)
        return path

    def _setup(self) -> None:
        import yaml

        from opsctl.config import load_config_file
        from opsctl.drills.chain import components as c
        from opsctl.drills.chain.bridge import WebhookRecorder
        from opsctl.drills.chain.pdsink import PagerDutySink, new_routing_key
        from opsctl.drills.chain.setup import SCRAPE_INTERVAL, DRILL_EVALUATION, Shortened, drill_config, drill_routing

        self._set_phase("setup")
        shortened = Shortened()
        serve_token = self._secret("serve-token", secrets.token_urlsafe(24))
        bridge_token = secrets.token_urlsafe(24)
        bridge_token_file = self._secret("bridge-token", bridge_token)
        routing_key = new_routing_key()
        routing_key_file = self._secret("pagerduty-routing-key", routing_key)

        self.sink = PagerDutySink(routing_key)
        self.sink.start()
        self.servers.append(self.sink)
        bridge = WebhookRecorder(bridge_token)
        bridge_url = bridge.start()
        self.servers.append(bridge)
        self.bridge = bridge
        prom_port, am_port, serve_port = c.free_port(), c.free_port(), c.free_port()
        prom_url, am_url, serve_url = (f"http://127.0.0.1:{p}" for p in (prom_port, am_port, serve_port))

        raw = drill_config(self.user_cfg, self.dir, prometheus_url=prom_url, token_file=serve_token, shortened=shortened)
        cfg_path = self.dir / "opsctl.yaml"
        cfg_path.write_text("# The chain drill's config: the user's, pointed at the drill (see the report).\n"
                            + yaml.safe_dump(raw, sort_keys=False))
        self.cfg = load_config_file(cfg_path)
        self.cfg_path = cfg_path
        self._say("setup", f"drill config {cfg_path} (state, split, pager and audit log in the run directory)")

        rules = self.dir / "rules.yaml"
        c.generate_rules(cfg_path, rules)
        c.check_rules(self.binaries["promtool"], rules)
        groups = yaml.safe_load(rules.read_text()).get("groups", [])
        self._say("setup", f"`opsctl slo rules` wrote {len(groups)} rule groups ({sum(len(g['rules']) for g in groups)}"
                           " rules); promtool check rules: ok")

        split = self._split()
        backends = {n: b.kind for n, b in self.cfg.backends.items()}
        env = self.scenario.embedded
        now = time.time()
        history = self._backfill(backends, split, now, env.peak_rps, env.seed)

        from opsctl.drills.chain.exporter import ProxyExporter

        self.exporter = ProxyExporter(backends, peak_rps=env.peak_rps, seed=env.seed + 1, split=self._split,
                                      history=history, labels=self.cfg.service_labels)
        exporter_url = self.exporter.start()
        self.servers.append(self.exporter)
        self._say("setup", f"exporter of the proxy's metrics on {exporter_url}/metrics (peak {env.peak_rps:g} rps,"
                           f" split {_split_text(split)})")

        am_raw, notes = drill_routing(self.routing_raw, pagerduty_url=self.sink.url, routing_key_file=routing_key_file,
                                      serve_url=serve_url, serve_token_file=serve_token, bridge_url=bridge_url,
                                      bridge_token_file=bridge_token_file, shortened=shortened)
        self.group_wait = _longest_group_wait(am_raw["route"])
        self.routing = am_raw  # as the drill's Alertmanager runs it (its waits shortened)
        self.serve_receivers = frozenset(
            r.get("name") for r in am_raw.get("receivers") or []
            if any(urlparse_path(h.get("url", "")).rstrip("/").endswith("/v1/alertmanager")
                   for h in r.get("webhook_configs") or []))
        self.pagerduty_receivers = frozenset(r.get("name") for r in am_raw.get("receivers") or []
                                             if r.get("pagerduty_configs"))
        am_cfg = self.dir / "alertmanager.yml"
        am_cfg.write_text(yaml.safe_dump(am_raw, sort_keys=False))
        for note in notes:
            self._say("setup", f"routing {self._routing().name}: {note}")
        prom_cfg = self.dir / "prometheus.yml"
        prom_cfg.write_text(yaml.safe_dump({
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL}s", "evaluation_interval": f"{DRILL_EVALUATION}s"},
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{"job_name": "llm-proxy", "static_configs": [{"targets": [self.exporter.address]}]}],
        }, sort_keys=False))

        am = c.Process("alertmanager", [self.binaries["alertmanager"], f"--config.file={am_cfg}",
                                        f"--storage.path={self.dir / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
                                        "--cluster.listen-address="], self.dir / "alertmanager.log", f"{am_url}/-/ready")
        self.processes.append(am)
        prom = c.Process("prometheus", [self.binaries["prometheus"], f"--config.file={prom_cfg}",
                                        f"--storage.tsdb.path={self.dir / 'prom-data'}",
                                        f"--web.listen-address=127.0.0.1:{prom_port}",
                                        "--storage.tsdb.retention.time=3650d"],
                         self.dir / "prometheus.log", f"{prom_url}/-/ready")
        self.processes.append(prom)
        serve = c.Process("opsctl serve", c.opsctl_command(cfg_path, "serve", "--bind", f"127.0.0.1:{serve_port}"),
                          self.dir / "serve.log", f"{serve_url}/readyz", env=c.opsctl_env(), cwd=self.dir)
        self.processes.append(serve)
        for p in (am, prom, serve):
            p.wait_ready(should_stop=lambda: self.stop_reason is not None)
            self._check_stop()
            self._say("setup", f"{p.name} ready ({p.ready_url.rsplit('/', 1)[0]}; log {p.log_path.name})")
        self.urls = {"prometheus": prom_url, "alertmanager": am_url, "serve": serve_url}
        self.shortened = shortened
        self.facts = {"urls": self.urls, "binaries": self.binaries, "config": str(cfg_path), "rules": str(rules),
                      "routing": str(self.routing_path), "alertmanager_config": str(am_cfg),
                      "history_seconds": self.history, "peak_rps": env.peak_rps, "shortened": shortened.items,
                      "routing_notes": notes}
        self.state.data["chain"] = {"urls": self.urls, "config": str(cfg_path)}
        self.state.save()

    def _split(self) -> dict[str, float]:
        from opsctl.traffic.registry import open_actuator

        stored = open_actuator(self.cfg).read()
        weights = dict(stored.split.weights) if stored.split else dict(self.cfg.traffic.default_split)
        return {b: float(weights.get(b, 0)) for b in self.cfg.backends}

    def _backfill(self, backends, split, now, peak_rps, seed):
        from opsctl.drills.chain.components import backfill
        from opsctl.metrics.simulator import STEP, export_openmetrics, simulate

        end = int(now) // STEP * STEP
        series = simulate(end - self.history, end, backends=backends, split=split, peak_rps=peak_rps, seed=seed)
        path = self.dir / "history.om"
        samples = export_openmetrics(series, path, labels=self.cfg.service_labels)
        started = time.monotonic()
        backfill(self.binaries["promtool"], path, self.dir / "prom-data")
        path.unlink()
        self._say("setup", f"backfilled {self.history / 3600:g}h of baseline history ({samples:,} samples) with"
                           f" promtool tsdb create-blocks-from openmetrics in {time.monotonic() - started:.1f}s")
        return series

    # =========================================================================================
    # Steady state and method

    def _query(self, expr: str) -> list:
        from urllib.parse import quote

        from opsctl.drills.chain.components import http_get

        body = json.loads(http_get(f"{self.urls['prometheus']}/api/v1/query?query={quote(expr)}"))
        return body.get("data", {}).get("result", [])

    def _steady(self) -> None:
        from opsctl.drills.chain.components import http_get

        self._set_phase("steady")
        deadline = time.monotonic() + STEADY_TIMEOUT
        scraped = evaluated = False
        while time.monotonic() < deadline:
            self._check_stop()
            try:
                scraped = any(r["value"][1] == "1" for r in self._query('up{job="llm-proxy"}'))
                evaluated = bool(self._query("slo:sli_error:ratio_rate5m"))
            except (OSError, ValueError):
                pass
            if scraped and evaluated:
                break
            time.sleep(0.5)
        if not scraped:
            raise OpsctlError("Prometheus never scraped the exporter", hint=f"see {self.dir / 'prometheus.log'}")
        if not evaluated:
            raise OpsctlError("the generated recording rules produced no slo:sli_error:ratio_rate5m series",
                              hint="check the SLOs' selectors against the proxy's metrics (`opsctl slo rules`)")
        alerts = json.loads(http_get(f"{self.urls['prometheus']}/api/v1/alerts"))["data"]["alerts"]
        paging = [a for a in alerts if a["labels"].get("severity") == "page"]
        if paging:
            names = ", ".join(f"{a['labels'].get('slo')} {a['state']}" for a in paging[:3])
            raise _Stop(f"steady state not met: page-level alerts already {names} before the fault")
        self._say("probe", "ok: Prometheus scrapes the exporter, the rules evaluate, no page-level alert")

    def _method(self) -> None:
        from opsctl.drills.chain.faults import broken_hop
        from opsctl.automation.policy import CompiledPolicy
        from opsctl.drills.chain.hops import Targets, recorded_service_matcher
        from opsctl.drills.scenario import default_backend

        self._set_phase("method")
        faults: list[dict] = []
        for step in self.scenario.method:
            self._check_stop()
            pause = min(step.pause_before, PAUSE_CAP)
            if pause:
                self._sleep(pause)
            if step.action == "inject-fault":
                fault = step.fault
                backend = fault.backend or default_backend(fault.kind, self.cfg)
                if backend is None:  # check_against_config names it first
                    raise ConfigError(f"{self.scenario.path}: {step.name}: no backend to inject {fault.kind} into")
                record = self._fault_on(f"f{len(faults) + 1}", fault, backend)
                record.update(name=step.name, hop=broken_hop(fault.kind), duration=fault.duration)
                faults.append(record)
                self.fault_records = faults
                if self.t0 is None:
                    self.t0 = record["on_at"]
                    self.state.data["t0"] = self.t0
                self._say("fault", f"{step.name}: {fault.kind} on {backend} {fault.params} (breaks the hop:"
                                   f" {record['hop']})", at=record["on_at"])
            elif step.action == "wait":
                self._sleep(min(step.duration, PAUSE_CAP))
            else:
                self._say("skipped", f"{step.name}: {step.action} is done by the chain itself in a chain drill")
        first = faults[0]
        expect = {e.expect: e for e in self.scenario.expectations}
        ticket = expect.get("vendor-ticket")
        vendor_backend = self.cfg.backends[first["backend"]]
        targets = Targets(
            prometheus=self.urls["prometheus"], alertmanager=self.urls["alertmanager"], serve=self.urls["serve"],
            serve_log=self.dir / "serve.log", backend=first["backend"],
            expect_failover="failover-applied" in expect,
            ticket_vendor=(ticket.vendor if ticket else vendor_backend.vendor),
            ticket_category=ticket.category if ticket else None,
            pagerduty_receivers=getattr(self, "pagerduty_receivers", None),
            policies=tuple(CompiledPolicy.of(p) for p in self.cfg.automation.policies),
            scope=self.cfg.service_matcher, recorded_scope=recorded_service_matcher(self.cfg))
        self.collector = collector = self._make_collector(targets)
        collector.hops["fault"].reach(first["on_at"], f"exporter: {first['kind']} on {first['backend']} switched on")
        oc = self.scenario.on_call
        ack_after = None
        if oc.acknowledge_after is not None and self.mode == "chain":
            ack_after = min(oc.acknowledge_after, ACK_CAP)
            if ack_after != oc.acknowledge_after:
                self.shortened.add("responders.on-call.acknowledge-after", f"{oc.acknowledge_after}s", f"{ack_after}s",
                                   "the simulated on-call acknowledges sooner so the drill takes minutes")
        self.prediction = self._predict(first)
        if self.timeout is None:  # --chain-timeout not given: from the prediction (drill run --help)
            from opsctl.drills.prediction import derived_timeout

            self.timeout, why = derived_timeout(self.prediction, DEFAULT_TIMEOUT)
            self._say("deadline", f"every hop within {self.timeout}s of the fault ({why})")
        t0 = self.t0
        if t0 is None:  # set by the first fault, above
            raise RuntimeError("the chain drill injected no fault")
        deadline = t0 + self.timeout
        from opsctl.drills import method

        stepper = HopPolling(self, collector, ack_after, oc.name, deadline)
        if method.run(stepper, deadline, max_steps=2 * int(self.timeout / POLL) + 100) == method.SETTLED:
            self._say("settled", "every required hop happened" if not collector.broken() else
                      "every required hop happened or can no longer happen")
        else:
            self._say("deadline", f"{self.timeout}s after the fault: not every hop happened")
        self._attribute()
        self._measure_budget(t0)

    def _predict(self, first: dict) -> dict:
        """What the burn-rate maths predicts from the first fault, on the drill's own rules ({} if nothing)."""
        from opsctl.drills.prediction import chain_prediction
        from opsctl.slo.loading import load_slos
        from opsctl.slo.rules import RuleSettings, plan_rules

        step = next(s for s in self.scenario.method if s.action == "inject-fault")
        try:
            plans = plan_rules(load_slos([self.cfg.slo_dir], self.cfg.backends, config=self.cfg),
                               RuleSettings.from_config(self.cfg))
        except OpsctlError as exc:
            self._say("prediction", f"none: {exc.message}")
            return {}
        from opsctl.drills.scenario import resolve_slo

        detected = next((e.slo for e in self.scenario.expectations if e.expect == "detected" and e.slo), None)
        if detected is not None:
            detected = resolve_slo(detected, [p.slo.name for p in plans], self.cfg.service) or detected
        from opsctl.drills.prediction import LATENCY_FAULTS

        if self.mode != "chain":  # live: real backends and traffic, not the simulator's latency model or rate
            if step.fault.kind in LATENCY_FAULTS:  # a delay or a scaled-down Deployment: not the simulator's
                return {}
            return chain_prediction(plans, step.fault.kind, dict(step.fault.params), first["backend"], self._split(),
                                    slo=detected, group_wait=self.group_wait)
        from opsctl.drills.prediction import traffic_load

        pred = chain_prediction(plans, step.fault.kind, dict(step.fault.params), first["backend"], self._split(),
                                slo=detected, group_wait=self.group_wait,
                                kinds={n: b.kind for n, b in self.cfg.backends.items()},
                                load=traffic_load(first["on_at"]), peak_rps=self.scenario.embedded.peak_rps)
        return self._predict_response(pred, plans, step.fault, first["backend"])

    def _predict_response(self, pred: dict, plans, fault, backend: str) -> dict:
        """The mitigate and ticket hops (prediction.response_hops): the first tier's alert walked
        down the drill's routing tree to serve's receiver (its group_wait, as shortened), then the
        policy it reaches. The page keeps the prediction's own (the longest group_wait)."""
        import dataclasses

        from opsctl.drills.chain.routes import receivers_for
        from opsctl.drills.prediction import response_hops
        from opsctl.slo.rules import RuleSettings, alert_labels

        plan = next((p for p in plans if p.slo.name == pred.get("slo")), None)
        firing = [t for t in pred.get("tiers") or [] if t["predicted_seconds"] is not None]
        if plan is None or not firing or self.routing is None:
            return pred
        first = min(firing, key=lambda t: t["predicted_seconds"])
        alert = next(a for a in plan.alerts if (a.alertname, a.long, a.short) == (first["alert"], first["long"],
                                                                                   first["short"]))
        labels = alert_labels(plan, alert, RuleSettings.from_config(self.cfg))
        waits = [w for r, w in receivers_for(self.routing["route"], labels) if r in self.serve_receivers]
        if not waits:
            for h in pred["hops"]:
                if h["hop"] in ("mitigate", "ticket"):
                    h["why"] = f"the drill's routing sends {first['alert']} to no opsctl serve receiver"
            return pred
        wait = int(math.ceil(min(waits)))
        paging = dataclasses.replace(self.scenario.paging, automation_group_wait=wait, fast_automation_group_wait=wait)
        response = response_hops(self.cfg, paging, plan, pred["tiers"], fault_kind=fault.kind,
                                 params=dict(fault.params), backend_kind=self.cfg.backends[backend].kind)
        hops = response.pop("hops")
        for h in pred["hops"]:
            if h["hop"] in ("mitigate", "ticket"):
                h["predicted_seconds"], h["why"] = hops[h["hop"]]
        response.pop("page_wait_seconds", None)  # the chain's page: the prediction's group_wait
        pred["response"] = response
        return pred

    def _fault_on(self, fault_id: str, fault, backend: str) -> dict:
        record = self.exporter.fault_on(fault_id, fault.kind, backend, fault.params)
        self.state.data["faults"].append({**record, "injector": "chain-exporter", "removed_at": None,
                                          "start": record["on_at"], "end": record["on_at"] + fault.duration})
        self.state.save()
        return record

    def _make_collector(self, targets: Targets) -> Collector:
        from opsctl.audit import AuditLog
        from opsctl.drills.chain.hops import Collector

        return Collector(targets, self.sink, self._desk, AuditLog(self.cfg.audit_path),
                         lambda at, kind, message: self._say(kind, message, at=at))

    def _stop_conditions(self) -> None:
        """A local chain touches nothing real: its only stop is Ctrl-C (checked every poll)."""

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._check_stop()
            time.sleep(min(0.25, max(0.0, end - time.monotonic())))

    def _desk(self, vendor: str):
        if not hasattr(self, "_desks"):
            self._desks: dict[str, TicketProvider] = {}
        if vendor not in self._desks:
            from opsctl.tickets.registry import open_ticket_provider

            self._desks[vendor] = open_ticket_provider(self.cfg, vendor)
        return self._desks[vendor]

    # -- what the faults did --------------------------------------------------------------------

    def _attribute(self) -> None:
        from opsctl.drills.chain.faults import symptoms

        for f in self.fault_records:
            before = self._outcomes(f["backend"], f["on_at"] - 3600, f["on_at"])
            during = self._outcomes(f["backend"], f["on_at"], f.get("off_at") or time.time())
            shares = []
            for outcome in symptoms(f["kind"]) or ("server_error", "throttled", "timeout"):
                shares.append(f"{outcome} {_share(during, outcome)} of {f['backend']}'s requests during the fault"
                              f" ({_share(before, outcome)} before)")
            self.attribution.append({"fault": f["id"], "kind": f["kind"], "backend": f["backend"], "hop": f["hop"],
                                     "seen": "; ".join(shares), "during": during, "before": before})
            self._say("attribution", f"{f['kind']} breaks {f['hop']}: " + "; ".join(shares))

    def _outcomes(self, backend: str, start: float, end: float) -> dict:
        """Requests by outcome: the exporter's own count of what it served."""
        return self.exporter.outcomes_between(start, end)[backend]

    def _measure_budget(self, t0: float) -> None:
        from opsctl.drills.measure import BurnMeter
        from opsctl.metrics.base import open_source

        backends = {f["backend"] for f in self.fault_records}
        slos = [s for s in self.slos if s.backend in backends or s.backend == "all"]
        try:
            source = open_source(self.cfg)
            meter = BurnMeter(source, slos, self.user_cfg.slos.period_seconds)
            meter.measure_period(t0, history_seconds=self.history)
            samples = meter.sample(time.time(), [3600], t0)
        except OpsctlError as exc:
            self._say("budget", f"could not measure the budget spent: {exc.message}")
            return
        if self.history:
            meter.basis = (f"period budget estimated from {self.history / 3600:g}h of backfilled baseline traffic"
                           f" scaled to the {meter.period_seconds // 86400}d period")
        rows = [{"slo": name, "spent": meter.spent(name, s), "peak_burn_1h": s.burn.get(3600) or 0.0}
                for name, s in sorted(samples.items())]
        self.budget = {"basis": meter.basis, "period_days": meter.period_seconds // 86400, "slos": rows}

    # =========================================================================================
    # Rollbacks, report

    def _rollbacks(self, order: list[str]) -> None:
        """In the lifecycle's order: the exporter's faults off, then the traffic, then the pages."""
        for action in order:
            if action == "remove-faults":
                self._faults_off()
            elif action == "restore-traffic":
                self._restore_traffic()
            elif action == "resolve-pages":
                self._resolve_pages()

    def _faults_off(self) -> None:
        if self._exporter is not None:
            for fault_id in self.exporter.faults_on():
                record = self.exporter.fault_off(fault_id)
                for f in self.state.data["faults"]:
                    if f.get("id") == fault_id:
                        f["removed_at"] = record["off_at"] if record else time.time()
                self.rollbacks.append({"action": "remove-faults", "status": "done",
                                       "message": f"exporter fault {fault_id} switched off"})
            self.state.save()

    def _resolve_pages(self) -> None:
        if self._sink is not None:
            resolved = self.sink.resolve_all()
            self.rollbacks.append({"action": "resolve-pages", "status": "done",
                                   "message": f"resolved {', '.join(resolved) or 'no open incident'} on the drill's"
                                              " PagerDuty endpoint"})

    def _restore_traffic(self) -> None:
        self.rollbacks.append({"action": "restore-traffic", "status": "done",
                               "message": "the split the drill's serve changed is the drill's own file"
                                          " (<run>/traffic/split.json); nothing outside the run changed"})

    def _stop_all(self) -> None:
        for p in reversed(self.processes):
            try:
                p.stop()
            except OSError:
                pass
        for s in reversed(self.servers):
            s.stop()
        self.processes, self.servers = [], []

    def _fault_end(self) -> float | None:
        ends = [f.get("removed_at") for f in self.state.data.get("faults", [])]
        return max((e for e in ends if e), default=None)


class HopPolling:
    """The chain's Stepper for the method loop (method.py): on the wall clock, every POLL seconds
    (and once more at the deadline), ask each component what happened (hops.Collector.poll), then
    acknowledge as the simulated on-call once the page is `ack_after` old (polling again at once),
    then the stop conditions. Settled once every required hop happened or is known never to (a
    delivery no policy matched: the hops after it cannot happen)."""

    def __init__(self, drill: ChainDrill, collector: Collector, ack_after: float | None, who: str, deadline: float):
        self.drill = drill
        self.collector = collector
        self.ack_after = ack_after
        self.who = who
        self.deadline = deadline
        self._poll_now = True  # the first poll, and the one right after an acknowledgement

    def check_stop(self) -> None:
        self.drill._check_stop()

    def settled(self) -> bool:
        return self.collector.settled()

    def next_at(self) -> float:
        now = time.time()
        return now if self._poll_now else min(now + POLL, max(now, self.deadline))

    def advance(self, until: float) -> None:
        wait = until - time.time()
        if wait > 0:
            self.drill._sleep(wait)

    def observe(self, at: float) -> None:
        collector = self.collector
        collector.poll()
        pd = collector.hops["pagerduty"]
        self._poll_now = False
        if self.ack_after is not None and pd.at is not None and collector.hops["acknowledged"].at is None \
                and time.time() >= pd.at + self.ack_after:
            for incident in self.drill.sink.snapshot()[1]:
                if incident["status"] == "triggered":
                    self.drill.sink.acknowledge(incident["dedup_key"], by=self.who)
            self._poll_now = True  # see the acknowledgement at once
            return
        self.drill._stop_conditions()


def urlparse_path(url: str) -> str:
    from urllib.parse import urlparse

    return urlparse(url).path or "/"


def _share(counts: dict, outcome: str) -> str:
    from opsctl.metrics.schema import OUTCOMES

    valid = sum(v for k, v in counts.items() if k in OUTCOMES and k != "client_error")
    return "-" if not valid else f"{counts.get(outcome, 0) / valid:.1%}"


def _split_text(split: dict) -> str:
    return " ".join(f"{k}={v:g}" for k, v in split.items())


def _longest_group_wait(route: dict) -> float:
    """The longest group_wait on any route of an Alertmanager tree: the latest a first notification leaves."""
    from opsctl.clock import parse_duration

    waits: list[float] = [parse_duration(str(route["group_wait"]))] if route.get("group_wait") is not None else []
    waits += [_longest_group_wait(child) for child in route.get("routes") or []]
    return max(waits, default=0.0)
