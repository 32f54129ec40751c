"""The drill engine: preflight, steady state, method, expectations, rollbacks, report.

A thin coordinator: the phases live in their own modules (preflight.py, loop.py, responders.py,
observe.py) and share one `DrillRun` (context.py); this module wires them and runs them in order.

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

import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from opsctl.drills.automation import DrillAutomation
from opsctl.drills.context import DrillRun
from opsctl.drills.lifecycle import EXIT_FAILED, EXIT_PASSED, EXIT_REFUSED, Aborted, Lifecycle, Outcome, Refused
from opsctl.drills.expectations import NOT_EVALUATED, NOT_JUDGED
from opsctl.drills.loop import MethodLoop
from opsctl.drills.observe import Observer
from opsctl.drills.phases import Facts, Instrumented, Judgement, Observed, Results, Rollback, Signals, Steady
from opsctl.drills.preflight import Preflight
from opsctl.drills.report_model import DrillReport
from opsctl.drills.responders import Responders, drill_page_key
from opsctl.drills.scenario import Scenario, check_against_config
from opsctl.errors import ConfigError

__all__ = ["Aborted", "DrillResult", "EXIT_FAILED", "EXIT_PASSED", "EXIT_REFUSED", "Engine", "Refused"]


@dataclass
class DrillResult:
    run_id: str
    outcome: str  # passed | failed | aborted | refused
    exit_code: int
    report: DrillReport
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def failures(self) -> list[str]:
        out = [f"{v.name}: {v.reason}" for v in self.report.expectations
               if not v.passed and v.result not in (NOT_EVALUATED, NOT_JUDGED)]
        if self.report.abort_reason:
            out.insert(0, f"aborted: {self.report.abort_reason}")
        if self.report.refusal:
            out.insert(0, f"refused: {self.report.refusal}")
        out.extend(f"left behind: {p}" for p in self.report.leftovers)
        return out


class Engine:
    def __init__(self, scenario: Scenario, user_cfg, *, live: bool = False,
                 progress: Callable[[str], None] | None = None):
        self.run_state = run = DrillRun(scenario, user_cfg, live=live, progress=progress)
        self.observer = Observer(run)
        self.responders = Responders(run, self.observer)
        self.preflight = Preflight(run, self.observer)
        self.automation = DrillAutomation(run, self.responders)
        self.loop = MethodLoop(run, self.observer, self.responders, self.automation)

    def run(self) -> DrillResult:
        from opsctl.drills.env.registry import open_environment
        from opsctl.drills.state import RunState
        from opsctl.slo.loading import load_slos

        run = self.run_state
        wall_start = time.monotonic()
        slos = load_slos([run.user_cfg.slo_dir], run.user_cfg.backends, config=run.user_cfg)
        problems = check_against_config(run.scenario, run.user_cfg, [s.name for s in slos], live=run.mode == "live")
        if problems:
            raise ConfigError(f"{run.scenario.path}: the scenario does not fit the config", problems=problems)
        run.slos = slos
        run.state = RunState.create(run.user_cfg.drills_path, scenario=run.scenario, mode=run.mode,
                                    config_path=run.user_cfg.source_path)
        self._keep_scenario_copy()
        run.env = open_environment(run.mode, run.user_cfg, run.scenario, run.state.run_id, run.state.dir)
        run.page_key = drill_page_key(run)
        run.say("phase", f"drill {run.state.run_id}: {run.scenario.title} ({run.mode})")
        restore_signals = self._install_signal_handlers()
        self.lifecycle = Lifecycle(self, declared_rollbacks=tuple(run.scenario.rollbacks))
        try:
            outcome, data, paths = self.lifecycle.run(wall_start)
        finally:
            restore_signals()  # only now: a signal while the report is written must not cut it short
            run.env.close()
            run.state.release()
            self.preflight.release()
        return DrillResult(run.state.run_id, outcome.outcome, outcome.exit_code, data,
                           {k: str(v) for k, v in paths.items()})

    # -- the World this engine is to the lifecycle (lifecycle.py): the embedded and live worlds ----

    @property
    def mode(self) -> str:
        return self.run_state.mode

    @property
    def run_dir(self):
        return self.run_state.state.dir

    def say(self, kind: str, message: str) -> None:
        self.run_state.say(kind, message)

    def set_phase(self, phase: str) -> None:
        self.run_state.set_phase(phase)

    def prepare(self) -> Facts:
        return self.preflight.preflight()

    def steady_state(self, prepared: Facts) -> Instrumented:
        return self.preflight.steady_state()

    def method(self, steady: Steady) -> Observed:
        if not isinstance(steady, Instrumented):
            raise TypeError("the embedded method needs the steady state's instruments")
        self.loop.run_method(steady)
        return self.observer.observed()

    def partial(self, phase: str) -> Facts | Steady | Signals | None:
        if phase == "method":
            return self.observer.observed()
        return self.preflight.partial(phase)

    def judge(self, signals: Signals | None, stopped: str | None) -> Judgement:
        self.observer.judge_all(final=True, stopped=stopped)
        return self.observer.judgement()

    def report(self, outcome: Outcome, results: Results, wall_seconds: float) -> DrillReport:
        from opsctl.drills.report import build_report_data

        run = self.run_state
        run.state.data.update(outcome=outcome.outcome, abort_reason=results.abort_reason or results.refusal,
                              finished_at=time.time())
        return build_report_data(run, results, outcome.outcome, outcome.exit_code, wall_seconds)

    def finish(self, outcome: Outcome, data: DrillReport, paths: dict) -> None:
        run = self.run_state
        if data.refusal is None:
            run.audit("drill-finished", outcome=outcome.outcome, abort_reason=data.abort_reason,
                      report=str(paths["md"]))
        run.state.data["report"] = {k: str(v) for k, v in paths.items()}
        run.state.data["phase"] = "done"
        run.state.save()

    def _keep_scenario_copy(self) -> None:
        """The scenario as run, next to its state: a cleanup rebuilds the environment from it."""
        try:
            shutil.copyfile(self.run_state.scenario.path, self.run_state.state.dir / "scenario.yaml")
        except OSError:
            pass

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        run = self.run_state

        def handler(signum, frame):
            name = signal.Signals(signum).name
            if run.phase in ("rollbacks", "report"):
                run.late_signals.append(name)  # rollbacks always finish
                run.progress(f"{name} received: finishing the rollbacks first")
            elif run.stop_reason is None:
                run.stop_reason = f"interrupted by {name}"

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore():
            for s, h in previous.items():
                signal.signal(s, h)

        return restore

    def roll_back(self, order: list[str]) -> Rollback:
        from opsctl.drills.rollback import Rollbacks

        run = self.run_state
        rollbacks = Rollbacks(run.env, run.state, run.say)
        actions = rollbacks.run(order)
        leftovers = rollbacks.leftovers()
        for problem in leftovers:
            run.say("leftover", problem)
        if not leftovers:
            run.say("verify", "nothing left behind: no fault, split as before, no open drill page")
        return Rollback(actions=tuple(actions), leftovers=tuple(leftovers))
