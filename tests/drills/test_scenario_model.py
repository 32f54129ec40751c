"""A scenario file is read into typed sections and tagged variants: every problem is reported at
once, each with the file and the key path (hyphenated keys as written), and a valid file reads into
the model the engine runs."""

from __future__ import annotations

import pytest
import yaml

from opsctl.drills.scenario import Activity, LiveRouteFault, LiveScaleFault, parse_scenario
from opsctl.errors import ConfigError

MANY = """\
version: 2
title: ""
max_duration: 1h
environment: {embedded: {start: yesterday, peak-rps: 0, extra: 1}, live: {poll-interval: 0s}}
steady-state-hypothesis: {probes: [{probe: slo-status, tolerance: bad}, {probe: nope}, 3]}
method:
  - {action: inject-fault, fault: {kind: latency-spike, duration: 5m, factor: 0.5, live: {namespace: n, http-status: 500}},
     pauses: {before: 1x, during: 1}}
  - {action: traffic-set, weights: {a: "x"}}
  - {action: failover}
  - {action: inject-fault, fault: 3}
responders: {on-call: {acknowledge-after: never, escalate-after: never, actions: [{action: wait}], bogus: 1}}
stop-conditions: [{condition: budget-remaining}, {condition: real-incident-open, slo: x}]
expectations: [{expect: detected}, {expect: failover-applied, within: 1m, overrides: [nope]}, {within: 1m}]
rollbacks: [{action: remove-faults}, {action: remove-faults}, {action: x}]
"""

EXPECTED = [
    "version: unsupported scenario version 2 (this opsctl reads version 1)",
    "title: expected a non-empty string, got str ''",
    "max_duration: unknown key (known keys here: description, environment, expectations, freeze, max-duration,"
    " method, paging, responders, rollbacks, runbook, steady-state-hypothesis, stop-conditions, tags, title, version)",
    "environment.embedded.start: expected an RFC 3339 time such as 2026-11-18T14:00:00Z, got str 'yesterday'",
    "environment.embedded.peak-rps: must be at least 1 and at most 1e+06; got 0",
    "environment.embedded.extra: unknown key (known keys here: baseline, pace, peak-rps, seed, start)",
    "environment.live.poll-interval: must be between 1s and 10m; got '0s'",
    "steady-state-hypothesis.probes[0].tolerance: expected a status level or a list of them (ok, ticket, page,"
    " unknown), got str 'bad'",
    "steady-state-hypothesis.probes[1].probe: must be one of slo-status, alerts-firing, traffic-split,"
    " freeze-active; got 'nope'",
    "steady-state-hypothesis.probes[2]: expected a mapping, got int 3",
    "method[0].pauses.before: invalid duration '1x': use forms like 30s, 5m, 1h30m, 28d",
    "method[0].pauses.during: unknown key (known keys here: after, before)",
    "method[0].fault.factor: must be at least 1 and at most 100; got 0.5",
    "method[0].fault.live.virtual-service: required key is missing",
    "method[0].fault.live.fixed-delay: required key is missing",
    "method[0].fault.live.http-status: unknown key (known keys here: fixed-delay, namespace, percentage, route,"
    " virtual-service)",
    "method[1].weights: expected a mapping of backend to whole percent, got dict {'a': 'x'}",
    "method[2].from: required key is missing",
    "method[3].fault: expected a mapping, got int 3",
    "responders.on-call.bogus: unknown key (known keys here: acknowledge-after, actions, escalate-after, manual,"
    " name, secondary-acknowledge-after, secondary-name, simulated)",
    "responders.on-call.actions[0].action: must be one of failover, file-ticket; got 'wait'",
    "stop-conditions[0].slo: required key is missing",
    "stop-conditions[0].below: required key is missing",
    "stop-conditions[1].slo: unknown key (known keys here: condition, name)",
    "expectations[0].within: required key is missing",
    "expectations[1].from: required key is missing",
    "expectations[1].overrides: unknown guard 'nope' (guards: bounds, freeze, rate, budget, capacity)",
    "expectations[2].expect: required key is missing",
    "rollbacks[2].action: must be one of remove-faults, restore-traffic, resolve-pages; got 'x'",
    "rollbacks: must include {action: restore-traffic}: rollbacks always run, and this drill needs it",
    "rollbacks: must include {action: resolve-pages}: rollbacks always run, and this drill needs it",
    "rollbacks: lists an action twice",
]


