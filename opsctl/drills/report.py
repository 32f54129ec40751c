"""Drill reports: one data structure (report.json), built from a finished run (`build_report_data`)
or, for a drill whose process died, from its persisted state (`report_from_state`), with the action
items read from it. `drills.render` writes it as JSON, Markdown and a self-contained HTML page.
"""

from __future__ import annotations

import os

from opsctl.clock import format_rfc3339
from opsctl.drills.expectations import verdict_mark
from opsctl.drills.phases import Facts, Observed, Results, Rollback
from opsctl.drills.text import duration_text

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


def build_report_data(run, results: Results, outcome: str, exit_code: int, wall_seconds: float) -> dict:
    """The embedded and live drill's report, from the phases' results (lifecycle.Results): the
    preflight's facts, the steady state's probes, the method's `Observed`, the judgement's
    verdicts and the rollbacks; `run` gives the scenario, the config and the timeline."""
    sc, state = run.scenario, run.state
    prepared = results.prepared or Facts()
    seen = results.signals if isinstance(results.signals, Observed) else Observed()
    rollback = results.rollback or Rollback()
    obs = seen.obs
    t0 = obs.t0
    data = _base(state, sc, outcome, exit_code)
    data.update(
        wall_seconds=round(wall_seconds, 3),
        t0=_fmt(t0),
        refusal=results.refusal,
        abort_reason=results.abort_reason,
        crash=results.crash,
        late_signals=run.late_signals,
        preflight=[c.to_dict() for c in prepared.checks],
        hypothesis={"title": sc.hypothesis_title, "probes": [p.to_dict() for p in
                                                              (results.steady.probes if results.steady else ())]},
        environment=prepared.facts,
        timeline=_timeline(run.timeline, t0),
        measurements=_measurements(obs),
        automation={"actions": [{**a, "at": _fmt(a["at"]), "offset": None if t0 is None else round(a["at"] - t0, 3)}
                                for a in obs.automation],
                    "unmatched": [{"at": _fmt(at), "alert": what} for at, what in obs.unmatched],
                    "engine": obs.engine},
        expectations=[v.to_dict(_fmt) for v in (results.judgement.verdicts if results.judgement else ())],
        rollbacks=list(rollback.actions),
        leftovers=list(rollback.leftovers),
        clean=not rollback.leftovers and not rollback.failed,
        budget=_budget(seen),
        chart=_chart(run, seen),
        runbook=_runbook(run),
    )
    if run.mode == "embedded" and run.env_open and getattr(run.env, "start", None) is not None:
        data["sim"] = {"start": _fmt(run.env.start), "end": _fmt(run.env.clock.now()),
                       "simulated_seconds": round(run.env.clock.now() - run.env.start, 1),
                       "resimulations": getattr(run.env.world, "simulations", None)}
    from opsctl.drills.prediction import prediction

    data["prediction"] = prediction(run, seen, data["measurements"])
    data["action_items"] = action_items(data)
    return data


def report_from_state(state, *, reason: str, rollbacks: list[dict], leftovers: list[str]) -> dict:
    """The report of an interrupted drill, from what its state file holds."""
    d = state.data
    t0 = d.get("t0")
    scenario = {"title": d["scenario"]["title"], "name": d["scenario"]["name"], "path": d["scenario"]["path"],
                "digest": d["scenario"].get("digest"), "description": "", "tags": []}
    data = {
        "run_id": d["run_id"], "mode": d["mode"], "outcome": "aborted", "exit_code": 1, "scenario": scenario,
        "started_at": _fmt(d["started_at"]), "finished_at": _fmt(d.get("finished_at")), "wall_seconds": None,
        "t0": _fmt(t0), "refusal": None, "abort_reason": reason, "crash": None, "late_signals": [],
        "preflight": [], "hypothesis": {"title": "", "probes": []}, "environment": {},
        "timeline": _timeline(d.get("timeline") or [], t0),
        "measurements": {}, "expectations": [], "rollbacks": rollbacks, "leftovers": leftovers,
        "clean": not leftovers and not any(r["status"] == "failed" for r in rollbacks),
        "budget": {}, "chart": {}, "note": "the drill was interrupted: expectations were not judged",
    }
    data["action_items"] = action_items(data)
    return data


