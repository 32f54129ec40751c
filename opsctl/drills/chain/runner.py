"""`opsctl drill run SCENARIO --chain`: the scenario's fault sent down the real chain, hop by hop.

    preflight   the binaries are on PATH, the scenario fits the config and the chain (its faults
                are ones the exporter can switch), the routing file loads
    setup       the drill's config, the generated rules (promtool-checked), the baseline history
                backfilled with promtool, then exporter, PagerDuty endpoint, ticket bridge,
                Alertmanager, Prometheus and `opsctl serve` started and ready
    steady      Prometheus scrapes the exporter and no page-level alert is pending or firing
    method      the faults switch on (pauses capped); every second each component is asked what
                happened (hops.py, collector.py); the simulated on-call acknowledges the PagerDuty incident
    verdict     every required hop happened (and right: a failover applied, the ticket in the
                expected category), else the drill fails naming the first broken hop and its last
                evidence; the scenario's own deadlines are judged on the same measurements
    rollbacks   faults off, incidents resolved, every process stopped (always, also on Ctrl-C)
    report      Markdown, JSON, HTML under <state_dir>/drills/<run-id>/ with the processes' logs
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING

from opsctl.drills.chain.polling import ChainPolling
from opsctl.drills.chain.startup import ChainStartup
from opsctl.drills.engine import DrillResult
from opsctl.drills.lifecycle import Aborted, Lifecycle, Outcome
from opsctl.drills.phases import Facts, HopSignals, Judgement, Results, Rollback, Signals, Steady
from opsctl.errors import ConfigError, OpsctlError

if TYPE_CHECKING:
    from opsctl.drills.report_model import DrillReport


class ChainDrill(ChainStartup, ChainPolling):
    """The chain drill as the lifecycle's World (lifecycle.py): its phases are the classes it
    stands on (progress.py the fields, startup.py, polling.py, analysis.py); here the run, the
    preflight, the rollbacks and the report."""

    # =========================================================================================

    def run(self) -> DrillResult:
        from opsctl.drills.scenario import check_against_config
        from opsctl.drills.state import RunState
        from opsctl.slo.loading import load_slos

        wall = time.monotonic()
        self.slos = load_slos([self.user_cfg.slo_dir], self.user_cfg.backends, config=self.user_cfg)
        problems = check_against_config(self.scenario, self.user_cfg, [s.name for s in self.slos],
                                        live=self.mode == "live-chain")
        problems += self._chain_problems()
        if len(problems) == 1:  # one line: the file, the reason and the fix
            raise ConfigError(problems[0])
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
        from opsctl.drills.chain.observed import observations

        title_of = self._serve_title if self.mode == "chain" else None
        obs = observations(self.collector, self.t0, self.method_started, title_of) if self.collector else None
        return HopSignals(t0=self.t0, hops=dict(self.collector.hops) if self.collector else {}, obs=obs,
                          prediction=self.prediction, attribution=tuple(self.attribution),
                          budget=self.budget)

    def _serve_title(self, dedup_key: str) -> str | None:
        """The title serve's pager holds for the incident of `dedup_key` (the drill's local ledger:
        setup.drill_config), None when serve paged no such incident."""
        from opsctl.errors import NoDataError
        from opsctl.paging.registry import local_pager

        try:
            return local_pager(self.cfg).get_incident(dedup_key).title
        except NoDataError:
            return None

    def judge(self, signals: Signals | None, stopped: str | None) -> Judgement:
        """A required hop that did not happen (or happened wrong) fails the drill; the report judges
        the scenario's own expectations on the same hops."""
        from opsctl.drills.chain.observed import judge
        from opsctl.drills.expectations import Verdict

        hops = signals.hops if isinstance(signals, HopSignals) else {}
        failed = [f"hop {h.key}" for h in hops.values() if h.required and not h.passed]
        verdicts: tuple[Verdict, ...] = ()
        if isinstance(signals, HopSignals) and signals.obs is not None and not stopped:
            verdicts = tuple(judge(self.scenario, signals.obs, self._slo_name, time.time()))
            failed += [v.name for v in verdicts if not v.passed and v.evaluated]
        return Judgement(verdicts=verdicts, failed=tuple(failed))

    def _slo_name(self, name: str) -> str:
        from opsctl.drills.scenario.fit import resolve_slo

        return resolve_slo(name, [s.name for s in self.slos], self.user_cfg.service) or name

    def roll_back(self, order: list[str]) -> Rollback:
        self._rollbacks(order)
        return Rollback(actions=tuple(self.rollbacks))

    def report(self, outcome: Outcome, results: Results, wall_seconds: float) -> DrillReport:
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
        from opsctl.drills.chain.fit import chain_problems

        return chain_problems(self.scenario, self.user_cfg, history=self.history)

    def _load_routing(self) -> dict:
        from opsctl.config import load_yaml_file

        raw = load_yaml_file(self._routing(), "Alertmanager routing file")
        if not isinstance(raw, dict) or not isinstance(raw.get("route"), dict) or not raw.get("receivers"):
            raise ConfigError(f"{self.routing_path}: not an Alertmanager config (route and receivers needed)")
        return raw

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