def test_every_problem_is_reported_at_once_with_the_file_and_the_key_path():
    with pytest.raises(ConfigError) as caught:
        parse_scenario(yaml.safe_load(MANY), "bad.yaml")
    assert sorted(caught.value.problems) == sorted(f"bad.yaml: {p}" for p in EXPECTED)


VALID = """\
title: t
max-duration: 1h
method:
  - {name: break it, action: inject-fault, pauses: {after: 1m},
     fault: {kind: latency-spike, backend: databricks, duration: 10m, factor: 4,
             live: {namespace: staging, virtual-service: vs, fixed-delay: 2s}}}
  - {action: inject-fault, fault: {kind: gpu-capacity-loss, duration: 5m, live: {namespace: staging, deployment: vllm}}}
  - {action: traffic-set, weights: {internal: 100, databricks: 0}, emergency: true}
responders:
  on-call: {acknowledge-after: 2m, escalate-after: never, manual: rehearses filing by hand,
            actions: [{action: file-ticket, vendor: databricks, category: inference, after: 1m}]}
expectations:
  - {expect: paged, within: 10m, not-mentions: [internal]}
  - {expect: failover-applied, from: databricks, within: 20m, overrides: freeze}
  - {expect: change-refused, guard: freeze}
rollbacks: [{action: remove-faults}, {action: restore-traffic}, {action: resolve-pages}]
"""


def test_on_call_actions_without_a_stated_manual_path_are_refused():
    """A scenario that writes the responder's failover and ticket into itself would pass while the
    policies did nothing: its hand actions must say which manual path they rehearse."""
    data = yaml.safe_load(VALID)
    del data["responders"]["on-call"]["manual"]
    with pytest.raises(ConfigError) as caught:
        parse_scenario(data, "ok.yaml")
    assert caught.value.problems == [
        "ok.yaml: responders.on-call.actions: a drill's failovers and tickets come from automation.policies; on-call"
        " acts by hand only where the scenario rehearses a manual path on purpose: say which and why in"
        " responders.on-call.manual"]


def test_a_valid_file_reads_into_the_model_the_engine_runs():
    sc = parse_scenario(yaml.safe_load(VALID), "ok.yaml")
    first, second, third = sc.method
    assert first.name == "break it" and first.pause_after == 60
    assert first.fault.kind == "latency-spike" and first.fault.duration == 600
    assert first.fault.params == {"factor": 4.0}
    assert first.fault.live == LiveRouteFault("staging", "vs", fixed_delay="2s")
    assert second.name == "inject-fault" and second.fault.params == {"rate": 0.1, "factor": 2.0}
    assert second.fault.live == LiveScaleFault("staging", "vllm")
    assert third == Activity(name="traffic-set", action="traffic-set", weights={"internal": 100, "databricks": 0},
                             emergency=True)
    assert sc.on_call.acknowledge_after == 120 and sc.on_call.escalate_after is None
    assert sc.on_call.manual == "rehearses filing by hand"
    assert sc.on_call.actions == (Activity(name="file-ticket", action="file-ticket", after=60, vendor="databricks",
                                           category="inference", severity="Sev2"),)
    paged, failover, refused = sc.expectations
    assert paged.excludes == ("internal",) and paged.within == 600
    assert failover.backend == "databricks" and failover.overrides == ("freeze",)
    assert refused.within is None and refused.action == "set" and refused.guard == "freeze"
    assert sc.max_duration == 3600 and sc.rollbacks == ("remove-faults", "restore-traffic", "resolve-pages")
