"""Reading a scenario file: the top-level sections, the tagged lists, and the checks across
sections. Every problem is collected and raised as one ConfigError naming the file and key path."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from opsctl.drills.scenario.checks import Bad, Check, checked, dur, duration, names, text
from opsctl.drills.scenario.model import (ROLLBACKS, SCENARIO_VERSION, Activity, DrillFreeze, EmbeddedEnv, LiveEnv,
                                          OnCall, Paging, Scenario, VendorResponder)
from opsctl.drills.scenario.typed import read, read_tagged, read_variant
from opsctl.drills.scenario.variants import (EXPECT, FAULTS, METHOD, PROBE, RESPONDER, STOP,
                                             live_target)
from opsctl.errors import ConfigError


def _version() -> Check:
    def convert(value):
        if isinstance(value, bool) or not isinstance(value, int):
            raise Bad(f"expected an integer, got {type(value).__name__} {value!r:.60}")
        if value != SCENARIO_VERSION:
            raise Bad(f"unsupported scenario version {value} (this opsctl reads version {SCENARIO_VERSION})")
        return value
    return Check(convert, SCENARIO_VERSION)


@dataclass(frozen=True, kw_only=True)
class Environment:
    embedded: EmbeddedEnv | None = None
    live: LiveEnv | None = None


@dataclass(frozen=True, kw_only=True)
class Hypothesis:
    title: str = checked(text(), "")
    probes: list[Any] = field(default_factory=list)  # tagged by `probe`


_NEVER = dict(never=True)


@dataclass(frozen=True, kw_only=True)
class OnCallSection:
    simulated: bool = OnCall.simulated
    acknowledge_after: int | None = checked(duration(**_NEVER), OnCall.acknowledge_after)
    escalate_after: int | None = checked(duration(**_NEVER), OnCall.escalate_after)
    secondary_acknowledge_after: int | None = checked(duration(**_NEVER), OnCall.secondary_acknowledge_after)
    name: str = checked(text(), OnCall.name)
    secondary_name: str = checked(text(), OnCall.secondary_name)
    actions: list[Any] = field(default_factory=list)  # tagged by `action`
    manual: str | None = checked(text(), None)


@dataclass(frozen=True, kw_only=True)
class Responders:
    on_call: OnCallSection | None = None
    vendor: VendorResponder | None = None


@dataclass(frozen=True, kw_only=True)
class Rollback:
    action: str = checked(text(*ROLLBACKS), required=True)
    name: str | None = checked(text(), None)


@dataclass(frozen=True, kw_only=True)
class ScenarioFile:
    """The top level of a scenario file."""

    version: int = checked(_version(), SCENARIO_VERSION)
    title: str = checked(text(), required=True)
    description: str = checked(text(), "")
    tags: list[str] = checked(names(), ())
    runbook: str | None = checked(text(), None)
    max_duration: int = checked(duration(10, 7 * 86400), 7200)
    environment: Environment | None = None
    freeze: DrillFreeze | None = None
    steady_state_hypothesis: Hypothesis | None = None
    method: list[Any] = field()  # tagged by `action`
    paging: Paging | None = None
    responders: Responders | None = None
    stop_conditions: list[Any] = field(default_factory=list)  # tagged by `condition`
    expectations: list[Any] = field()  # tagged by `expect`
    rollbacks: list[Any] = field(default_factory=list)


def _raw(data: Any, *keys: str) -> Any:
    """A nested raw value (None when any level is missing or not a mapping)."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _method(data: dict, problems: list[str]) -> list[Activity]:
    items = data.get("method")
    out: list[Activity] = []
    if not isinstance(items, list):  # read_tagged reads nothing from it either
        return out
    for i, _, step in read_tagged(items, "method", "action", METHOD, problems):
        raw = items[i]
        fault = None
        if raw.get("action") == "inject-fault" and raw.get("fault") is not None:  # else: `fault` required
            fault = _fault(raw["fault"], f"method[{i}].fault", problems)
        if step is not None:
            out.append(step.model(fault=fault) if step.action == "inject-fault" else step.model())
    return out


def _fault(raw: Any, where: str, problems: list[str]):
    """A fault by its kind, and where a live drill injects it (read whenever the kind is known)."""
    fault = read_variant(raw, where, "kind", FAULTS, problems)
    live = None
    if isinstance(raw, dict) and raw.get("kind") in FAULTS and raw.get("live") is not None:
        target = read(live_target(raw["kind"]), raw["live"], f"{where}.live", problems)
        live = target.model() if target is not None else None
    return None if fault is None else replace(fault.model(), live=live)


