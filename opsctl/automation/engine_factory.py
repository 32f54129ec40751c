"""One builder of the policy engine, for `opsctl serve` and for drills alike.

`opsctl serve` (automation/service.py) and the in-process drill path (drills/automation.py) both
build their `PolicyEngine` here, from the config: the policies and their causes from
`automation.policies`, the global dry run, the hold-down and restore retry from `automation`, the
ticket category by cause from `runbooks.tickets`, and a dry-run executor beside the live one, on
the incident store built by `incident_store` (the only record the engine decides from). What
differs between them is only which executor acts (serve's `FencedExecutor` over `LiveExecutor`,
the drill's `FencedExecutor` over its `DrillExecutor`, the same wrapping as serve's single
replica) and where the record of actions is kept, so the two cannot drift.

`shape()` describes what a built engine will do, as a typed record (`EngineShape`): the policies
with their matchers, causes, actions and the ticket category each cause files in, the engine's
timings, and the traffic rate limit the executor's controller enforces. A drill records it in its
report; tests compare a drill's with serve's.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING, Callable

from opsctl.model import Model, field

if TYPE_CHECKING:
    from pathlib import Path

    from opsctl.automation.actions import Executor
    from opsctl.fencing import Term
    from opsctl.incident.store import IncidentStore
    from opsctl.state.base import StateStore
    from opsctl.automation.action_log import ActionLog
    from opsctl.automation.policy import Taken
    from opsctl.automation.policy_engine import PolicyEngine
    from opsctl.config import Config


class PolicyShape(Model):
    """One compiled policy as the engine runs it."""

    name: str
    match: dict[str, str]
    match_re: dict[str, str]
    causes: tuple[str, ...]  # empty: any cause
    actions: tuple[str, ...]  # in the order the engine takes them: failover, page, ticket, note, restore
    dry_run: bool
    hold_down_seconds: int
    ticket_categories: dict[str, str] = field(default_factory=dict)  # cause -> category (ticket policies)


class EngineShape(Model):
    """What a built policy engine does, independent of where it runs."""

    version: int
    dry_run: bool
    hold_down_seconds: int
    restore_retry_seconds: int
    policies: tuple[PolicyShape, ...]
    fenced: bool  # the live executor is wrapped as serve wraps it (operation ids chosen before the write)
    rate_limit: dict[str, int] = field(default_factory=dict)  # max_changes, window_seconds (traffic guard)

    def to_dict(self) -> dict[str, Any]:
        from opsctl.model import to_dict

        shaped: dict[str, Any] = to_dict(self)  # a Model: a dict
        return shaped


def build_engine(cfg: "Config", incidents: "IncidentStore", live: "Executor", *,
                 clock: Callable[[], float], on_action: Callable[["Taken"], None] | None = None,
                 actions: "ActionLog | None" = None, lock_dir: "Path | None" = None) -> "PolicyEngine":
    """The policy engine for `cfg`: `incidents` keeps the incidents (incident_store), `live` acts
    (already wrapped by the caller's fencing), a DryRunExecutor decides for dry runs, `actions`
    keeps the record of actions; `lock_dir` (local mode) holds the file locks that keep one response
    to one process of the host (response_lock.py)."""
    from opsctl.automation.actions import DryRunExecutor
    from opsctl.automation.policy_engine import PolicyEngine
    from opsctl.automation.response_lock import ResponseLocks

    return PolicyEngine(cfg.automation, cfg.backends, incidents, live, DryRunExecutor(), clock,
                        on_action=on_action, tickets=cfg.runbooks.tickets, actions=actions,
                        locks=ResponseLocks(lock_dir))


def incident_store(cfg: "Config", *, state: "StateStore | None" = None, directory: "Path | None" = None,
                   term: "Callable[[], Term | None] | None" = None,
                   clock: Callable[[], float] | None = None) -> "IncidentStore":
    """The incident store serve and drills run: on `state` (team mode: the shared state store,
    fenced by `term`), else the file store under `directory` (default: the config's state dir)."""
    from opsctl.incident.file import file_incident_store
    from opsctl.incident.store import StateIncidentStore

    quiet = float(cfg.automation.incident.quiet.seconds)
    if state is not None:
        return StateIncidentStore(state, service=cfg.service, quiet=quiet, term=term, clock=clock)
    return file_incident_store(directory or cfg.state_path, service=cfg.service, quiet=quiet, term=term, clock=clock)


ACTION_ORDER = ("failover", "page", "ticket", "note", "restore")


def shape(engine: "PolicyEngine") -> EngineShape:
    """Describe a built engine from the engine itself (its compiled policies and settings, and the
    controller its live executor writes through), not from the config it was built from."""
    from opsctl.slo import conventions as cv

    settings = engine.settings
    policies = []
    for policy in engine.policies:
        p = policy.policy
        actions = tuple(a for a in ACTION_ORDER if getattr(p.actions, a))
        categories = {cause: engine.ticket_category(policy, cause) for cause in cv.CAUSES} if p.actions.ticket else {}
        policies.append(PolicyShape(
            name=p.name, match=dict(p.match), match_re=dict(p.match_re), causes=tuple(sorted(policy.causes)),
            actions=actions, dry_run=bool(p.dry_run), hold_down_seconds=int(engine.hold_down(policy)),
            ticket_categories=categories))
    live = engine.live
    inner = getattr(live, "inner", None)
    controller = getattr(inner if inner is not None else live, "controller", None)
    limit = {}
    if controller is not None:
        rate = controller.cfg.traffic.rate_limit
        limit = {"max_changes": int(rate.max_changes), "window_seconds": int(rate.window_seconds)}
    return EngineShape(version=1, dry_run=bool(settings.dry_run), hold_down_seconds=int(settings.hold_down_seconds),
                       restore_retry_seconds=int(settings.restore_retry_seconds), policies=tuple(policies),
                       fenced=inner is not None, rate_limit=limit)


__all__ = ["EngineShape", "PolicyShape", "build_engine", "incident_store", "shape"]
