"""The run loop: the method's actions in order on the environment's clock, and a tick between them.

The loop is the one every world's method runs (method.py), with this as its Stepper. It is
discrete-event: it jumps to the next scheduled action or evaluation tick, so every
responder acts at exactly its configured delay. Every tick the alerts are evaluated (a page alert
pages on-call after the scenario's `group-wait`), burn is sampled, the pager, audit log and tickets
are read, the stop conditions are polled (a hit aborts) and open expectations are judged. The loop
ends when every expectation is decided after the method ran, or at max-duration.
"""

from __future__ import annotations

import heapq

from opsctl.drills import method
from opsctl.drills.context import Aborted, DrillRun
from opsctl.drills.text import duration_text, rate_text
from opsctl.drills.scenario import default_backend
from opsctl.errors import OpsctlError


class MethodLoop:
    def __init__(self, run: DrillRun, observer, responders, automation):
        self.run = run
        self.observer = observer
        self.responders = responders
        self.automation = automation  # Alertmanager's opsctl route and serve's policy engine (automation.py)
        self._pending_page = False
        self._next_tick = 0.0  # the next evaluation tick, set when the method starts

    def run_method(self, steady) -> None:
        """The method, measured with the steady state's instruments (observe.Instrumented); what it
        observed is the observer's (`Observer.observed`)."""
        run, observer = self.run, self.observer
        run.set_phase("method")
        now = run.now()
        observer.begin(steady, now)
        run.state.data["method_started"] = now
        deadline = now + run.scenario.max_duration
        if not run.scenario.faults:  # no fault: deadlines count from the method's start
            observer.mark_t0(now)
        steps = run.scenario.method
        run.schedule(now + steps[0].pause_before, f"method[0] {steps[0].name}", lambda: self._run_step(0))
        self._next_tick = now
        # each step is an evaluation tick or a scheduled action: ticks to the deadline, twice over
        bound = 2 * int(run.scenario.max_duration / run.env.tick) + 10_000
        if method.run(self, deadline, max_steps=bound) == method.SETTLED:
            run.say("settled", "every expectation is decided")
            return
        limit = duration_text(run.scenario.max_duration)
        if not observer.obs.method_done:
            raise Aborted(f"max-duration {limit} reached before the method finished")
        run.say("deadline", f"max-duration {limit} reached")

    # -- the Stepper the method loop (method.py) runs ---------------------------------------------------

    def check_stop(self) -> None:
        self.run.check_stop_requested()

    def settled(self) -> bool:
        return self.observer.settled()

    def next_at(self) -> float:
        """The next evaluation tick or scheduled action, whichever is first."""
        run = self.run
        upcoming = run.queue[0][0] if run.queue else float("inf")
        return min(self._next_tick, upcoming)

    def advance(self, until: float) -> None:
        """The environment's clock to `until` (embedded: a SimClock jump; live: the wall clock waited
        on), then every action due by then, in order."""
        run = self.run
        run.env.advance(until, run.should_stop)
        run.check_stop_requested()
        while run.queue and run.queue[0][0] <= until:
            _, _, _label, action = heapq.heappop(run.queue)
            action()
            run.check_stop_requested()

    def observe(self, at: float) -> None:
        if at >= self._next_tick:
            self._tick()
            self._next_tick = at + self.run.env.tick

    def _run_step(self, index: int) -> None:
        run = self.run
        step = run.scenario.method[index]
        wait = 0
        try:
            if step.action == "inject-fault":
                self._inject(step)
            elif step.action == "wait":
                run.say("wait", f"{step.name}: {duration_text(step.duration)}")
                wait = step.duration
            elif step.action == "file-ticket":
                self.responders.file_ticket(step, by="method")
            elif step.action == "page":
                self.responders.page(step.summary or f"{run.scenario.title}", [])
            elif step.action == "traffic-set":
                self.responders.traffic_set(step)
            elif step.action == "failover":
                self.responders.failover(step.backend, f"method: {step.name}")
        except OpsctlError as exc:
            raise Aborted(f"method step {index} ({step.name}) failed: {exc.message}") from exc
        after = run.now() + wait + step.pause_after
        if index + 1 < len(run.scenario.method):
            nxt = run.scenario.method[index + 1]
            run.schedule(after + nxt.pause_before, f"method[{index + 1}] {nxt.name}", lambda: self._run_step(index + 1))
        else:
            run.schedule(after, "method done", self._method_done)

    def _method_done(self) -> None:
        self.observer.obs.method_done = True
        self.run.say("method", "every method action ran")

    # -- faults -----------------------------------------------------------------------------------------

    def _inject(self, step) -> None:
        from opsctl.drills.faults.registry import injector_for_fault

        run = self.run
        fault = step.fault
        backend = fault.backend or default_backend(fault.kind, run.env.cfg)
        name = injector_for_fault(fault, live=run.mode == "live")
        injector = run.env.injector(name)
        now = run.now()
        record = injector.prepare(fault, backend, now)
        record.update(id=f"f{len(run.state.data['faults']) + 1}", name=step.name, removed_at=None)
        run.state.data["faults"].append(record)
        run.state.save()  # before anything changes: a crash from here on can be cleaned up
        what = injector.apply(record)
        record["applied_at"] = now
        run.state.save()
        run.audit("fault-injected", fault=fault.kind, backend=backend, params=dict(fault.params), target=what)
        self.observer.mark_t0(now)
        run.say("fault", f"{step.name}: {what}")
        run.schedule(record["end"], f"fault {record['id']} ends", lambda: self._fault_ends(record))

    def _fault_ends(self, record: dict) -> None:
        run = self.run
        if record.get("removed_at") is not None:
            return
        message = run.env.injector(record["injector"]).remove(record, run.now())
        record["removed_at"] = run.now()
        record["removal"] = message
        run.state.save()
        run.audit("fault-removed", fault=record["kind"], backend=record["backend"], target=message)
        run.say("fault", f"{record['name']} ended after its duration: {message}")

    # -- every tick --------------------------------------------------------------------------------------

    def _tick(self) -> None:
        run, observer = self.run, self.observer
        now = run.now()
        evaluation, quality = observer.alerts(now)
        pages = [a for a in evaluation.firing if a.severity == "page"] or [a for a in quality if a.severity == "page"]
        paged = any(p["dedup_key"] == run.page_key for p in run.state.data["pages"])
        if pages and observer.obs.t0 is not None and not paged and not self._pending_page:
            # Alertmanager's PagerDuty routes: the fast tier's waits seconds, the others `group-wait`;
            # the incident's title is the alert's summary annotation.
            paging = run.scenario.paging
            fast = [a for a in pages if a.labels.get("tier") == "fast"]
            worst = max(fast or pages, key=lambda a: a.burn_rate)
            summary = worst.annotations.get("summary") or (
                f"{worst.slo} burning its error budget at {rate_text(worst.burn_rate, 0)}"
                f" ({worst.long_window}/{worst.short_window})")
            wait = paging.fast_group_wait if fast else paging.group_wait
            run.schedule(now + wait, "page", lambda: self.responders.page(summary, pages))
            self._pending_page = True
        if observer.obs.t0 is not None:
            self.automation.observe(evaluation.firing + quality, now)
        observer.measure(now)
        observer.observe_all()
        observer.check_stop_conditions(evaluation)
        observer.judge_all(final=False)
