"""The chain drill's report (`report_model.DrillReport`, built typed once, as the embedded drill's is),
for the drill report writers (Markdown, JSON, HTML).

Hops become the report's expectations (one per hop, with the component's evidence, or the last
evidence seen on the way when it never happened); the scenario's own deadlines are judged on the
same measurements; the timeline is what the components said, in time order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from opsctl.clock import format_rfc3339
from opsctl.drills.report import action_items
from opsctl.drills.report_burn import Prediction
from opsctl.drills.report_model import (
    CHAIN_KEYS,
    Attribution,
    Check,
    DrillReport,
    Event,
    Hypothesis,
    Measurements,
    Probe,
    RollbackResult,
    ScenarioRef,
    Shortened,
    Verdict,
)

if TYPE_CHECKING:
    from opsctl.drills.chain.hops import Hop as ChainHop
    from opsctl.drills.phases import Results
    from opsctl.drills.scenario import Scenario
    from opsctl.drills.state import RunState


class ReportedChain(Protocol):
    """What the chain report reads of its drill (chain.runner.ChainDrill): the scenario, the run
    state, the mode, the onset and the timeline."""

    scenario: Scenario
    state: RunState
    mode: str
    t0: float | None
    timeline: list[dict[str, Any]]


def _fmt(ts: float | None) -> str | None:
    return None if ts is None else format_rfc3339(ts)


def hop_verdicts(hops: Mapping[str, ChainHop], t0: float | None) -> list[Verdict]:
    out = []
    for hop in hops.values():
        if not hop.required and hop.at is None:
            continue
        seconds = None if hop.at is None or t0 is None else round(hop.at - t0, 3)
        if hop.at is None:
            reason = f"{hop.title} never happened" + (f": {hop.failed}" if hop.failed else "") + \
                f"; last evidence: {hop.last}"
        else:
            reason = hop.failed or ""
        out.append(Verdict(name=f"hop {hop.key}: {hop.title} ({hop.component})", expect=f"hop-{hop.key}",
                           passed=hop.passed or not hop.required, within_seconds=None, at=_fmt(hop.at),
                           seconds=seconds, detail=hop.evidence, reason=reason))
    return out


def scenario_verdicts(results: Results) -> tuple[list[Verdict], list[str]]:
    """The scenario's expectations as the drill judged them (chain/observed.py: the embedded drill's
    Judge on what the components showed), and those the chain cannot judge ("not judged here")."""
    from opsctl.drills.expectations import NOT_JUDGED

    verdicts = results.judgement.verdicts if results.judgement else ()
    judged = [Verdict.parse(v.to_dict(_fmt)) for v in verdicts]
    not_judged = [f"{v.name} ({v.expect}: {v.reason[len(NOT_JUDGED) + 2:]})" for v in verdicts
                  if v.reason.startswith(NOT_JUDGED)]
    return judged, not_judged


def chain_prediction_measured(pred: Prediction | None, m: Measurements | None) -> Prediction | None:
    """The prediction made from the fault (drills/prediction.py), with each hop's measured time beside it."""
    if pred is None:
        return None
    from opsctl.drills.prediction import HOPS

    measured = m or Measurements()
    keys = dict(HOPS)
    return pred.update(measured_detection_seconds=measured.time_to_detect,
                       hops=tuple(h.update(seconds=measured.seconds(keys[h.hop]) if h.hop in keys else None)
                                  for h in pred.hops))


