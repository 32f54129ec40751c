"""A chain drill's steady state and method: Prometheus scrapes and the rules evaluate, then the
faults switch on and every second each component is asked what happened (hops.py, collector.py),
the simulated on-call acknowledging the page."""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any

from opsctl.drills.chain.analysis import ChainAnalysis
from opsctl.drills.chain.progress import ACK_CAP, DEFAULT_TIMEOUT, PAUSE_CAP, POLL, SETTLE_GRACE, STEADY_TIMEOUT, _Stop
from opsctl.drills.text import params_text
from opsctl.errors import ConfigError, OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.chain.collector import Collector
    from opsctl.drills.chain.hops import Targets
    from opsctl.tickets.base import TicketProvider


class ChainPolling(ChainAnalysis):
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
        """The method's steps up to the first fault with their pauses capped (nothing is faulted yet:
        PAUSE_CAP, each cut listed with the shortened timings); from the first fault on, every step at
        its own time after it, the pauses and waits whole, so the faults keep the scenario's order and
        phase (decisions/0350): the later steps are the polling loop's, which polls every component
        in between. Then the loop runs on until every required hop happened and every fault's
        predicted page had its chance, or the deadline."""
        from opsctl.automation.policy import CompiledPolicy
        from opsctl.drills.chain.hops import Targets
        from opsctl.drills.chain.readings import recorded_service_matcher

        self._set_phase("method")
        # the prediction reads the split the scenario starts from, not the one after the method's
        # pauses, by when serve may have failed over already (decisions/0313)
        self.split_at_start = self._split()
        self.method_started = time.time()
        steps = list(enumerate(self.scenario.method))
        first: dict | None = None
        first_index = 0
        while steps and first is None:
            first_index, step = steps.pop(0)
            i = first_index
            self._check_stop()
            pause = step.pause_before if self.mode == "live-chain" else min(step.pause_before, PAUSE_CAP)
            if pause != step.pause_before:
                self.shortened.add(f"method[{i}].pauses.before", f"{step.pause_before}s", f"{pause}s",
                                   "before the first fault nothing is faulted: the pause only waits")
            if pause:
                self._sleep(pause)
            first = self._run_step(i, step)
            if first is None and step.action == "wait":
                wait = step.duration if self.mode == "live-chain" else min(step.duration, PAUSE_CAP)
                self.shortened.add(f"method[{i}].duration", f"{step.duration}s", f"{wait}s",
                                   "before the first fault nothing is faulted: the wait only waits")
                self._sleep(wait)
        if first is None:  # _chain_problems refuses a scenario without a fault
            raise RuntimeError("the chain drill injected no fault")
        t0 = first["on_at"]
        schedule = later_steps(self.scenario, first_index, steps, t0)
        expect = {e.expect: e for e in self.scenario.expectations}
        ticket = expect.get("vendor-ticket")
        backends = self._fault_backends()
        vendors = [b for b in backends if self.cfg.backends[b].kind == "vendor"]
        ticket_vendor = ticket.vendor if ticket else (self.cfg.backends[vendors[0]].vendor if vendors
                                                      else self.cfg.backends[first["backend"]].vendor)
        targets = Targets(
            prometheus=self.urls["prometheus"], alertmanager=self.urls["alertmanager"], serve=self.urls["serve"],
            serve_log=self.dir / "serve.log", backend=first["backend"], backends=backends,
            expect_failover="failover-applied" in expect,
            ticket_vendor=ticket_vendor,
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
            from opsctl.drills.prediction import CHAIN_MARGIN, derived_timeout

            self.timeout, why = derived_timeout(self.prediction, DEFAULT_TIMEOUT)
            last = max((at - t0 for at, _i, _s in schedule), default=0.0)
            if last + CHAIN_MARGIN > self.timeout:  # every step runs, and its consequences have the margin
                self.timeout, why = int(math.ceil(last + CHAIN_MARGIN)), \
                    f"the method's last step {last:g}s after the first fault + margin {CHAIN_MARGIN}s"
            self._say("deadline", f"every hop within {self.timeout}s of the fault ({why})")
        deadline = t0 + self.timeout
        # not settled before each fault's predicted page (+ a poll and the routes' wait): what a later
        # fault does is seen too, not only the first fault's hops
        pages = [p for p in self.fault_pages if p is not None]
        quiet_until = t0 + max(pages, default=0.0) + SETTLE_GRACE
        from opsctl.drills import method

        stepper = HopPolling(self, collector, ack_after, oc.name, deadline, schedule=schedule, quiet_until=quiet_until)
        if method.run(stepper, deadline, max_steps=2 * int(self.timeout / POLL) + 100 + 2 * len(schedule)) \
                == method.SETTLED:
            self._say("settled", "every required hop happened" if not collector.broken() else
                      "every required hop happened or can no longer happen")
            self._watch_no_flap(collector)
        else:
            self._say("deadline", f"{self.timeout}s after the fault: not every hop happened")
        for _at, index, step in stepper.schedule:  # past the deadline: said, not run
            self._say("skipped", f"method[{index}] {step.name}: the deadline came first")
        self._attribute()
        self._measure_budget(t0)

    def _watch_no_flap(self, collector: Collector) -> None:
        """After the hops settled, keep watching the traffic until every no-flap expectation's
        window after the last move off its backend has passed (observed.flap_watch_until), a move
        back has failed it, or the scenario's max-duration since the method began: its verdict is
        then judged on the whole window, not "not judged here" (decisions/0356)."""
        from opsctl.drills.chain.observed import flap_watch_until, observations
        from opsctl.drills.text import duration_text

        limit = (self.method_started or time.time()) + self.scenario.max_duration
        said: float | None = None
        while True:
            self._check_stop()
            collector.poll()
            until = flap_watch_until(self.scenario, observations(collector, self.t0, self.method_started).moves)
            now = time.time()
            if until is None or now >= until:
                if said is not None:
                    self._say("watched", "no-flap: the whole window watched" if until is not None else
                              "no-flap: traffic moved back within the window")
                return
            if now >= limit:
                self._say("watched", f"no-flap: the scenario's max-duration {duration_text(self.scenario.max_duration)}"
                                     " came before the end of the window")
                return
            if said != until:
                said = until
                self._say("watch", f"no-flap: watching the traffic until {_clock(until)} ({duration_text(until - now)}"
                                   " more: the window after the last move off the backend)")
            self._sleep(min(WATCH_POLL, until - now, limit - now))

    def _run_step(self, index: int, step) -> dict | None:
        """One method step now: a fault switched on (its record), or a step the chain does itself."""
        from opsctl.drills.chain.faults import broken_hop
        from opsctl.drills.scenario import default_backend

        if step.action != "inject-fault":
            if step.action != "wait":
                self._say("skipped", f"{step.name}: {step.action} is done by the chain itself in a chain drill")
            return None
        fault = step.fault
        backend = fault.backend or default_backend(fault.kind, self.cfg)
        if backend is None:  # check_against_config names it first
            raise ConfigError(f"{self.scenario.path}: {step.name}: no backend to inject {fault.kind} into")
        record = self._fault_on(f"f{len(self.fault_records) + 1}", fault, backend)
        record.update(name=step.name, hop=broken_hop(fault.kind), duration=fault.duration)
        self.fault_records = [*self.fault_records, record]
        if self.t0 is None:
            self.t0 = record["on_at"]
            self.state.data["t0"] = self.t0
        self._say("fault", f"{step.name}: {fault.kind} on {backend} ({params_text(fault.params)}; breaks the hop:"
                           f" {record['hop']})", at=record["on_at"])
        return record

    def _fault_backends(self) -> tuple[str, ...]:
        """Every fault's backend, in the method's order, each once."""
        from opsctl.drills.scenario import default_backend

        out: list[str] = []
        for fault in self.scenario.faults:
            backend = fault.backend or default_backend(fault.kind, self.cfg)
            if backend is not None and backend in self.cfg.backends and backend not in out:
                out.append(backend)
        return tuple(out)

    def _fault_on(self, fault_id: str, fault, backend: str) -> dict:
        record = self.exporter.fault_on(fault_id, fault.kind, backend, fault.params, duration=fault.duration,
                                        waves=fault.waves)
        self.state.data["faults"].append({**record, "injector": "chain-exporter", "removed_at": None,
                                          "start": record["on_at"], "end": record["on_at"] + fault.duration})
        self.state.save()
        return record

    def _make_collector(self, targets: Targets) -> Collector:
        from opsctl.audit import AuditLog
        from opsctl.drills.chain.collector import Collector

        return Collector(targets, self.sink, self._desk, AuditLog(self.cfg.audit_path),
                         lambda at, kind, message: self._say(kind, message, at=at))

    def _stop_conditions(self) -> None:
        """A local chain touches nothing real: its only stop is Ctrl-C (checked every poll)."""

    def _desk(self, vendor: str):
        if not hasattr(self, "_desks"):
            self._desks: dict[str, TicketProvider] = {}
        if vendor not in self._desks:
            from opsctl.tickets.registry import open_ticket_provider

            self._desks[vendor] = open_ticket_provider(self.cfg, vendor)
        return self._desks[vendor]



class HopPolling:
    """The chain's Stepper for the method loop (method.py): on the wall clock, every POLL seconds
    (and once more at the deadline), ask each component what happened (collector.Collector.poll), then
    acknowledge as the simulated on-call once the page is `ack_after` old (polling again at once),
    then the stop conditions. Settled once every required hop happened or is known never to (a
    delivery no policy matched: the hops after it cannot happen)."""

    def __init__(self, drill: ChainPolling, collector: Collector, ack_after: float | None, who: str, deadline: float,
                 *, schedule: list[tuple[float, int, Any]] | None = None, quiet_until: float = 0.0):
        self.drill = drill
        self.collector = collector
        self.ack_after = ack_after
        self.who = who
        self.deadline = deadline
        self.schedule = list(schedule or [])  # (wall-clock instant, index, step): the method's later steps
        self.quiet_until = quiet_until  # not settled before (every fault's predicted page had its chance)
        self._poll_now = True  # the first poll, and the one right after an acknowledgement

    def check_stop(self) -> None:
        self.drill._check_stop()

    def settled(self) -> bool:
        return not self.schedule and time.time() >= self.quiet_until and self.collector.settled()

    def next_at(self) -> float:
        now = time.time()
        if self._poll_now:
            return now
        due = [max(now, at) for at, _i, _s in self.schedule[:1]]  # the next step, if sooner than the poll
        return min([now + POLL, max(now, self.deadline), *due])

    def advance(self, until: float) -> None:
        wait = until - time.time()
        if wait > 0:
            self.drill._sleep(wait)
        while self.schedule and self.schedule[0][0] <= time.time():  # the steps due by now, in order
            _at, index, step = self.schedule.pop(0)
            self.drill._run_step(index, step)
            self._poll_now = True

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


WATCH_POLL = 5.0  # seconds between looks at the traffic while a no-flap window is watched


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at))


def later_steps(scenario, first_index: int, rest: list, t0: float) -> list[tuple[float, int, Any]]:
    """The steps after the first fault's (`rest`, with their indices), each at its own instant on the
    wall clock: the first fault's `pause_after`, then each step's pauses and waits whole, as the
    scenario has them (prediction.fault_onsets times the faults the same way)."""
    t = t0 + scenario.method[first_index].pause_after
    out: list[tuple[float, int, Any]] = []
    for index, step in rest:
        t += step.pause_before
        if step.action == "inject-fault" and step.fault is not None:
            out.append((t, index, step))
        elif step.action == "wait":
            t += step.duration
        else:
            out.append((t, index, step))
        t += step.pause_after
    return out
