"""`opsctl rollout run`: the rollout controller driven in simulated time on the embedded default.

The same RolloutController as in serve, on a SimClock, with the file actuator and local state of a
run directory of its own. Evidence is simulated, not scripted: before each measurement the simulator
(opsctl.metrics.simulator, its public functions) draws the proxy's client-side metrics for the
`evidence` window ending at that instant, with the split the rollout has then (live shares, and
mirrored requests as a backend's own traffic during shadow) and the scenario's incidents, and writes
them to the run's embedded store; the analyses and the traffic guards read that store, at the
simulated instant (the guards on a SimClock ask the store for the simulated now, not the wall's:
a plan starting in 2027 rehearses on 2027's simulated data, docs/decisions/0512). The result's
`data` (RehearsalData) says where the run's data came from: the store, the simulator's settings,
the windows drawn and the simulated range they cover, the incidents injected.

The coarsest form that keeps the guards' maths real: only the windows that are measured are
simulated (an `evidence` window before each measurement, default 1h of 10-second steps), not the
months in between; a burn rate or a latency judgement over that window is computed exactly as on
full data, and the budget guard sees the budget spent in the windows simulated. During an A/B step
the windows also hold the grammar service's arm counters (opsctl.metrics.sim_arms: suggestions
shown and accepted per arm), which the A/B check reads over its own window.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from opsctl.errors import UsageError
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.rollout.document import RolloutState


class SimIncident(Model):
    """An incident injected at a step: KIND as in `sim generate --incident` (latency-spike,
    quality-regression, vendor-5xx, ...), from `after` into the step, lasting `duration`."""

    at_step: int  # 1-based step of the plan
    kind: str
    after: str = "0s"
    duration: str = "30d"
    options: dict[str, float] = field(default_factory=dict)


class RehearsalData(Model):
    """Where a rehearsal's metrics came from (docs/decisions/0512): drawn by the simulator for the
    simulated instants into the run's own embedded store, never the config's store or Prometheus."""

    store: str  # the rehearsal-private embedded store (the run directory's metrics.sqlite)
    drawn_by: str  # the simulator and its settings
    window: str  # each drawing: the evidence window ending at the instant a guard or analysis reads
    windows: int  # how many windows were drawn
    first: str  # the first and last window's end (RFC 3339): the simulated range the data cover
    last: str
    incidents: list[str] = field(default_factory=list)  # the injected incidents, as `sim generate --incident`

    def describe(self) -> str:
        shown = f"; incidents {', '.join(self.incidents)}" if self.incidents else ""
        return (f"data: {self.windows} windows of {self.window} drawn by {self.drawn_by} at the simulated instants"
                f" {self.first} .. {self.last} into {self.store} (the rehearsal's own store){shown}")


class RunResult(Model):
    status: str
    step: int
    start: float
    end: float
    ticks: int
    measurements: int
    wall_seconds: float
    history: list[dict] = field(default_factory=list)
    # each step's analyses as the step ended (went on, paused, aborted, completed): step (1-based),
    # check, outcome (continue | abort | pause), measured, failed, inconclusive, last (its result)
    gates: list[dict] = field(default_factory=list)
    data: RehearsalData | None = None  # where the run's metrics came from


SPLIT_FILE = "traffic/split.json"  # the assignment object (weights; the mirror too with one object)
SHADOW_FILE = "traffic/shadow.json"  # the shadow object, when the config names one (traffic.shadow_actuator)
CANNOT_MIRROR = {"flagd": "the flagd experiment gate assigns users, it cannot mirror"}


def refuse_unmirrored(cfg, steps) -> None:
    """UsageError when the plan mirrors (a shadow step) and no object of the config can carry it:
    an actuator that cannot mirror (flagd) and no `traffic.shadow_actuator`. The run would stop at
    its first shadow step, as the real rollout would: say so before starting."""
    why = CANNOT_MIRROR.get(cfg.traffic.actuator)
    if why is None or cfg.traffic.shadow_actuator is not None:
        return
    shadow = [i + 1 for i, step in enumerate(steps) if step.mirror]
    if shadow:
        raise UsageError(f"the plan mirrors traffic (step {shadow[0]}) but traffic.shadow_actuator is not set and"
                         f" traffic.actuator {cfg.traffic.actuator} cannot carry it ({why}): set"
                         " traffic.shadow_actuator to the mesh object that mirrors (istio, gateway-api,"
                         " configmap or file)")


def run(cfg, plan_data: dict, plan, *, start: float, root: Path, plan_dir: str = "", incidents: Sequence[SimIncident] = (),
        evidence_seconds: int = 3600, peak_rps: float = 150.0, seed: int = 0, max_ticks: int = 5000,
        progress: Callable[[str], None] | None = None) -> RunResult:
    import dataclasses

    from opsctl.clock import SimClock, parse_duration
    from opsctl.metrics import simulator
    from opsctl.metrics.embedded import EmbeddedStore
    from opsctl.metrics.sim_arms import write_arm_counters
    from opsctl.rollout.analyses import Evidence
    from opsctl.rollout.controller import RolloutController
    from opsctl.rollout.document import FINISHED, RolloutStore, start_rollout
    from opsctl.rollout.steps import object_steps, plan_steps
    from opsctl.state.local import LocalStateStore
    from opsctl.traffic.service import TrafficService

    from opsctl.rollout.gates import check_gates

    steps = plan_steps(plan)
    refuse_unmirrored(cfg, steps)
    plan_dir = str(Path(plan_dir or cfg.base_dir).resolve())
    check_gates(cfg, plan, plan.name, plan_dir)  # as `rollout plan`, `rollout start` and serve check it
    two_objects = cfg.traffic.shadow_actuator is not None
    started = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    # the run's own state dir; its data are simulated instants in the past, never stale to the guards.
    # Every object the config names is a file in it: a simulated run never writes a real mesh object,
    # gate or ConfigMap (nor a configured absolute split path a grammar service may read).
    t = cfg.traffic
    cfg = dataclasses.replace(cfg, state_dir=str(root.resolve()),
                              metrics=dataclasses.replace(cfg.metrics, source="embedded", max_data_age="3650d"),
                              state=dataclasses.replace(cfg.state, backend="local"),
                              traffic=dataclasses.replace(t, actuator="file", shadow_actuator=None,
                                                          file=dataclasses.replace(t.file, path=SPLIT_FILE)))
    clock = SimClock(start)
    traffic = TrafficService(cfg, clock=clock, hooks=[])
    shadow_svc = None
    if two_objects:  # the config's two objects (the gate and the mesh's mirror) as two files
        from opsctl.traffic.file import FileActuator

        shadow_svc = TrafficService(cfg, clock=clock, hooks=[],
                                    actuator=FileActuator(root.resolve() / SHADOW_FILE, default=None,
                                                          backends=list(cfg.backends)))
    store = RolloutStore(LocalStateStore(root / "state"))
    kinds = {name: b.kind for name, b in cfg.backends.items()}
    metrics_path = cfg.state_path / "metrics.sqlite"
    counted = [0]
    drawn: list[float] = []  # each window's end
    specs: list[str] = []  # the incidents injected, as drawn
    step_starts: dict[int, float] = {}

    def simulate_window(at: float, weights=None, shadow=None) -> None:
        state = store.read()
        if weights is None:
            split = traffic.read().split
            assert split is not None  # set at the start of the simulated rollout
            weights, shadow = dict(split.weights), dict(split.shadow)
            if shadow_svc is not None:  # the mirror share lives on the shadow object
                mirror = shadow_svc.read().split
                shadow = dict(mirror.shadow) if mirror is not None else {}
        if state is not None and state.step_started is not None:
            step_starts.setdefault(state.step, state.step_started)
        injected = []
        for inc in incidents:
            begun = step_starts.get(inc.at_step - 1)
            if begun is None or state is None or state.step != inc.at_step - 1:
                continue
            begin = begun + parse_duration(inc.after)
            spec = f"{inc.kind}@{_rfc(begin)}+{inc.duration}"
            if inc.options:
                spec += ":" + ",".join(f"{k}={v}" for k, v in inc.options.items())
            if begin < at:
                injected.append(simulator.parse_incident(spec, kinds))
                if spec not in specs:
                    specs.append(spec)
        lo = at - evidence_seconds
        series = {}
        live = {b: float(weights.get(b, 0)) for b in kinds}
        live_total = sum(live.values()) or 100.0
        for name in kinds:
            share = live[name] / live_total
            mirrored = shadow.get(name, 0) / 100.0
            rps = peak_rps * (share + mirrored * (1 - share))
            if rps <= 0:
                continue
            own = [i for i in injected if i.backend == name and i.end > lo and i.start < at]
            series.update(simulator.simulate(lo, at, backends={name: kinds[name]}, split={name: 100.0},
                                             peak_rps=rps, seed=seed, incidents=own))
        db = EmbeddedStore.open(metrics_path, create=True)
        try:
            simulator.write_to_store(db, series, mode="replace")
        finally:
            db.close()
        if state is not None and steps[state.step].kind == "ab" and state.phase == "soak":  # the arms, counted
            write_arm_counters(metrics_path, series, seed=seed)
        counted[0] += 1
        drawn.append(at)

    found = traffic.read().split  # none stored yet without traffic.default_split: the start is the baseline
    simulate_window(start, dict(found.weights) if found else {plan.baseline: 100}, {})  # the start's evidence
    traffic.set({plan.baseline: 100}, reason=f"simulated rollout {plan.name}: the start")
    mirror = objects = None
    if shadow_svc is not None:
        shadow_svc.set({plan.baseline: 100}, reason=f"simulated rollout {plan.name}: the mirror's start")
        mirror = shadow_svc.read().split
        objects = object_steps(traffic, shadow_svc, list(cfg.backends))
    current = traffic.read().split
    assert current is not None  # just set above
    start_rollout(store, plan_data, plan, by="rollout-run", at=start, current=current,
                  order=list(cfg.backends), mirror=mirror, objects=objects, plan_dir=plan_dir)

    def evidence(at: float, the_plan):
        simulate_window(at)
        return Evidence(cfg, the_plan, at)  # the controller sets its base_dir: the plan's directory

    controller = RolloutController(cfg, store, traffic, clock=clock, evidence=evidence, progress=progress,
                                   shadow=shadow_svc)
    ticks = 0
    gates: list[dict] = []
    for ticks in range(1, max_ticks + 1):
        state = before = _read(store)
        if state.phase == "apply":
            simulate_window(clock.now())  # the guards of the step's change read the last window
        what = controller.tick()
        state = _read(store)
        if (state.step, state.status) != (before.step, before.status) and before.phase == "soak":
            gates.extend(_gates(plan, steps[before.step], before.step, state.analyses or before.analyses))
        if state.status in FINISHED or state.status == "paused":
            break
        if what in ("idle", "waiting", "held"):
            clock.advance(max(60.0, next_event(controller, plan, steps[state.step], state, clock.now()) - clock.now()))
    state = _read(store)
    history = [{"at": _rfc(e.at), "step": e.step, "what": e.what, "detail": e.detail} for e in state.history
               if e.what != "measured"]
    data = RehearsalData(str(metrics_path.resolve()), f"opsctl.metrics.simulator (seed {seed}, peak {peak_rps:g} rps,"
                         " by instant and time of day, with the rollout's split then)", _duration(evidence_seconds),
                         counted[0], _rfc(min(drawn)), _rfc(max(drawn)), specs)
    return RunResult(state.status, state.step + 1, start, clock.now(), ticks, counted[0],
                     round(time.perf_counter() - started, 3), history, gates, data)


def next_event(controller, plan, step, state: "RolloutState", now: float) -> float:
    """The next instant the controller has something to do, so the simulated clock stops there and
    never past it: a freeze's end the step waits for, the next measurement due, an A/B's next reading
    of its traffic, the step's end (its length as the plan shows it); a held rollout looks again at its next interval (or in an hour)."""
    from opsctl.rollout.steps import ONCE_AT_END

    analyses = controller._analyses(plan, step)
    every = [a.interval.seconds for a in analyses if a.check not in ONCE_AT_END]
    if state.phase == "apply" or state.step_started is None:
        if state.waiting_until and state.waiting_until > now:
            return state.waiting_until
        return now + (min(every) if every else 3600)
    ends = state.step_started + controller._seconds(plan, step, state)
    due = [ends]
    if step.kind == "ab":  # the A/B's traffic is read a day into the step and each day after
        due.append((state.traffic_at if state.traffic_at is not None else state.step_started) + 86400)
    for a, c in zip([a for a in analyses], state.analyses):
        if a.check not in ONCE_AT_END and c.last_at is not None and c.last_at + a.interval.seconds < ends:
            due.append(c.last_at + a.interval.seconds)
    later = [t for t in due if t > now]
    return min(later) if later else now + 60


def _gates(plan, step, index: int, counts) -> list[dict]:
    from opsctl.rollout.plan import outcome_of

    analyses = list(plan.stages[step.stage].body.analysis)
    return [{"step": index + 1, "check": a.check, "outcome": outcome_of(a, c.failed, c.inconclusive, c.measured),
             "measured": c.measured, "failed": c.failed, "inconclusive": c.inconclusive, "last": dict(c.last)}
            for a, c in zip(analyses, counts)]


def _rfc(ts: float) -> str:
    from opsctl.clock import format_rfc3339

    return format_rfc3339(ts)


def _duration(seconds: float) -> str:
    from opsctl.clock import format_duration

    return format_duration(int(seconds))


def _read(store) -> "RolloutState":
    """The run's rollout document; it exists from the start of the run to its end."""
    state = store.read()
    if state is None:
        raise UsageError("the simulated rollout's state vanished from its run directory")
    return state
