"""Drill scenarios: a small YAML format of opsctl's own, in Chaos Toolkit's vocabulary.

    version: 1
    title: Vendor outage                      # required
    description: ...
    runbook: vendor-outage                    # the runbook it rehearses (default: the file's name)
    max-duration: 2h                          # the drill stops and rolls back after this, whatever happens
    environment:
      embedded: {start: 2026-11-18T14:00:00Z, baseline: 3d, peak-rps: 200, seed: 7, pace: 0}
      live: {poll-interval: 15s}
    freeze: {name: drill-freeze, reason: ...}  # optional: a change freeze in force during the drill
    steady-state-hypothesis:                  # checked before the method; a deviation aborts the drill
      title: ...
      probes: [{name, probe: slo-status | alerts-firing | traffic-split | freeze-active, tolerance, ...}]
    method:                                   # run in order; `pauses: {before, after}` as in Chaos Toolkit
      - {name, action: inject-fault, fault: {kind, backend, rate | factor, duration, live: {...}}}
      - {name, action: wait, duration: 10m}
      - {name, action: file-ticket | page | traffic-set | failover, ...}
    paging: {group-wait: 30s, severity: critical}   # the drill's alert -> page step (Alertmanager's part)
    responders:                               # simulated people
      on-call: {acknowledge-after: 3m, escalate-after: 5m, secondary-acknowledge-after: 2m,
                actions: [{action: failover, from: databricks, after: 2m}, {action: file-ticket, ...}]}
      vendor: {respond-after: 20m, route-to: inference}
    stop-conditions: [{condition: budget-spent | budget-remaining | real-incident-open | alert-firing, ...}]
    expectations: [{expect: detected | paged | acknowledged | escalated | failover-applied | vendor-ticket
                    | vendor-responded | slo-recovered | change-refused, within: 5m, ...}]
    rollbacks: [{action: remove-faults}, {action: restore-traffic}, {action: resolve-pages}]

Keys are hyphenated, as in Chaos Toolkit. Every deadline (`within`) counts from the first injected
fault (from the method's start when no fault is injected). `load_scenario` reports every problem
with the file and the key path (`method[0].fault.rate`) and raises ConfigError (exit 2);
`check_against_config` adds the problems that need the config (unknown backends, vendors, SLOs).

The package: model.py (what the engine runs), checks.py (field checks), typed.py (sections through
the typed-model builder, tagged variants), variants.py (one class per action, fault, probe, stop
condition and expectation), parse.py (the file's sections and the checks across them), fit.py
(the checks against a config).
"""

from opsctl.drills.scenario.checks import DEFAULT_START
from opsctl.drills.scenario.fit import check_against_config, default_backend, raise_problems, resolve_slo
from opsctl.drills.scenario.model import (EXPECTATIONS, FAULT_BACKEND_KIND, FAULT_PARAMS, GUARDS,
                                          LIVE_ROUTE_KINDS, LIVE_SCALE_KINDS, METHOD_ACTIONS, PAGE_SEVERITIES,
                                          PROBES, RESPONDER_ACTIONS, ROLLBACKS, SCENARIO_VERSION, SEVERITIES,
                                          STATUS_LEVELS, STOP_CONDITIONS, Activity, DrillFreeze, EmbeddedEnv,
                                          Expectation, Fault, LiveEnv, LiveRouteFault, LiveScaleFault, OnCall,
                                          Paging, Probe, Scenario, StopCondition, VendorResponder)
from opsctl.drills.scenario.parse import load_scenario, parse_scenario

__all__ = [
    "DEFAULT_START", "EXPECTATIONS", "FAULT_BACKEND_KIND", "FAULT_PARAMS", "GUARDS", "LIVE_ROUTE_KINDS",
    "LIVE_SCALE_KINDS", "METHOD_ACTIONS", "PAGE_SEVERITIES", "PROBES", "RESPONDER_ACTIONS", "ROLLBACKS",
    "SCENARIO_VERSION", "SEVERITIES", "STATUS_LEVELS", "STOP_CONDITIONS", "Activity", "DrillFreeze", "EmbeddedEnv",
    "Expectation", "Fault", "LiveEnv", "LiveRouteFault", "LiveScaleFault", "OnCall", "Paging", "Probe", "Scenario",
    "StopCondition", "VendorResponder", "check_against_config", "default_backend", "load_scenario",
    "parse_scenario", "raise_problems", "resolve_slo",
]
