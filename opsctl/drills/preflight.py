"""Before the method: preflight (the drill may run here and now) and the steady-state hypothesis.

    preflight     no real incident open, no burn-rate alert firing, no interrupted live drill;
                  the environment is ready (embedded: the drill's own store seeded with baseline);
                  the current split is known (rollbacks restore it)
    steady state  the hypothesis' probes hold (SLO status, alerts, split, freeze); else refused

Either refusal raises `Refused` (exit 4). Each returns its typed result (lifecycle.py): the
preflight `Facts` (the checks, the environment's facts, the original split), the steady state
`Instrumented` (the probes, and what the run loop measures with every tick: the burn-rate rule
plans and the burn meter; the alert evaluator stays with the observer). What a refused phase had
gathered so far is `partial`.
"""

from __future__ import annotations

from opsctl.drills.context import DrillRun, Refused
from opsctl.drills.phases import Facts, Instrumented, ProbeResult
from opsctl.drills.safety import check_real_alerts, check_real_incidents
from opsctl.drills.scenario import default_backend
from opsctl.errors import OpsctlError


class Preflight:
    def __init__(self, run: DrillRun, observer):
        self.run = run
        self.observer = observer  # alerts-firing probes evaluate the drill's own alerts
        self._live_lock = None
        self.checks: list = []  # as they ran (a refusal reports them)
        self.facts: dict = {}
        self.probes: list[ProbeResult] = []

    def partial(self, phase: str) -> Facts | Instrumented:
        """What the preflight or the steady state had gathered when it was refused or stopped."""
        if phase == "preflight":
            return Facts(checks=tuple(self.checks), facts=dict(self.facts))
        return Instrumented(probes=tuple(self.probes))

    def preflight(self) -> Facts:
        run = self.run
        run.set_phase("preflight")
        if run.mode == "live":
            self._take_live_lock()
        checks = [check_real_incidents(run.user_cfg),
                  check_real_alerts(run.user_cfg, strict=run.mode == "live")]
        if run.mode == "live":  # a live drill that died may have left a fault: clean it up first
            from opsctl.drills.cleanup import interrupted_runs
            from opsctl.drills.plan import interrupted_check

            checks.append(interrupted_check([r for r in interrupted_runs(run.user_cfg)
                                              if r.run_id != run.state.run_id]))
        self.checks.extend(checks)
        for c in checks:
            run.say("check", f"{c.status}: {c.name}: {c.message}")
        failed = [c for c in checks if not c.ok]
        if failed:
            raise Refused("; ".join(f"{c.name}: {c.message}" for c in failed))
        self.facts = run.env.prepare(lambda line: run.say("setup", line))
        run.check_stop_requested()
        stored = run.env.controller().read()
        if stored.split is None:
            raise Refused(f"the current split is unknown ({stored.note}): set traffic.default_split or the split")
        run.state.data["split"]["original"] = stored.split.to_dict(list(run.env.cfg.backends))
        run.state.save()
        run.audit("drill-started", scenario=run.scenario.title, file=run.scenario.path, mode=run.mode)
        return Facts(checks=tuple(self.checks), facts=dict(self.facts))

    def _take_live_lock(self) -> None:
        self._live_lock = take_live_lock(self.run.user_cfg)

    def release(self) -> None:
        if self._live_lock is not None:
            self._live_lock.close()
            self._live_lock = None

    def steady_state(self) -> Instrumented:
        from opsctl.drills.measure import BurnMeter

        run = self.run
        run.set_phase("steady-state")
        source = run.env.source()
        self.observer.plan_alerts(source)
        now = run.now()
        deviations = []
        for probe in run.scenario.probes:
            ok, observed = self._probe(probe, now)
            self.probes.append(ProbeResult(probe.name, probe.probe, _plain(probe.tolerance), observed, ok))
            run.say("probe", f"{'ok' if ok else 'DEVIATES'}: {probe.name}: {observed}")
            if not ok:
                deviations.append(f"{probe.name}: {observed}")
        if deviations:
            raise Refused("steady state not met: " + "; ".join(deviations))
        tracked = self._tracked_slos()
        meter = BurnMeter(source, [s for s in run.slos if s.name in tracked], run.user_cfg.slos.period_seconds)
        meter.measure_period(now, history_seconds=run.scenario.embedded.baseline if run.mode == "embedded" else None)
        return Instrumented(probes=tuple(self.probes), plans=tuple(self.observer.plans or ()), meter=meter)

    def _probe(self, probe, now: float) -> tuple[bool, str]:
        run = self.run
        if probe.probe == "slo-status":
            from opsctl.slo.report import build_report

            wanted = [run.slo_name(n) for n in probe.slos]
            slos = [s for s in run.slos if (not wanted or s.name in wanted)
                    and (probe.backend is None or s.backend == probe.backend)]
            results = build_report(slos, run.env.source(), now, run.user_cfg.slos.period_seconds, cross_check=False)
            bad = [f"{r.slo.name} is {r.status.level}" for r in results if r.status.level not in probe.tolerance]
            if bad:
                return False, "; ".join(bad)
            return True, f"{len(results)} SLO(s) {'/'.join(probe.tolerance)}"
        if probe.probe == "alerts-firing":
            firing = [a for a in self.observer.evaluate_alerts(now).firing if probe.severity in (None, a.severity)]
            names = ", ".join(f"{a.slo} {a.long_window}/{a.short_window}" for a in firing[:3])
            return len(firing) <= probe.tolerance, f"{len(firing)} firing" + (f": {names}" if names else "")
        if probe.probe == "traffic-split":
            from opsctl.traffic.split import Split

            order = list(run.env.cfg.backends)
            expected = Split.of(probe.tolerance if probe.tolerance is not None else run.env.cfg.traffic.default_split)
            current = run.env.controller().read().split
            shown = current.describe(order) if current else "unknown"
            return current is not None and current.weights == expected.weights, f"split {shown}"
        if probe.probe == "freeze-active":
            from opsctl.freeze import FreezeCalendar

            active = FreezeCalendar(run.env.cfg.freezes).active(now)
            names = ", ".join(s.name for s in active) or "none"
            return bool(active) == probe.tolerance, f"freezes in force: {names}"
        raise OpsctlError(f"unknown probe {probe.probe!r}")

    def _tracked_slos(self) -> set[str]:
        """SLOs measured every tick: the ones the scenario names, and those of the faulted backends."""
        run = self.run
        names = set()
        for e in run.scenario.expectations:
            if e.slo:
                names.add(run.slo_name(e.slo))
        for s in run.scenario.stop_conditions:
            if s.slo:
                names.add(run.slo_name(s.slo))
        faulted = {f.backend or default_backend(f.kind, run.user_cfg) for f in run.scenario.faults}
        for slo in run.slos:
            if slo.backend in faulted or (faulted and slo.backend == "all"):
                names.add(slo.name)
        return names


def take_live_lock(user_cfg):
    """One live drill at a time per state dir: two would fight over the same split and pages.
    Returns the open lock file (closing it releases the lock); `Refused` when another holds it."""
    import fcntl

    path = user_cfg.drills_path / "live.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise Refused("another live drill is running from this state dir") from None
    return handle


def _plain(value):
    return list(value) if isinstance(value, tuple) else value