def _base(state, sc, outcome, exit_code) -> dict:
    return {
        "run_id": state.run_id, "mode": state.mode, "outcome": outcome, "exit_code": exit_code,
        "scenario": {"title": sc.title, "name": sc.name, "path": sc.path, "digest": sc.digest,
                     "description": sc.description, "tags": list(sc.tags)},
        "started_at": _fmt(state.data["started_at"]), "finished_at": _fmt(state.data.get("finished_at")),
    }


def _runbook(run) -> str | None:
    """The generated runbook this drill rehearses (runbooks/scenario-<name>.md), when there is one."""
    cfg = run.user_cfg
    path = cfg.path(cfg.runbooks.dir) / f"scenario-{run.scenario.runbook or run.scenario.name}.md"
    if not path.is_file():
        return None
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


# The timeline rows a reader needs (fault on and off, alerts fired and resolved, page, ack, escalation,
# failover, ticket, vendor, traffic restored, recovered, stop conditions and aborts); the rest
# (checks, probes, setup, the automation's bookkeeping, expectation verdicts) is in the details.
KEY_KINDS = frozenset({"fault", "alert", "page", "ack", "escalate", "failover", "ticket", "vendor", "traffic",
                       "rollback", "recovered", "refused", "abort", "deadline", "leftover", "budget"})


def key_events(timeline: list[dict]) -> list[dict]:
    return [t for t in timeline if t["kind"] in KEY_KINDS]


def _timeline(events: list[dict], t0: float | None) -> list[dict]:
    return [{"at": _fmt(e["at"]), "offset": None if t0 is None else round(e["at"] - t0, 3), "phase": e["phase"],
             "kind": e["kind"], "message": e["message"]} for e in events]


def _measurements(obs) -> dict:
    t0 = obs.t0
    if t0 is None:
        return {}

    def since(ts):
        return None if ts is None else round(ts - t0, 3)

    detect = [at for (slo, sev, pair), (at, a) in obs.first_firing.items() if sev == "page" and at >= t0]
    mitigated = [e["ts"] for e in obs.failovers]
    routed = [t.filed_at for t in obs.tickets if t.filed_at is not None and t.routed_value is not None]
    responded = [t.first_response_at for t in obs.tickets if t.first_response_at is not None]
    return {
        "time_to_detect": since(min(detect)) if detect else None,
        "time_to_page": since(obs.paged_at),
        "time_to_acknowledge": since(obs.acknowledged_at),
        "time_to_mitigate": since(min(mitigated)) if mitigated else None,
        "time_to_vendor_routing": since(min(routed)) if routed else None,
        "time_to_vendor_response": since(min(responded)) if responded else None,
        "time_to_recover": since(min(obs.recovered_at.values())) if obs.recovered_at else None,
        "acknowledged_by": obs.acknowledged_by,
        "escalated_after": since(obs.escalated_at),
    }


def _charted(run, seen) -> list[str]:
    fired = []
    for (slo, sev, pair), _ in sorted(seen.obs.first_firing.items(), key=lambda kv: kv[1][0]):
        if slo not in fired:
            fired.append(slo)
    tracked = sorted(seen.meter.slos) if seen.meter else []
    named = [run.slo_name(e.slo) for e in run.scenario.expectations if e.slo]
    order = [s for s in named if s in tracked] + [s for s in fired if s in tracked]
    order += [s for s in tracked if s.endswith("availability")]
    return list(dict.fromkeys(order))[:4]


