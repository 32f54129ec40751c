"""Drill reports: one typed record (`report_model.DrillReport`, written as report.json), built from a
finished run (`build_report_data`) or, for a drill whose process died, from its persisted state
(`report_from_state`), with the action items read from it. `drills.render` writes it as JSON,
Markdown and a self-contained HTML page.
"""

from __future__ import annotations

import os
from pathlib import Path

from typing import TYPE_CHECKING, Any, Protocol

from opsctl.clock import format_rfc3339
from opsctl.drills.phases import Facts, Observed, Results, Rollback
from opsctl.drills.report_model import (
    INTERRUPTED_KEYS,
    RUN_KEYS,
    Automation,
    AutomationAction,
    Budget,
    BudgetRow,
    Chart,
    ChartPoint,
    Check,
    DrillReport,
    Event,
    Hypothesis,
    Marker,
    Measurements,
    Probe,
    RollbackResult,
    ScenarioRef,
    Sim,
    Stop,
    Threshold,
    Unmatched,
    Verdict,
)
from opsctl.drills.text import duration_text

if TYPE_CHECKING:
    from opsctl.drills.expectations import Observations
    from opsctl.drills.scenario import Scenario
    from opsctl.drills.state import RunState



class ReportedRun(Protocol):
    """What the report reads of a drill's run (context.DrillRun; a protocol, since the lifecycle that
    the run's module imports writes the report)."""

    scenario: Scenario
    state: RunState
    mode: str
    env: Any
    late_signals: list[str]
    timeline: list[dict[str, Any]]
    user_cfg: Any

    @property
    def env_open(self) -> bool: ...

    def slo_name(self, name: str) -> str: ...


__all__ = ["DETECTION_SLACK", "KEY_KINDS", "MEASURES", "SPENT_WARNING", "TARGETS", "action_items", "build_report_data",
           "duration_text", "key_events", "measured_items", "report_from_state"]

SPENT_WARNING = 0.5  # an action item when one response would spend more than this share of a period's budget

MEASURES = (
    ("time_to_detect", "detect", "first page-level burn-rate alert firing"),
    ("time_to_page", "page", "on-call paged (incident opened)"),
    ("time_to_acknowledge", "acknowledge", "page acknowledged"),
    ("time_to_mitigate", "mitigate", "failover applied"),
    ("time_to_vendor_routing", "vendor routing", "vendor ticket filed in its category"),
    ("time_to_vendor_response", "vendor response", "vendor's first response"),
    ("time_to_recover", "recover", "SLO no longer burning"),
)


def _fmt(ts: float | None) -> str | None:
    return None if ts is None else format_rfc3339(ts)


# ---------------------------------------------------------------------------------------------
# Data


def build_report_data(run: ReportedRun, results: Results, outcome: str, exit_code: int, wall_seconds: float) -> DrillReport:
    """The embedded and live drill's report, from the phases' results (lifecycle.Results): the
    preflight's facts, the steady state's probes, the method's `Observed`, the judgement's
    verdicts and the rollbacks; `run` gives the scenario, the config and the timeline."""
    from opsctl.drills.prediction import prediction

    sc, state = run.scenario, run.state
    prepared = results.prepared or Facts()
    seen = results.signals if isinstance(results.signals, Observed) else Observed()
    rollback = results.rollback or Rollback()
    obs = seen.obs
    t0 = obs.t0
    keys: tuple[str, ...] = RUN_KEYS
    sim = None
    start: float | None = getattr(run.env, "start", None)  # the embedded world's simulated start
    if run.mode == "embedded" and run.env_open and start is not None:
        sim = Sim(start=_fmt(start), end=_fmt(run.env.clock.now()),
                  simulated_seconds=round(run.env.clock.now() - start, 1),
                  resimulations=getattr(getattr(run.env, "world", None), "simulations", None))
        keys += ("sim",)
    measurements = _measurements(obs)
    predicted = prediction(run, seen, Measurements() if measurements is None else measurements)
    report = DrillReport(
        **_base(state, sc, outcome, exit_code),
        wall_seconds=round(wall_seconds, 3),
        t0=_fmt(t0),
        refusal=results.refusal,
        abort_reason=results.abort_reason,
        crash=results.crash,
        late_signals=tuple(run.late_signals),
        preflight=tuple(Check.parse(c.to_dict()) for c in prepared.checks),
        hypothesis=Hypothesis(title=sc.hypothesis_title, probes=tuple(
            Probe.parse(p.to_dict()) for p in (results.steady.probes if results.steady else ()))),
        environment=prepared.facts,
        timeline=_timeline(run.timeline, t0),
        measurements=measurements,
        automation=Automation(
            actions=tuple(AutomationAction.parse({**a, "at": _fmt(a["at"]),
                                                  "offset": None if t0 is None else round(a["at"] - t0, 3)})
                          for a in obs.automation),
            unmatched=tuple(Unmatched(at=_fmt(at), alert=what) for at, what in obs.unmatched),
            engine=obs.engine),
        expectations=tuple(Verdict.parse(v.to_dict(_fmt)) for v in
                           (results.judgement.verdicts if results.judgement else ())),
        rollbacks=tuple(RollbackResult.parse(r) for r in rollback.actions),
        leftovers=tuple(rollback.leftovers),
        clean=not rollback.leftovers and not rollback.failed,
        budget=_budget(seen),
        chart=_chart(run, seen),
        runbook=_runbook(run),
        sim=sim,
        prediction=predicted,
    ).with_keys(*keys, "prediction")
    return report.replace(action_items=tuple(action_items(report)))


