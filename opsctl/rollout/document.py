"""The rollout document the controller keeps in the StateStore (`rollout`: a local file, or the
ConfigMap `opsctl-<service>-rollout`; controller.py drives it): the plan itself, the step and phase,
where each object stands, the analyses' counts, the intents people wrote and the history, as typed
models read back by `parse_state`. `RolloutStore` writes it by compare-and-swap under the leader's
Term; `new_intent` and `start_rollout` are people's writes (CAS only, no term)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import ConflictError, NoDataError, UsageError
from opsctl.model import Model, field

if TYPE_CHECKING:
    from opsctl.fencing import Term
    from opsctl.rollout.plan import RolloutPlan
    from opsctl.traffic.split import Split

DOCUMENT = "rollout"
VERSION = 1
MAX_HISTORY = 200
MAX_INTENTS = 50
INTENTS = ("pause", "resume", "promote", "abort")
FINISHED = ("completed", "aborted")


class ObjectStep(Model):
    """Where one object the rollout drives stands: the step whose content it holds (0: the start)
    and the step that last wrote it, with that change's id in the object's own change record."""

    role: str  # assignment (the split's weights; also the mirror when there is no shadow object) | shadow
    actuator: str  # its kind: flagd, istio, file...
    target: str  # where it lives
    step: int = 0  # 1-based; 0: as the rollout found it (at the start, and after an abort)
    split: str = ""  # what it holds, described
    written_step: int = 0  # the step during which it was last written (an abort's too; 0: not yet)
    change_id: str | None = None


class AnalysisCount(Model):
    """What the controller keeps of one analysis during a step: counts, and the last measurement."""

    measured: int = 0
    failed: int = 0
    inconclusive: int = 0
    last_at: float | None = None
    last: dict[str, Any] = field(default_factory=dict)


class Intent(Model):
    id: str
    action: str  # pause | resume | promote | abort
    by: str
    at: float
    reason: str = ""


class Event(Model):
    at: float
    step: int  # 1-based
    what: str  # started | applied | measured | paused | resumed | promoted | held | waiting | aborted | completed
    detail: str = ""
    term: str | None = None
    change_id: str | None = None


class RolloutState(Model):
    version: int
    id: str
    plan: dict[str, Any]  # the plan as written (rebuilt with plan.build_plan on every read)
    status: str  # running | paused | aborted | completed
    step: int = 0
    phase: str = "apply"  # apply | soak
    step_started: float | None = None
    start_weights: dict[str, int] = field(default_factory=dict)  # the split the rollout started from
    start_shadow: dict[str, int] = field(default_factory=dict)  # on the shadow object when there is one
    objects: list[ObjectStep] = field(default_factory=list)  # assignment first, then the shadow object
    analyses: list[AnalysisCount] = field(default_factory=list)
    reapply: int = 0  # times the current step was applied again (after an incident's restore)
    incident: str | None = None  # the open failover holding the rollout
    waiting_until: float | None = None  # a freeze's end the next step waits for
    paused_because: str = ""
    intents: list[Intent] = field(default_factory=list)
    handled: list[str] = field(default_factory=list)
    history: list[Event] = field(default_factory=list)
    started_by: str = ""
    started_at: float = 0.0
    updated_at: float = 0.0
    term: str | None = None
    plan_dir: str = ""  # the plan file's directory at start (absolute): files an analysis names resolve there
    planned_end: float | None = None  # the rollout's end as re-planned when the current step was applied
    # A/B steps' trials a day (both arms) as the controller measured them, by 0-based step index ("1"):
    # the step's horizon at that traffic (calendar.step_seconds); when the current step's was last read
    measured_trials: dict[str, int] = field(default_factory=dict)
    traffic_at: float | None = None

    def to_dict(self) -> dict:
        from opsctl.model.build import to_dict

        return to_dict(self)


def parse_state(data: dict | None, where: str = DOCUMENT) -> RolloutState | None:
    if not data:
        return None
    from opsctl.model import build_into

    problems: list[str] = []
    state = build_into(RolloutState, data, "", problems)
    if problems or state is None:
        raise NoDataError(f"{where}: not a rollout state ({'; '.join(problems[:3])})",
                          hint="`opsctl rollout abort` cannot read it either: move the document aside")
    return state


class RolloutStore:
    """The rollout's document, every write a compare-and-swap; fenced with the leader's term when
    `term` is given (None from it: this replica does not lead, FencedError)."""

    def __init__(self, store, *, term: "Callable[[], Term | None] | None" = None, name: str = DOCUMENT):
        self.store, self.term, self.name = store, term, name

    def read(self) -> RolloutState | None:
        doc = self.store.get(self.name)
        return parse_state(doc.data if doc else None, f"{self.store.where}: {self.name}")

    def write(self, change: Callable[[RolloutState | None], RolloutState | None], *, fenced: bool = True) -> RolloutState | None:
        from opsctl.fencing import FencedError, fence

        out: list[RolloutState | None] = [None]

        def apply(data):
            current = parse_state(data)
            stored_term = (data or {}).get("term")
            if fenced and self.term is not None:
                term = self.term()
                if term is None:
                    raise FencedError(f"{self.name}: this replica no longer leads; it does not write")
                kept = fence(term, stored_term, self.name)
            else:
                kept = fence(None, stored_term, self.name)
            new = change(current)
            if new is None:
                return None
            new = dataclasses.replace(new, term=kept, history=new.history[-MAX_HISTORY:],
                                      intents=new.intents[-MAX_INTENTS:], handled=new.handled[-MAX_INTENTS:])
            out[0] = new
            return new.to_dict()

        self.store.update(self.name, apply, attempts=10)
        return out[0]


def new_intent(store: RolloutStore, action: str, *, by: str, at: float, reason: str = "") -> Intent:
    """A person's intent (CAS only, no term): applied by the controller at its next tick."""
    if action not in INTENTS:
        raise UsageError(f"unknown rollout intent {action!r} (known: {', '.join(INTENTS)})")
    intent = Intent(f"{action}-{os.urandom(4).hex()}", action, by, at, reason)

    def change(state):
        if state is None:
            raise NoDataError("no rollout to steer", hint="start one with `opsctl rollout start PLAN`")
        if state.status in FINISHED:
            raise ConflictError(f"rollout {state.id} is {state.status}; nothing to {action}")
        return dataclasses.replace(state, intents=[*state.intents, intent])

    store.write(change, fenced=False)
    return intent


def start_rollout(store: RolloutStore, plan_data: dict, plan: "RolloutPlan", *, by: str, at: float,
                  current: "Split", order: list[str], mirror: "Split | None" = None,
                  objects: "list[ObjectStep] | None" = None, plan_dir: str = "") -> RolloutState:
    """A new rollout from the current split (CAS: refused while another one runs). With a shadow
    object, `mirror` is its split: the mirror share starts (and an abort returns) from there."""
    rid = f"{plan.name}-{os.urandom(3).hex()}"
    shadow = dict((mirror if mirror is not None else current).shadow)
    began = current.describe(order) + (f"; mirror {mirror.describe(order)}" if mirror is not None else "")
    fresh = RolloutState(VERSION, rid, plan_data, "running", plan_dir=plan_dir, start_weights=dict(current.weights),
                         start_shadow=shadow, objects=list(objects or []), started_by=by, started_at=at,
                         updated_at=at, history=[Event(at, 1, "started", f"by {by}, from {began}")])

    def change(state):
        if state is not None and state.status not in FINISHED:
            raise ConflictError(f"rollout {state.id} is {state.status}: abort it before starting another")
        return fresh

    return store.write(change, fenced=False) or fresh
