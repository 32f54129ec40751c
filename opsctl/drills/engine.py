"""The drill engine: preflight, steady state, method, expectations, rollbacks, report.

    preflight     the scenario fits the config; no real incident open, no burn-rate alert firing;
                  the environment is ready (embedded: the drill's own store seeded with baseline)
    steady state  the hypothesis' probes hold (SLO status, alerts, split, freeze); else refused
    method        the actions run in order on a clock while, every tick, the burn-rate alerts are
                  evaluated (a page alert pages on-call after `group-wait`), the simulated responders
                  act (acknowledge, escalate, fail over, file the vendor ticket; the vendor answers),
                  the stop conditions are polled (any hit aborts), and expectations are judged
    expectations  what is still open is judged at the end (not met in time: failed, with the reason)
    rollbacks     always: after success, an abort, Ctrl-C/SIGTERM or a crash (see rollback.py)
    report        Markdown, JSON and HTML under <state_dir>/drills/<run-id>/

Time comes from the environment's clock: a SimClock in the embedded environment (an hour of drill in
seconds), the wall clock live. The loop is discrete-event: it jumps to the next scheduled action or
evaluation tick, so every responder acts at exactly its configured delay. Everything the drill
does is marked as a drill: pages ([DRILL], drill: true in the details), tickets (drill tag),
traffic changes and their audit entries (drill: true, drill_run), Kubernetes objects (annotation).
"""

from __future__ import annotations

import heapq
import itertools
import shutil
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from opsctl.drills.expectations import NOT_EVALUATED, Judge, Observations, TicketSeen, Verdict
from opsctl.drills.report import duration_text
from opsctl.drills.safety import Check, check_real_alerts, check_real_incidents, real_incidents
from opsctl.drills.scenario import Scenario, check_against_config, default_backend, resolve_slo
from opsctl.errors import ConfigError, OpsctlError

EXIT_PASSED, EXIT_FAILED, EXIT_REFUSED = 0, 1, 4


class Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Aborted(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class DrillResult:
    run_id: str
    outcome: str  # passed | failed | aborted | refused
    exit_code: int
    report: dict
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def failures(self) -> list[str]:
        out = [f"{v['name']}: {v['reason']}" for v in self.report.get("expectations", [])
               if not v["passed"] and v.get("result") != NOT_EVALUATED]
        if self.report.get("abort_reason"):
            out.insert(0, f"aborted: {self.report['abort_reason']}")
        if self.report.get("refusal"):
            out.insert(0, f"refused: {self.report['refusal']}")
        out.extend(f"left behind: {p}" for p in self.report.get("leftovers", []))
        return out


class Engine:
    def __init__(self, scenario: Scenario, user_cfg, *, live: bool = False,
                 progress: Callable[[str], None] | None = None):
        self.scenario = scenario
        self.user_cfg = user_cfg
        self.mode = "live" if live else "embedded"
        self.progress = progress or (lambda line: None)
        self.stop_reason: str | None = None
        self.late_signals: list[str] = []
        self.phase = "preflight"
        self.timeline: list[dict] = []
        self.obs = Observations()
        self.verdicts: dict[int, Verdict] = {}
        self.preflight_checks: list[Check] = []
        self.probe_results: list[dict] = []
        self.samples: list[dict] = []
        self.queue: list = []
        self._seq = itertools.count()
        self.env = None
        self.state = None
        self.page_key: str | None = None
        self.responders_started = False
        self.environment_facts: dict = {}
        self.crash: str | None = None
        self.rollback_results: list[dict] = []
        self.leftovers: list[str] = []
        self.refusal: str | None = None
        self.abort_reason: str | None = None
        self._last_firing: set = set()
        self._last_samples: dict = {}
        self._pending_page = False
        self._live_lock = None
        self.t_method: float | None = None

    # =============================================================================================
    # The run

    def run(self) -> DrillResult:
        from opsctl.drills.env.registry import open_environment
        from opsctl.drills.state import RunState

        wall_start = time.monotonic()
        slos = self._load_slos()
        problems = check_against_config(self.scenario, self.user_cfg, [s.name for s in slos],
                                        live=self.mode == "live")
        if problems:
            raise ConfigError(f"{self.scenario.path}: the scenario does not fit the config", problems=problems)
        self.slos = slos
        self.state = RunState.create(self.user_cfg.drills_path, scenario=self.scenario, mode=self.mode,
                                     config_path=self.user_cfg.source_path)
        self._keep_scenario_copy()
        self.env = open_environment(self.mode, self.user_cfg, self.scenario, self.state.run_id, self.state.dir)
        self.page_key = f"opsctl-drill-{self.user_cfg.service}-{self.state.run_id}"[:255]
        self._say("phase", f"drill {self.state.run_id}: {self.scenario.title} ({self.mode})")
        restore_signals = self._install_signal_handlers()
        try:
            try:
                self._preflight()
                self._steady_state()
                self._method()
            except Refused as exc:
                self.refusal = exc.reason
                self._say("refused", exc.reason)
            except Aborted as exc:
                self.abort_reason = exc.reason
                self._say("abort", exc.reason)
            except Exception as exc:  # a crash still rolls back and reports
                self.crash = traceback.format_exc()
                self.abort_reason = f"crashed: {getattr(exc, 'message', None) or f'{type(exc).__name__}: {exc}'}"
                self._say("abort", self.abort_reason)
            if self.refusal is None:
                self._judge_all(final=True)
            self._rollbacks()
        finally:
            try:
                result = self._finish(time.monotonic() - wall_start)
            finally:
                restore_signals()  # only now: a signal while the report is written must not cut it short
                self.env.close()
                self.state.release()
                if self._live_lock is not None:
                    self._live_lock.close()
        return result

    def _load_slos(self):
        from opsctl.slo.model import load_slos

        return load_slos([self.user_cfg.slo_dir], self.user_cfg.backends)

    def _keep_scenario_copy(self) -> None:
        """The scenario as run, next to its state: a cleanup rebuilds the environment from it."""
        try:
            shutil.copyfile(self.scenario.path, self.state.dir / "scenario.yaml")
        except OSError:
            pass

    # -- signals ------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum, frame):
            name = signal.Signals(signum).name
            if self.phase in ("rollbacks", "report"):
                self.late_signals.append(name)  # rollbacks always finish
                self.progress(f"{name} received: finishing the rollbacks first")
            elif self.stop_reason is None:
                self.stop_reason = f"interrupted by {name}"

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore():
            for s, h in previous.items():
                signal.signal(s, h)

        return restore

    def _should_stop(self) -> bool:
        return self.stop_reason is not None

    def _check_stop_requested(self) -> None:
        if self.stop_reason is not None:
            raise Aborted(self.stop_reason)

    # -- timeline -----------------------------------------------------------------------------

    def _now(self) -> float:
        return self.env.clock.now()

    def _say(self, kind: str, message: str) -> None:
        at = self._now() if self.env is not None else time.time()
        self.timeline.append({"at": at, "phase": self.phase, "kind": kind, "message": message})
        self.progress(self._line(at, kind, message))
        if self.state is not None:
            self.state.data["timeline"] = self.timeline
            if self.mode == "embedded" and self.env is not None:
                self.state.data["sim"] = {"start": self.env.start, "now": at}

    def _line(self, at: float, kind: str, message: str) -> str:
        clock = time.strftime("%H:%M:%S", time.gmtime(at))
        offset = "" if self.obs.t0 is None else f" {_offset(at - self.obs.t0)}"
        label = "sim" if self.mode == "embedded" else "live"
        return f"[{label} {clock}{offset}] {self.phase:<12} {kind:<10} {message}"

    def _audit(self, event: str, **fields) -> None:
        """The audit log is the record of everything that changed: drills included, marked as such."""
        from opsctl.drills.rollback import audit_drill

        audit_drill(self.env.cfg, self.state, event, self._now(), **fields)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        self.state.set_phase(phase)

    # =============================================================================================
    # Preflight and steady state

    def _preflight(self) -> None:
        self._set_phase("preflight")
        if self.mode == "live":
            self._take_live_lock()
        checks = [check_real_incidents(self.user_cfg),
                  check_real_alerts(self.user_cfg, strict=self.mode == "live")]
        if self.mode == "live":  # a live drill that died may have left a fault: clean it up first
            from opsctl.drills.cleanup import interrupted_runs
            from opsctl.drills.plan import interrupted_check

            checks.append(interrupted_check([r for r in interrupted_runs(self.user_cfg)
                                              if r.run_id != self.state.run_id]))
        self.preflight_checks.extend(checks)
        for c in checks:
            self._say("check", f"{c.status}: {c.name}: {c.message}")
        failed = [c for c in checks if not c.ok]
        if failed:
            raise Refused("; ".join(f"{c.name}: {c.message}" for c in failed))
        self.environment_facts = self.env.prepare(lambda line: self._say("setup", line))
        self._check_stop_requested()
        stored = self.env.controller().read()
        if stored.split is None:
            raise Refused(f"the current split is unknown ({stored.note}): set traffic.default_split or the split")
        self.state.data["split"]["original"] = stored.split.to_dict(list(self.env.cfg.backends))
        self.state.save()
        self._audit("drill-started", scenario=self.scenario.title, file=self.scenario.path, mode=self.mode)

    def _take_live_lock(self) -> None:
        """One live drill at a time per state dir: two would fight over the same split and pages."""
        import fcntl

        path = self.user_cfg.drills_path / "live.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise Refused("another live drill is running from this state dir") from None
        self._live_lock = handle

    def _steady_state(self) -> None:
        from opsctl.drills.measure import BurnMeter
        from opsctl.slo.alerts import AlertEvaluator
        from opsctl.slo.rules import RuleSettings, plan_rules

        self._set_phase("steady-state")
        source = self.env.source()
        self.settings = RuleSettings.from_config(self.env.cfg)
        self.plans = plan_rules(self.slos, self.settings)
        self.evaluator = AlertEvaluator(self.plans, source, self.settings) if self.mode == "embedded" else None
        from opsctl.quality.rules import plan_quality  # the live quality rules run beside the burn-rate alerts

        self.quality_plan, self._quality = plan_quality(self.env.cfg), None
        now = self._now()
        deviations = []
        for probe in self.scenario.probes:
            ok, observed = self._probe(probe, now)
            self.probe_results.append({"name": probe.name, "probe": probe.probe, "tolerance": _plain(probe.tolerance),
                                       "observed": observed, "ok": ok})
            self._say("probe", f"{'ok' if ok else 'DEVIATES'}: {probe.name}: {observed}")
            if not ok:
                deviations.append(f"{probe.name}: {observed}")
        if deviations:
            raise Refused("steady state not met: " + "; ".join(deviations))
        tracked = self._tracked_slos()
        self.meter = BurnMeter(source, [s for s in self.slos if s.name in tracked], self.user_cfg.slos.period_seconds)
        self.meter.measure_period(now, history_seconds=self.scenario.embedded.baseline if self.mode == "embedded" else None)

    def _slo_name(self, name: str) -> str:
        return resolve_slo(name, [s.name for s in self.slos], self.user_cfg.service) or name

    def _probe(self, probe, now: float) -> tuple[bool, str]:
        if probe.probe == "slo-status":
            from opsctl.slo.report import build_report

            wanted = [self._slo_name(n) for n in probe.slos]
            slos = [s for s in self.slos if (not wanted or s.name in wanted)
                    and (probe.backend is None or s.backend == probe.backend)]
            results = build_report(slos, self.env.source(), now, self.user_cfg.slos.period_seconds, cross_check=False)
            bad = [f"{r.slo.name} is {r.status.level}" for r in results if r.status.level not in probe.tolerance]
            if bad:
                return False, "; ".join(bad)
            return True, f"{len(results)} SLO(s) {'/'.join(probe.tolerance)}"
        if probe.probe == "alerts-firing":
            firing = [a for a in self._evaluate_alerts(now).firing if probe.severity in (None, a.severity)]
            names = ", ".join(f"{a.slo} {a.long_window}/{a.short_window}" for a in firing[:3])
            return len(firing) <= probe.tolerance, f"{len(firing)} firing" + (f": {names}" if names else "")
        if probe.probe == "traffic-split":
            from opsctl.traffic.split import Split

            order = list(self.env.cfg.backends)
            expected = Split.of(probe.tolerance if probe.tolerance is not None else self.env.cfg.traffic.default_split)
            current = self.env.controller().read().split
            shown = current.describe(order) if current else "unknown"
            return current is not None and current.weights == expected.weights, f"split {shown}"
        if probe.probe == "freeze-active":
            from opsctl.freeze import FreezeCalendar

            active = FreezeCalendar(self.env.cfg.freezes).active(now)
            names = ", ".join(s.name for s in active) or "none"
            return bool(active) == probe.tolerance, f"freezes in force: {names}"
        raise OpsctlError(f"unknown probe {probe.probe!r}")

    def _evaluate_alerts(self, at: float):
        from opsctl.slo.alerts import AlertEvaluator

        # Embedded: the past never changes, so one evaluator remembers every instant it computed.
        # Live: late samples may still arrive, so each tick evaluates afresh.
        evaluator = self.evaluator or AlertEvaluator(self.plans, self.env.source(), self.settings)
        return evaluator.evaluate(at)

    def _evaluate_quality(self, at: float) -> list:
        if self.quality_plan is None:
            return []
        from opsctl.quality.live import QualityEvaluator

        if self._quality is None or self.mode != "embedded":  # embedded: the past never changes
            self._quality = QualityEvaluator(self.quality_plan, self.env.source())
        return self._quality.evaluate(at).firing

    def _tracked_slos(self) -> set[str]:
        """SLOs measured every tick: the ones the scenario names, and those of the faulted backends."""
        names = set()
        for e in self.scenario.expectations:
            if e.slo:
                names.add(self._slo_name(e.slo))
        for s in self.scenario.stop_conditions:
            if s.slo:
                names.add(self._slo_name(s.slo))
        faulted = {f.backend or default_backend(f.kind, self.user_cfg) for f in self.scenario.faults}
        for slo in self.slos:
            if slo.backend in faulted or (faulted and slo.backend == "all"):
                names.add(slo.name)
        return names

    # =============================================================================================
    # Method

    def _method(self) -> None:
        self._set_phase("method")
        now = self._now()
        self.t_method = now
        self.state.data["method_started"] = now
        self.deadline = now + self.scenario.max_duration
        if not self.scenario.faults:  # no fault: deadlines count from the method's start
            self.obs.t0 = now
            self.state.data["t0"] = now
        steps = self.scenario.method
        self._schedule(now + steps[0].pause_before, f"method[0] {steps[0].name}", lambda: self._run_step(0))
        next_tick = now
        while True:
            self._check_stop_requested()
            if self._settled():
                self._say("settled", "every expectation is decided")
                break
            upcoming = self.queue[0][0] if self.queue else float("inf")
            at = min(next_tick, upcoming)
            if at > self.deadline:
                self.env.advance(self.deadline, self._should_stop)
                self._check_stop_requested()
                if not self.obs.method_done:
                    raise Aborted(f"max-duration {duration_text(self.scenario.max_duration)} reached before the method finished")
                self._say("deadline", f"max-duration {duration_text(self.scenario.max_duration)} reached")
                break
            self.env.advance(at, self._should_stop)
            self._check_stop_requested()
            while self.queue and self.queue[0][0] <= at:
                _, _, label, action = heapq.heappop(self.queue)
                action()
                self._check_stop_requested()
            if at >= next_tick:
                self._tick()
                next_tick = at + self.env.tick

    def _schedule(self, at: float, label: str, action: Callable[[], None]) -> None:
        heapq.heappush(self.queue, (at, next(self._seq), label, action))

    def _settled(self) -> bool:
        if not self.obs.method_done:
            return False
        return len(self.verdicts) == len(self.scenario.expectations)

    def _run_step(self, index: int) -> None:
        step = self.scenario.method[index]
        wait = 0
        try:
            if step.action == "inject-fault":
                self._inject(step)
            elif step.action == "wait":
                self._say("wait", f"{step.name}: {duration_text(step.duration)}")
                wait = step.duration
            elif step.action == "file-ticket":
                self._file_ticket(step, by="method")
            elif step.action == "page":
                self._page(step.summary or f"{self.scenario.title}", [])
            elif step.action == "traffic-set":
                self._traffic_set(step)
            elif step.action == "failover":
                self._failover(step.backend, f"method: {step.name}")
        except OpsctlError as exc:
            raise Aborted(f"method step {index} ({step.name}) failed: {exc.message}") from exc
        after = self._now() + wait + step.pause_after
        if index + 1 < len(self.scenario.method):
            nxt = self.scenario.method[index + 1]
            self._schedule(after + nxt.pause_before, f"method[{index + 1}] {nxt.name}", lambda: self._run_step(index + 1))
        else:
            self._schedule(after, "method done", self._method_done)

    def _method_done(self) -> None:
        self.obs.method_done = True
        self._say("method", "every method action ran")

    # -- actions --------------------------------------------------------------------------------

    def _inject(self, step) -> None:
        from opsctl.drills.faults.registry import injector_for_fault

        fault = step.fault
        backend = fault.backend or default_backend(fault.kind, self.env.cfg)
        name = injector_for_fault(fault, live=self.mode == "live")
        injector = self.env.injector(name)
        now = self._now()
        record = injector.prepare(fault, backend, now)
        record.update(id=f"f{len(self.state.data['faults']) + 1}", name=step.name, removed_at=None)
        self.state.data["faults"].append(record)
        self.state.save()  # before anything changes: a crash from here on can be cleaned up
        what = injector.apply(record)
        record["applied_at"] = now
        self.state.save()
        self._audit("fault-injected", fault=fault.kind, backend=backend, params=dict(fault.params), target=what)
        if self.obs.t0 is None:
            self.obs.t0 = now
            self.state.data["t0"] = now
        self._say("fault", f"{step.name}: {what}")
        self._schedule(record["end"], f"fault {record['id']} ends", lambda: self._fault_ends(record))

    def _fault_ends(self, record: dict) -> None:
        if record.get("removed_at") is not None:
            return
        message = self.env.injector(record["injector"]).remove(record, self._now())
        record["removed_at"] = self._now()
        record["removal"] = message
        self.state.save()
        self._audit("fault-removed", fault=record["kind"], backend=record["backend"], target=message)
        self._say("fault", f"{record['name']} ended after its duration: {message}")

    def _page(self, summary: str, alerts: list) -> None:
        from opsctl.paging.base import PageEvent

        pager = self.env.pager()
        component = alerts[0].backend if alerts else None
        event = PageEvent(
            summary=summary[:1000], source="opsctl drill", severity=self.scenario.paging.severity,
            dedup_key=self.page_key, component=component,
            custom_details={"drill_run": self.state.run_id, "scenario": self.scenario.title,
                            "alerts": [f"{a.alertname} {a.slo} {a.long_window}/{a.short_window}" for a in alerts]},
            drill=True,
        )
        if not any(p["dedup_key"] == self.page_key for p in self.state.data["pages"]):
            self.state.data["pages"].append({"dedup_key": self.page_key, "at": self._now(), "resolved": False})
            self.state.save()
        try:
            result = pager.trigger(event)
            incident = pager.get_incident(result.dedup_key)
        except OpsctlError as exc:
            self.obs.page_error = exc.message
            self._say("page", f"FAILED: {exc.message}")
            return
        if self.obs.paged_at is None:
            self.obs.paged_at = incident.created_at
            self.obs.page_title = incident.title
        self._say("page", f"paged on-call via {pager.name}: incident {incident.id} {incident.title!r}")
        self._start_responders()

    def _start_responders(self) -> None:
        if self.responders_started or not self.scenario.on_call.simulated:
            return
        self.responders_started = True
        oc = self.scenario.on_call
        now = self._now()
        if oc.acknowledge_after is not None:
            self._schedule(now + oc.acknowledge_after, "primary acknowledges", lambda: self._acknowledge(oc.name))
        if oc.escalate_after is not None:
            self._schedule(now + oc.escalate_after, "escalation", self._escalate)

    def _acknowledge(self, who: str) -> None:
        if self.obs.acknowledged_at is not None:
            return
        pager = self.env.pager()
        kwargs = {"by": who} if pager.name == "local" else {}
        try:
            pager.acknowledge(self.page_key, **kwargs)
        except OpsctlError as exc:
            self._say("ack", f"FAILED ({who}): {exc.message}")
            return
        self._observe_pager()
        self._say("ack", f"{who} acknowledged the page")
        now = self._now()
        for i, action in enumerate(self.scenario.on_call.actions):
            self._schedule(now + action.after, f"on-call action {i} {action.action}",
                           lambda a=action: self._responder_action(a, who))

    def _escalate(self) -> None:
        if self.obs.acknowledged_at is not None:
            return
        pager = self.env.pager()
        escalate = getattr(pager, "escalate", None)
        if escalate is not None:
            try:
                escalate(self.page_key)
            except OpsctlError as exc:
                self._say("escalate", f"FAILED: {exc.message}")
                return
            self._say("escalate", f"not acknowledged after {duration_text(self.scenario.on_call.escalate_after)}:"
                                  " escalated to the next on-call level")
        else:
            self._say("escalate", f"{pager.name} escalates by its own policy; the secondary is simulated")
        after = self.scenario.on_call.secondary_acknowledge_after
        if after is not None:
            name = self.scenario.on_call.secondary_name
            self._schedule(self._now() + after, "secondary acknowledges", lambda: self._acknowledge(name))

    def _responder_action(self, action, who: str) -> None:
        if action.action == "failover":
            self._failover(action.backend, f"{who} fails over")
        elif action.action == "file-ticket":
            self._file_ticket(action, by=who)

    def _failover(self, source: str, why: str) -> None:
        try:
            result = self.env.traffic().failover(source, self.state.incident, reason=f"[DRILL {self.state.run_id}] {why}")
        except OpsctlError as exc:
            self.obs.failover_errors.append((self._now(), exc.message))
            self._say("failover", f"FAILED: {exc.message}")
            return
        order = list(self.env.cfg.backends)
        self.state.data["split"]["written"] = result.after.to_dict(order)
        self.state.save()
        self.env.split_changed(result.after)
        short = f" (short: {result.shortfall})" if result.shortfall else ""
        overrides = f" overriding {', '.join(result.overrides)}" if result.overrides else ""
        self._say("failover", f"{result.outcome}: {result.before.describe(order)} -> {result.after.describe(order)}"
                              f"{overrides}{short}")

    def _traffic_set(self, step) -> None:
        from opsctl.traffic.controller import ChangeRequest
        from opsctl.traffic.split import Split

        ctl = self.env.controller()
        order = list(self.env.cfg.backends)
        weights = dict(step.weights)

        def plan(before):
            return Split.of(weights, dict(before.shadow) if before else {})

        request = ChangeRequest("set", plan, reason=f"[DRILL {self.state.run_id}] {step.name}",
                                incident=self.state.incident if step.emergency else None, emergency=step.emergency)
        try:
            result = ctl.apply(request)
        except OpsctlError as exc:
            self._say("traffic", f"set {Split.of(weights).describe(order)}: {exc.message}")
            return
        self.state.data["split"]["written"] = result.after.to_dict(order)
        self.state.save()
        self.env.split_changed(result.after)
        self._say("traffic", f"set: {result.outcome}: {result.after.describe(order)}")

    def _file_ticket(self, step, by: str) -> None:
        from opsctl.tickets.base import TicketRequest

        seen = TicketSeen(vendor=step.vendor, category=step.category, asked_at=self._now())
        self.obs.tickets.append(seen)
        desk = self.env.tickets(step.vendor)
        body = (f"{step.body}\n\n" if step.body else "") + (
            f"Game-day drill {self.state.run_id}: {self.scenario.title}.\n"
            f"Filed by {by}. No action is needed beyond routing and acknowledging this ticket.")
        try:
            request = TicketRequest(vendor=step.vendor, category=step.category, severity=step.severity or "Sev2",
                                    subject=step.subject or self.scenario.title, body=body, drill=True,
                                    idempotency_key=f"drill-{self.state.run_id}-{len(self.obs.tickets)}")
            filed = desk.file(request)
        except OpsctlError as exc:
            seen.error = exc.message
            self._say("ticket", f"FAILED to file with {step.vendor}: {exc.message}")
            return
        vendor_cfg = self.env.cfg.tickets.vendor(step.vendor)
        seen.ticket_id, seen.filed_at = filed.id, filed.filed_at
        seen.routed_value = vendor_cfg.categories.get(filed.category)
        seen.routed_category = filed.category if seen.routed_value is not None else None
        seen.tags = self._ticket_tags(step.vendor, filed)
        self.state.data["tickets"].append({"id": filed.id, "vendor": step.vendor, "key": filed.key,
                                           "provider": filed.provider, "filed_at": filed.filed_at})
        self.state.save()
        self._observe_ticket(seen)
        self._say("ticket", f"{by} filed {filed.id} with {step.vendor} via {filed.provider}:"
                            f" {filed.subject!r} in {seen.routed_value!r} ({filed.severity})")
        ledger = self.env.vendor_ledger(step.vendor)
        vendor = self.scenario.vendor
        if vendor.simulated and vendor.respond_after is not None and ledger is not None:
            self._schedule(self._now() + vendor.respond_after, "vendor responds",
                           lambda: self._vendor_responds(ledger, seen))

    def _ticket_tags(self, vendor: str, filed) -> tuple[str, ...]:
        ledger = self.env.vendor_ledger(vendor)
        if ledger is not None:
            for record in ledger.tickets():
                if record["id"] == filed.id:
                    return tuple(record.get("tags") or ())
        return ("drill",) if filed.drill else ()

    def _vendor_responds(self, ledger, seen: TicketSeen) -> None:
        vendor = self.scenario.vendor
        ledger.respond(seen.ticket_id, assignee=vendor.assignee, status="open", category=vendor.route_to)
        moved = f", moved to {vendor.route_to}" if vendor.route_to else ""
        self._say("vendor", f"{seen.vendor} responded to {seen.ticket_id} ({vendor.assignee}{moved})")
        self._observe_ticket(seen)

    # -- every tick -------------------------------------------------------------------------------

    def _tick(self) -> None:
        now = self._now()
        evaluation = self._evaluate_alerts(now)
        quality = self._evaluate_quality(now)
        firing = {(a.slo, a.severity, f"{a.long_window}/{a.short_window}"): a for a in evaluation.firing + quality}
        for key, alert in firing.items():
            if key not in self.obs.first_firing:
                self.obs.first_firing[key] = (now, alert)
            if key not in self._last_firing:
                self._say("alert", f"FIRING {alert.describe()}" if hasattr(alert, "describe") else
                          f"FIRING {alert.alertname} {alert.slo} {key[2]}: burn {alert.burn_rate:.1f}x > {alert.factor:g}x")
        for key in self._last_firing - set(firing):
            self._say("alert", f"resolved {key[1]} {key[0]} {key[2]}")
        self._last_firing = set(firing)
        pages = [a for a in evaluation.firing if a.severity == "page"] or [a for a in quality if a.severity == "page"]
        if pages and self.obs.t0 is not None and not self.state.data["pages"] and not self._page_pending():
            worst = max(pages, key=lambda a: a.burn_rate)
            summary = f"{worst.slo} burning its error budget at {worst.burn_rate:.0f}x ({worst.long_window}/{worst.short_window})"
            if worst in quality:  # a quality page says so: nothing is failing
                summary = worst.annotations["summary"]
            self._schedule(now + self.scenario.paging.group_wait, "page", lambda: self._page(summary, pages))
            self._pending_page = True
        self._measure(now)
        self._observe_pager()
        self._observe_audit()
        for seen in self.obs.tickets:
            self._observe_ticket(seen)
        self._check_stop_conditions(evaluation)
        self._judge_all(final=False)

    def _page_pending(self) -> bool:
        return self._pending_page

    def _measure(self, now: float) -> None:
        windows = {300, 3600} | {e.window for e in self.scenario.expectations if e.expect == "slo-recovered"}
        samples = self.meter.sample(now, sorted(windows), self.t_method)
        row = {"at": now, "slos": {}}
        for name, s in samples.items():
            row["slos"][name] = {"burn_5m": s.burn.get(300), "burn_1h": s.burn.get(3600),
                                 "spent": self.meter.spent(name, s)}
            for w, burn in s.burn.items():
                self.obs.window_burn[(name, w)] = burn
        self.samples.append(row)
        self._last_samples = samples
        if self.obs.t0 is None:
            return
        for e in self.scenario.expectations:
            if e.expect != "slo-recovered":
                continue
            slo = self._slo_name(e.slo)
            burn = self.obs.window_burn.get((slo, e.window))
            # Recovered: errors back within budget over the window (the burn-rate alerts lag behind:
            # a 6h/30m page keeps firing for half an hour after the errors stop).
            if burn is not None and burn > 1.0:
                self.obs.burning_since.setdefault(slo, now)
            elif slo in self.obs.burning_since and slo not in self.obs.recovered_at and burn is not None:
                self.obs.recovered_at[slo] = now
                self._say("recovered", f"{slo}: burn {burn:.2f}x over the last {duration_text(e.window)}")

    def _observe_pager(self) -> None:
        if not self.state.data["pages"]:
            return
        try:
            incident = self.env.pager().get_incident(self.page_key)
        except OpsctlError:
            return
        if self.obs.paged_at is None:
            self.obs.paged_at = incident.created_at
            self.obs.page_title = incident.title  # what on-call read
        if self.obs.acknowledged_at is None and incident.acknowledged_at is not None:
            self.obs.acknowledged_at = incident.acknowledged_at
            acked = [r for r in incident.responders if r.acknowledged_at is not None]
            self.obs.acknowledged_by = acked[0].name if acked else None
            if not self.scenario.on_call.simulated:
                self._say("ack", f"{self.obs.acknowledged_by or 'on-call'} acknowledged the page")
        if self.obs.escalated_at is None and incident.escalated_at:
            self.obs.escalated_at = incident.escalated_at[0]

    def _observe_audit(self) -> None:
        from opsctl.audit import AuditLog

        since = self.t_method
        entries = AuditLog(self.env.cfg.audit_path).find(
            lambda e: e.get("kind") == "traffic" and not e.get("dry_run") and e.get("ts", 0) >= since
            and (self.mode == "embedded" or e.get("drill_run") == self.state.run_id
                 or (not self.scenario.on_call.simulated and e.get("action") == "failover")),
            since=since)
        entries.reverse()
        self.obs.failovers = [e for e in entries if e.get("action") == "failover" and e.get("outcome") == "applied"]
        self.obs.changes = [e for e in entries if e.get("action") == "set"]

    def _observe_ticket(self, seen: TicketSeen) -> None:
        if seen.ticket_id is None:
            return
        try:
            status = self.env.tickets(seen.vendor).status(seen.ticket_id)
        except OpsctlError:
            return
        if not status.readable:
            return
        seen.status_value = status.category_value
        seen.status_category = status.category
        if status.first_response_at is not None and seen.first_response_at is None:
            seen.first_response_at = status.first_response_at

    # -- stop conditions ------------------------------------------------------------------------

    def _check_stop_conditions(self, evaluation) -> None:
        for cond in self.scenario.stop_conditions:
            hit = self._stop_hit(cond, evaluation)
            if hit:
                raise Aborted(f"stop condition {cond.name!r}: {hit}")

    def _stop_hit(self, cond, evaluation) -> str | None:
        if cond.condition == "real-incident-open":
            try:
                found = real_incidents(self.user_cfg)
            except OpsctlError as exc:
                return f"cannot tell whether a real incident is open: {exc.message}"
            if found:
                return f"real incident {found[0].id} {found[0].title!r} is {found[0].status}"
            return None
        if cond.condition == "alert-firing":
            slo = self._slo_name(cond.slo) if cond.slo else None
            for a in evaluation.firing:
                if a.severity == cond.severity and (slo is None or a.slo == slo) and (
                        cond.backend is None or a.backend == cond.backend):
                    return f"{a.alertname} {a.slo} {a.long_window}/{a.short_window} is firing"
            return None
        slo = self._slo_name(cond.slo)
        if cond.condition == "budget-spent":
            sample = self._last_samples.get(slo)
            spent = self.meter.spent(slo, sample) if sample else None
            if spent is not None and spent > cond.above:
                return f"{slo} spent {spent:.0%} of its period error budget during the drill (limit {cond.above:.0%})"
            return None
        if cond.condition == "budget-remaining":
            from opsctl.slo.report import build_report

            [result] = build_report([s for s in self.slos if s.name == slo], self.env.source(), self._now(),
                                    self.user_cfg.slos.period_seconds, cross_check=False)
            left = result.error_budget_remaining
            if left is not None and left < cond.below:
                return f"{slo} has {left:.0%} of its error budget left (limit {cond.below:.0%})"
            return None
        return None

    # -- expectations ---------------------------------------------------------------------------

    def _judge_all(self, *, final: bool) -> None:
        judge = Judge(self._slo_name)
        now = self._now()
        for i, e in enumerate(self.scenario.expectations):
            if i in self.verdicts:
                continue
            stopped = final and (self.abort_reason or self.crash)
            # A stopped drill judges only what was decided before it stopped (met, observed wrong,
            # or past its deadline); the rest was never evaluated, which is not a failure.
            verdict = judge.judge(e, self.obs, now, final=final and not stopped)
            if verdict is None and stopped:
                when = "before the method began" if self.obs.t0 is None else "before this was decided"
                verdict = Verdict(e.name, e.expect, False, e.within, None, None, "",
                                  f"not evaluated: the drill stopped {when} ({self.abort_reason})", evaluated=False)
            if verdict is None:
                continue
            self.verdicts[i] = verdict
            self._say("expect", f"{verdict.mark} {e.name}: " + (verdict.detail if verdict.passed else verdict.reason))

    # =============================================================================================
    # Rollbacks and the report

    def _rollbacks(self) -> None:
        from opsctl.drills.rollback import Rollbacks

        self._set_phase("rollbacks")
        rollbacks = Rollbacks(self.env, self.state, self._say)
        actions = list(self.scenario.rollbacks)
        for required in ("remove-faults", "restore-traffic", "resolve-pages"):
            if required not in actions:  # validation asks for them when needed; never leave anything behind
                actions.append(required)
        self.rollback_results = rollbacks.run(actions)
        self.leftovers = rollbacks.leftovers()
        for problem in self.leftovers:
            self._say("leftover", problem)
        if not self.leftovers:
            self._say("verify", "nothing left behind: no fault, split as before, no open drill page")

    def _finish(self, wall_seconds: float) -> DrillResult:
        from opsctl.drills.report import build_report_data, write_reports

        self._set_phase("report")
        if self.refusal:
            outcome, code = "refused", EXIT_REFUSED
        elif self.abort_reason:
            outcome, code = "aborted", EXIT_FAILED
        elif any(not v.passed for v in self.verdicts.values()) or self.leftovers or any(
                r["status"] == "failed" for r in self.rollback_results):
            outcome, code = "failed", EXIT_FAILED
        else:
            outcome, code = "passed", EXIT_PASSED
        self.state.data.update(outcome=outcome, abort_reason=self.abort_reason or self.refusal,
                               finished_at=time.time())
        data = build_report_data(self, outcome, code, wall_seconds)
        paths = write_reports(self.state.dir, data)
        if self.refusal is None:
            self._audit("drill-finished", outcome=outcome, abort_reason=self.abort_reason, report=str(paths["md"]))
        self.state.data["report"] = {k: str(v) for k, v in paths.items()}
        self.state.data["phase"] = "done"
        self.state.save()
        return DrillResult(self.state.run_id, outcome, code, data, {k: str(v) for k, v in paths.items()})


def _offset(seconds: float) -> str:
    seconds = int(round(seconds))
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h}h{m:02d}m{s:02d}s" if h else f"{sign}{m}m{s:02d}s"


def _plain(value):
    if isinstance(value, tuple):
        return list(value)
    return value