def report_from_state(state: RunState, *, reason: str, rollbacks: list[dict[str, Any]],
                      leftovers: list[str]) -> DrillReport:
    """The report of an interrupted drill, from what its state file holds."""
    d = state.data
    t0 = d.get("t0")
    scenario = ScenarioRef(title=d["scenario"]["title"], name=d["scenario"]["name"], path=d["scenario"]["path"],
                           digest=d["scenario"].get("digest"))
    results = tuple(RollbackResult.parse(r) for r in rollbacks)
    report = DrillReport(
        run_id=d["run_id"], mode=d["mode"], outcome="aborted", exit_code=1, scenario=scenario,
        started_at=_fmt(d["started_at"]), finished_at=_fmt(d.get("finished_at")), wall_seconds=None,
        t0=_fmt(t0), abort_reason=reason, timeline=_timeline(d.get("timeline") or [], t0),
        rollbacks=results, leftovers=tuple(leftovers),
        clean=not leftovers and not any(r.status == "failed" for r in results),
        note="the drill was interrupted: expectations were not judged",
    ).with_keys(*INTERRUPTED_KEYS)
    return report.replace(action_items=tuple(action_items(report)))


def _base(state: RunState, sc: Scenario, outcome: str, exit_code: int) -> dict[str, Any]:
    return {
        "run_id": state.run_id, "mode": state.mode, "outcome": outcome, "exit_code": exit_code,
        "scenario": ScenarioRef(title=sc.title, name=sc.name, path=sc.path, digest=sc.digest,
                                description=sc.description, tags=tuple(sc.tags)),
        "started_at": _fmt(state.data["started_at"]), "finished_at": _fmt(state.data.get("finished_at")),
    }


def _runbook(run: ReportedRun) -> str | None:
    """The generated runbook this drill rehearses (runbooks/scenario-<name>.md), when there is one."""
    cfg = run.user_cfg
    path: Path = cfg.path(cfg.runbooks.dir) / f"scenario-{run.scenario.runbook or run.scenario.name}.md"
    if not path.is_file():
        return None
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


# The timeline rows a reader needs (fault on and off, alerts fired and resolved, page, ack, escalation,
# failover, ticket, vendor, traffic restored, recovered, stop conditions and aborts); the rest
# (checks, probes, setup, the automation's bookkeeping, expectation verdicts) is in the details.
# A chain drill's timeline names each event by its hop (chain/hops.py ORDER): every hop is a key
# event, so the visible timeline has the page, the failover, the acknowledgement and the ticket.
CHAIN_HOP_KINDS = frozenset({"rule-pending", "rule-firing", "alertmanager", "pagerduty", "serve", "policy",
                             "actuator", "ticket", "acknowledged"})
KEY_KINDS = frozenset({"fault", "alert", "page", "ack", "escalate", "failover", "ticket", "vendor", "traffic",
                       "rollback", "recovered", "refused", "abort", "deadline", "leftover", "budget"}) | CHAIN_HOP_KINDS


def key_events(timeline: tuple[Event, ...]) -> list[Event]:
    return [t for t in timeline if t.kind in KEY_KINDS]


def _timeline(events: list[dict[str, Any]], t0: float | None) -> tuple[Event, ...]:
    return tuple(Event(at=_fmt(e["at"]), offset=None if t0 is None else round(e["at"] - t0, 3), phase=e["phase"],
                       kind=e["kind"], message=e["message"]) for e in events)