def parse_scenario(data: Any, path: str, digest: str = "") -> Scenario:
    """Raw YAML -> Scenario; every problem is collected and raised as one ConfigError naming file and key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a scenario must be a mapping, got {type(data).__name__}")
    problems: list[str] = []
    top = read(ScenarioFile, data, "", problems)
    # The tagged lists are read from the raw data, so their problems are reported with the top's.
    method = _method(data, problems)
    probes = [p.model() for _, _, p in read_tagged(_raw(data, "steady-state-hypothesis", "probes"),
                                                "steady-state-hypothesis.probes", "probe", PROBE, problems) if p]
    acts = read_tagged(_raw(data, "responders", "on-call", "actions"), "responders.on-call.actions", "action",
                       RESPONDER, problems)
    actions = [a.model() for _, _, a in acts if a]
    stops = [s.model() for _, _, s in read_tagged(data.get("stop-conditions"), "stop-conditions", "condition", STOP,
                                               problems) if s]
    indexed = [(i, e.model()) for i, _, e in read_tagged(data.get("expectations"), "expectations", "expect", EXPECT,
                                                       problems) if e]
    rollbacks = _rollbacks(data.get("rollbacks"), problems)
    if "method" in data and isinstance(data["method"], list) and not data["method"]:
        problems.append("method: must hold at least one action")
    if "expectations" in data and isinstance(data["expectations"], list) and not data["expectations"]:
        problems.append("expectations: a drill measures something: list at least one expectation")
    # Across sections, with what could be read (their own problems are reported above).
    aside: list[str] = []
    on_call = _on_call(read(Responders, data.get("responders") or {}, "", aside, partial=True), actions)
    max_duration = top.max_duration if top is not None else _max_duration(data.get("max-duration"))
    kinds = [kind for _, kind, _ in read_tagged(data.get("method"), "method", "action", METHOD, aside)]
    kinds += [kind for _, kind, _ in acts]
    problems.extend(_cross_checks(kinds, len(acts), on_call, rollbacks, indexed, max_duration))
    if problems:
        raise ConfigError(f"{path}: invalid drill scenario", problems=[f"{path}: {p}" for p in problems])
    env = top.environment or Environment()
    hypothesis = top.steady_state_hypothesis or Hypothesis()
    responders = top.responders or Responders()
    return Scenario(
        title=top.title, path=path, digest=digest, description=top.description, tags=tuple(top.tags),
        max_duration=top.max_duration, embedded=env.embedded or EmbeddedEnv(), live=env.live or LiveEnv(),
        freeze=top.freeze, hypothesis_title=hypothesis.title, probes=tuple(probes), method=tuple(method),
        paging=top.paging or Paging(), on_call=on_call, vendor=responders.vendor or VendorResponder(),
        stop_conditions=tuple(stops), expectations=tuple(e for _, e in indexed), rollbacks=tuple(rollbacks),
        runbook=top.runbook,
    )


def _max_duration(raw: Any) -> int:
    """max-duration when the top level could not be read (its problem is reported there)."""
    check = ScenarioFile.__dataclass_fields__["max_duration"].metadata["check"]
    try:
        return ScenarioFile.max_duration if raw is None else check.convert(raw)
    except Bad:
        return 7 * 86400  # reported already; no deadline is judged against a bad one


def _on_call(responders: Responders | None, actions: list) -> OnCall:
    section = responders.on_call if responders and responders.on_call else OnCallSection()
    return OnCall(simulated=section.simulated, acknowledge_after=section.acknowledge_after,
                  escalate_after=section.escalate_after, secondary_acknowledge_after=section.secondary_acknowledge_after,
                  name=section.name, secondary_name=section.secondary_name, actions=tuple(actions),
                  manual=section.manual)


def _rollbacks(items: Any, problems: list[str]) -> list[str]:
    if not isinstance(items, list):
        return []
    built = [read(Rollback, item, f"rollbacks[{i}]", problems) for i, item in enumerate(items)]
    return [r.action for r in built if r is not None]


def _cross_checks(actions: list[str], acts: int, on_call: OnCall, rollbacks: list[str], expectations,
                  max_duration) -> list[str]:
    """`actions`: every method and on-call action named (also those with problems of their own);
    `acts`: how many of them are on-call's."""
    problems = []
    needs = {
        "remove-faults": "inject-fault" in actions,
        "restore-traffic": any(a in actions for a in ("failover", "traffic-set")),
        "resolve-pages": True,  # every drill may page: alerts page on their own
    }
    for rollback, needed in needs.items():
        if needed and rollback not in rollbacks:
            problems.append(f"rollbacks: must include {{action: {rollback}}}: rollbacks always run, and this drill needs it")
    if len(set(rollbacks)) != len(rollbacks):
        problems.append("rollbacks: lists an action twice")
    for i, e in expectations:
        if e.within is not None and e.within > max_duration:
            problems.append(f"expectations[{i}].within: {dur(e.within)} is beyond max-duration {dur(max_duration)}")
    simulated_ack = on_call.acknowledge_after is not None or (
        on_call.escalate_after is not None and on_call.secondary_acknowledge_after is not None)
    if acts and on_call.manual is None:
        problems.append("responders.on-call.actions: a drill's failovers and tickets come from automation.policies;"
                        " on-call acts by hand only where the scenario rehearses a manual path on purpose:"
                        " say which and why in responders.on-call.manual")
    if acts and not simulated_ack:
        problems.append("responders.on-call.actions: nobody acknowledges the page, so these actions would never run"
                        " (set acknowledge-after or escalate-after with secondary-acknowledge-after)")
    return problems


def load_scenario(path: str | Path) -> Scenario:
    from opsctl.config import load_yaml_file

    path = Path(path)
    data = load_yaml_file(path, "drill scenario")
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        digest = ""
    return parse_scenario(data, str(path), digest)