def chain_report(drill: ReportedChain, results: Results, outcome: str, exit_code: int,
                 wall_seconds: float) -> DrillReport:
    """The report from the phases' results (lifecycle.Results: the preflight's facts, the method's
    `HopSignals`, the rollbacks); `drill` gives the scenario, the run state and the timeline."""
    from opsctl.drills.phases import Facts, HopSignals, Rollback

    sc, state = drill.scenario, drill.state
    signals = results.signals if isinstance(results.signals, HopSignals) else HopSignals(t0=drill.t0)
    prepared = results.prepared or Facts()
    rollback = results.rollback or Rollback()
    t0, hops = signals.t0, signals.hops
    verdicts = hop_verdicts(hops, t0)
    judged, not_rehearsed = scenario_verdicts(results)
    broken = [h for h in hops.values() if h.required and not h.passed]
    timeline = sorted(drill.timeline, key=lambda e: e["at"])
    # The rollbacks (the restore among them) on the timeline too, as the embedded drill says them:
    # they ran just before the report, so at the drill's end (or after its last event).
    ended = state.data.get("finished_at") or (timeline[-1]["at"] if timeline else None)
    if ended is not None and not any(e["kind"] == "rollback" for e in timeline):
        timeline += [{"at": ended, "phase": "rollbacks", "kind": "rollback",
                      "message": f"{r['action']}: {r['status']}: {r['message']}"} for r in rollback.actions]
    m = None
    if t0 is not None and hops:
        def since(key: str) -> float | None:
            at = hops[key].at
            return None if at is None else round(at - t0, 3)

        m = Measurements(time_to_detect=since("rule-firing"), time_to_page=since("pagerduty"),
                         time_to_acknowledge=since("acknowledged"), time_to_mitigate=since("actuator"),
                         time_to_vendor_routing=since("ticket") if hops["ticket"].passed else None,
                         time_to_vendor_response=None, time_to_recover=None,
                         acknowledged_by=sc.on_call.name if hops["acknowledged"].at else None, escalated_after=None)
    notes = []
    if broken:
        first = broken[0]
        notes.append(f"the chain broke at hop {first.key!r} ({first.title}, {first.component}): "
                     + (first.failed if first.at is not None and first.failed else
                        f"never happened{': ' + first.failed if first.failed else ''}; last evidence: {first.last}"))
    if not_rehearsed:
        notes.append("not judged here (judged by the embedded drill): " + "; ".join(not_rehearsed))
    predicted = signals.prediction
    if predicted is not None:  # what the maths expects not to page
        notes += [text for text in (predicted.no_page, predicted.note) if text]
    report = DrillReport(
        run_id=state.run_id, mode=drill.mode, outcome=outcome, exit_code=exit_code,
        scenario=ScenarioRef(title=sc.title, name=sc.name, path=sc.path, digest=sc.digest,
                             description=sc.description, tags=tuple(sc.tags)),
        started_at=_fmt(state.data["started_at"]), finished_at=_fmt(state.data.get("finished_at")),
        wall_seconds=round(wall_seconds, 3), t0=_fmt(t0), refusal=results.refusal,
        abort_reason=results.abort_reason, crash=results.crash, late_signals=(),
        preflight=tuple(Check.parse(c.to_dict()) for c in prepared.checks),
        hypothesis=Hypothesis(title=sc.hypothesis_title, probes=tuple(
            Probe.parse(p.to_dict()) for p in (results.steady.probes if results.steady else ()))),
        environment=prepared.facts,
        timeline=tuple(Event(at=_fmt(e["at"]), offset=None if t0 is None else round(e["at"] - t0, 3),
                             phase=e["phase"], kind=e["kind"], message=e["message"]) for e in timeline),
        measurements=m,
        expectations=tuple(verdicts + judged),
        hops=tuple(h.report(t0) for h in hops.values()),
        broken_hop=broken[0].key if broken else None,
        attribution=tuple(Attribution(fault=a["fault"], kind=a["kind"], backend=a["backend"], hop=a["hop"],
                                      seen=a["seen"]) for a in signals.attribution),
        shortened=tuple(Shortened.parse(s) for s in prepared.facts.get("shortened", [])),
        rollbacks=tuple(RollbackResult.parse(r) for r in rollback.actions), leftovers=tuple(rollback.leftovers),
        clean=not rollback.failed,
        budget=signals.budget, chart=None, runbook=None,
        window=state.data.get("window"),
        note=" · ".join(notes) or None,
        prediction=chain_prediction_measured(signals.prediction, m),
    ).with_keys(*CHAIN_KEYS)
    return report.replace(action_items=tuple(action_items(report)))