def _measurements(obs: Observations) -> Measurements | None:
    t0 = obs.t0
    if t0 is None:
        return None

    def since(ts: float | None) -> float | None:
        return None if ts is None else round(ts - t0, 3)

    detect = [at for (slo, sev, pair), (at, a) in obs.first_firing.items() if sev == "page" and at >= t0]
    mitigated = [e["ts"] for e in obs.failovers]
    routed = [t.filed_at for t in obs.tickets if t.filed_at is not None and t.routed_value is not None]
    responded = [t.first_response_at for t in obs.tickets if t.first_response_at is not None]
    return Measurements(
        time_to_detect=since(min(detect)) if detect else None,
        time_to_page=since(obs.paged_at),
        time_to_acknowledge=since(obs.acknowledged_at),
        time_to_mitigate=since(min(mitigated)) if mitigated else None,
        time_to_vendor_routing=since(min(routed)) if routed else None,
        time_to_vendor_response=since(min(responded)) if responded else None,
        time_to_recover=since(min(obs.recovered_at.values())) if obs.recovered_at else None,
        acknowledged_by=obs.acknowledged_by,
        escalated_after=since(obs.escalated_at),
    )


def _charted(run: ReportedRun, seen: Observed) -> list[str]:
    fired = []
    for (slo, sev, pair), _ in sorted(seen.obs.first_firing.items(), key=lambda kv: kv[1][0]):
        if slo not in fired:
            fired.append(slo)
    tracked = sorted(seen.meter.slos) if seen.meter else []
    named = [run.slo_name(e.slo) for e in run.scenario.expectations if e.slo]
    order = [s for s in named if s in tracked] + [s for s in fired if s in tracked]
    order += [s for s in tracked if s.endswith("availability")]
    return list(dict.fromkeys(order))[:4]


def _chart(run: ReportedRun, observed: Observed) -> Chart | None:
    t0 = observed.obs.t0
    if t0 is None or not observed.samples:
        return None
    slos = _charted(run, observed)
    points = tuple(ChartPoint(offset=round(row["at"] - t0, 3), values={s: row["slos"][s] for s in slos if s in row["slos"]})
                   for row in observed.samples)
    factor = None
    thresholds: dict[str, float] = {}
    for plan in observed.plans:
        for alert in plan.alerts:
            if alert.severity == "page" and alert.long == "1h":
                factor = alert.factor
            if alert.severity == "page" and alert.long in ("5m", "1h"):
                thresholds.setdefault(alert.long, alert.factor)
    prefix = f"{run.user_cfg.service}-"
    stops = []
    for cond in run.scenario.stop_conditions:
        if cond.condition == "budget-spent" and cond.above is not None:
            slo = run.slo_name(cond.slo) if cond.slo else None
            stops.append(Stop(slo=slo, label=(slo or "").removeprefix(prefix), above=cond.above, name=cond.name))
    markers = []
    kinds = {"fault": "fault", "page": "paged", "ack": "ack", "failover": "failover", "ticket": "ticket",
             "vendor": "vendor", "recovered": "recovered", "escalate": "escalated"}
    seen = set()
    for e in run.timeline:
        label = kinds.get(e["kind"])
        if label and label not in seen and not e["message"].startswith("FAILED") and e["at"] >= t0 - 3600:
            seen.add(label)
            markers.append(Marker(offset=round(e["at"] - t0, 3), label=label))
    detect = [at for (slo, sev, pair), (at, a) in observed.obs.first_firing.items() if sev == "page"]
    if detect:
        markers.append(Marker(offset=round(min(detect) - t0, 3), label="detected"))
    return Chart(slos=tuple(slos), labels={s: s.removeprefix(prefix) for s in slos}, points=points,
                 markers=tuple(sorted(markers, key=lambda m: m.offset)), page_factor=factor,
                 thresholds=tuple(Threshold(window=w, factor=thresholds[w]) for w in ("5m", "1h") if w in thresholds),
                 stops=tuple(stops))