def _chart(run, observed) -> dict:
    t0 = observed.obs.t0
    if t0 is None or not observed.samples:
        return {}
    slos = _charted(run, observed)
    points = [{"offset": round(row["at"] - t0, 3),
               "values": {s: row["slos"][s] for s in slos if s in row["slos"]}} for row in observed.samples]
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
            stops.append({"slo": slo, "label": (slo or "").removeprefix(prefix), "above": cond.above,
                          "name": cond.name})
    markers = []
    kinds = {"fault": "fault", "page": "paged", "ack": "ack", "failover": "failover", "ticket": "ticket",
             "vendor": "vendor", "recovered": "recovered", "escalate": "escalated"}
    seen = set()
    for e in run.timeline:
        label = kinds.get(e["kind"])
        if label and label not in seen and not e["message"].startswith("FAILED") and e["at"] >= t0 - 3600:
            seen.add(label)
            markers.append({"offset": round(e["at"] - t0, 3), "label": label})
    detect = [at for (slo, sev, pair), (at, a) in observed.obs.first_firing.items() if sev == "page"]
    if detect:
        markers.append({"offset": round(min(detect) - t0, 3), "label": "detected"})
    return {"slos": slos, "labels": {s: s.removeprefix(prefix) for s in slos}, "points": points,
            "markers": sorted(markers, key=lambda m: m["offset"]), "page_factor": factor,
            "thresholds": [{"window": w, "factor": thresholds[w]} for w in ("5m", "1h") if w in thresholds],
            "stops": stops}


def _budget(seen) -> dict:
    meter = seen.meter
    if meter is None or not seen.samples:
        return {}
    last = seen.samples[-1]["slos"]
    rows = []
    for slo in sorted(meter.slos):
        peak = max((row["slos"].get(slo, {}).get("burn_1h") or 0.0 for row in seen.samples), default=0.0)
        rows.append({"slo": slo, "spent": (last.get(slo) or {}).get("spent"), "peak_burn_1h": peak})
    return {"basis": meter.basis, "period_days": meter.period_seconds // 86400, "slos": rows}


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


def measured_items(data: dict) -> list[str]:
    """Action items from what the drill measured against its targets, each target named."""
    m = data.get("measurements") or {}
    failed = {v.get("expect") for v in data.get("expectations", []) if verdict_mark(v) == "FAIL"}
    items = []
    pred = data.get("prediction") or {}
    predicted, measured = pred.get("predicted_detection_seconds"), m.get("time_to_detect")
    if predicted is not None and measured is not None and measured > predicted + DETECTION_SLACK \
            and "detected" not in failed:
        items.append(f"Detection: detected {duration_text(measured)} after the fault, slower than the burn-rate"
                     f" prediction of {duration_text(predicted)} ({pred.get('slo')}). Check the rules' evaluation"
                     " interval, `for:` and the scrape interval against the prediction's assumptions.")
    for key, start, target, text, kind in TARGETS:
        end, begin = m.get(key), m.get(start)
        if end is None or begin is None or kind in failed:
            continue
        took = end - begin
        if took > target:
            items.append(text.format(took=duration_text(took), target=duration_text(target)))
    return items


def action_items(data: dict) -> list[str]:
    items = []
    if data.get("refusal"):
        items.append(f"The drill did not start: {data['refusal']}. Resolve it and run the drill again.")
    if data.get("abort_reason"):
        items.append(f"The drill was aborted: {data['abort_reason']}. Find out why, then run it again.")
    for v in data.get("expectations", []):
        if verdict_mark(v) == "FAIL":
            template = _ITEMS.get(v["expect"], "{reason}.")
            items.append(f"[{v['name']}] " + template.format(reason=v["reason"].rstrip(".")))
    for r in data.get("rollbacks", []):
        if r["status"] in ("failed", "skipped"):
            items.append(f"Rollback {r['action']} {r['status']}: {r['message']}. Check it by hand.")
    for problem in data.get("leftovers", []):
        items.append(f"Left behind: {problem}. Undo it by hand (`opsctl drill cleanup` retries).")
    items += measured_items(data)
    budget = data.get("budget") or {}
    for row in budget.get("slos", []):
        if row.get("spent") is not None and row["spent"] > SPENT_WARNING:
            items.append(f"{row['slo']}: this response would spend {row['spent']:.0%} of the"
                         f" {budget.get('period_days')}-day error budget. Shorten the path to mitigation"
                         " (an automated failover, a faster page, a shorter acknowledgement target).")
    return items