def _budget(seen: Observed) -> Budget | None:
    meter = seen.meter
    if meter is None or not seen.samples:
        return None
    last = seen.samples[-1]["slos"]
    rows = []
    for slo in sorted(meter.slos):
        peak = max((row["slos"].get(slo, {}).get("burn_1h") or 0.0 for row in seen.samples), default=0.0)
        rows.append(BudgetRow(slo=slo, spent=(last.get(slo) or {}).get("spent"), peak_burn_1h=peak))
    return Budget(basis=meter.basis, period_days=meter.period_seconds // 86400, slos=tuple(rows))


# ---------------------------------------------------------------------------------------------
# Action items


_ITEMS = {
    "detected": "Detection: {reason}. Check that the burn-rate rules are deployed (`opsctl slo rules`) and the"
                " SLO's selectors match the proxy's series.",
    "paged": "Paging: {reason}. Check the Alertmanager route to the pager and the pager's integration key.",
    "acknowledged": "Acknowledgement: {reason}. Review on-call notification rules and the escalation policy.",
    "escalated": "Escalation: {reason}. Check the escalation policy's levels and timeouts.",
    "failover-applied": "Failover: {reason}. Check capacity (capacity.max_replicas, GPUs) and the traffic guards.",
    "vendor-ticket": "Vendor ticket: {reason}. Map the category to the vendor's serving queue under"
                     " tickets.vendors.<vendor>.categories, and check the channel's credentials.",
    "vendor-responded": "Vendor response: {reason}. Agree routing and response times with the vendor's support.",
    "slo-recovered": "Recovery: {reason}. Check that the mitigation removes the failing backend's share.",
    "change-refused": "Freeze: {reason}. Check the freezes configuration.",
}


# Response targets the measurements are held to (an action item when a step was slower), each
# measured from the step that starts it: (measurement, measured from, target seconds, what, expectation kind).
TARGETS = (
    ("time_to_acknowledge", "time_to_page", 120, "Acknowledgement: acknowledged {took} after the page, against a"
     " target of {target}. Review on-call notification rules and the escalation policy.", "acknowledged"),
    ("time_to_mitigate", "time_to_detect", 300, "Mitigation: failover applied {took} after detection, against a"
     " target of {target}. Automate the failover or shorten the path to it.", "failover-applied"),
    ("time_to_vendor_routing", "time_to_detect", 300, "Vendor ticket: filed {took} after detection, against a"
     " target of {target}. File it from the page (the automation's ticket action).", "vendor-ticket"),
)
DETECTION_SLACK = 60  # detection later than the burn-rate maths' prediction by more than this is an item


def measured_items(report: DrillReport) -> list[str]:
    """Action items from what the drill measured against its targets, each target named."""
    m = report.measurements or Measurements()
    failed = {v.expect for v in report.expectations if v.mark == "FAIL"}
    items = []
    pred = report.prediction
    predicted = pred.predicted_detection_seconds if pred else None
    measured = m.time_to_detect
    if pred and predicted is not None and measured is not None and measured > predicted + DETECTION_SLACK \
            and "detected" not in failed:
        items.append(f"Detection: detected {duration_text(measured)} after the fault, slower than the burn-rate"
                     f" prediction of {duration_text(predicted)} ({pred.slo}). Check the rules' evaluation"
                     " interval, `for:` and the scrape interval against the prediction's assumptions.")
    for key, start, target, text, kind in TARGETS:
        end, begin = m.seconds(key), m.seconds(start)
        if end is None or begin is None or kind in failed:
            continue
        took = end - begin
        if took > target:
            items.append(text.format(took=duration_text(took), target=duration_text(target)))
    return items


def action_items(report: DrillReport) -> list[str]:
    items = []
    if report.refusal:
        items.append(f"The drill did not start: {report.refusal}. Resolve it and run the drill again.")
    if report.abort_reason:
        items.append(f"The drill was aborted: {report.abort_reason}. Find out why, then run it again.")
    for v in report.expectations:
        if v.mark == "FAIL":
            template = _ITEMS.get(v.expect, "{reason}.")
            items.append(f"[{v.name}] " + template.format(reason=v.reason.rstrip(".")))
    for r in report.rollbacks:
        if r.status in ("failed", "skipped"):
            items.append(f"Rollback {r.action} {r.status}: {r.message}. Check it by hand.")
    for problem in report.leftovers:
        items.append(f"Left behind: {problem}. Undo it by hand (`opsctl drill cleanup` retries).")
    items += measured_items(report)
    budget = report.budget
    for row in budget.slos if budget else ():
        if row.spent is not None and row.spent > SPENT_WARNING:
            items.append(f"{row.slo}: this response would spend {row.spent:.0%} of the"
                         f" {budget.period_days if budget else None}-day error budget. Shorten the path to"
                         " mitigation (an automated failover, a faster page, a shorter acknowledgement target).")
    return items
