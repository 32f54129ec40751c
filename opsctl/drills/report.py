"""Drill reports: one data structure (report.json), rendered as Markdown and a self-contained HTML page.

The data is built from a finished run (`build_report_data`) or, for a drill whose process died,
from its persisted state (`report_from_state`); the renderers read only the data. The HTML page has
inline CSS and an inline SVG chart: no scripts, no external assets, so it can be mailed or attached.
"""

from __future__ import annotations

from opsctl.drills.text import duration_text, rate_text, tolerance_text

import json
import os
from html import escape
from pathlib import Path

from opsctl.clock import format_rfc3339
from opsctl.drills.expectations import verdict_mark
from opsctl.drills.phases import Facts, Observed, Results, Rollback
from opsctl.drills.safety import check_status

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


# ---------------------------------------------------------------------------------------------
# Writers


def write_reports(run_dir: Path, data: dict) -> dict[str, Path]:
    run_dir = Path(run_dir)
    paths = {"md": run_dir / "report.md", "json": run_dir / "report.json", "html": run_dir / "report.html"}
    data = dict(data, reports={k: str(v) for k, v in paths.items()})
    _atomic(paths["json"], json.dumps(data, indent=2, default=str) + "\n")
    _atomic(paths["md"], render_markdown(data))
    _atomic(paths["html"], render_html(data))
    return paths


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _keep_text(seconds) -> str:
    """The rule's `keep_firing_for` (the fast tier's, so its own failover does not resolve it), or '-'."""
    return f"{seconds}s after its condition ends" if seconds else "-"


def _md(text) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def render_markdown(d: dict) -> str:
    sc = d["scenario"]
    lines = [f"# Drill report: {sc['title']}", "",
             f"**Outcome: {d['outcome'].upper()}** (exit {d['exit_code']}) · run `{d['run_id']}` · {d['mode']}"
             + (" (simulated time)" if d["mode"] == "embedded" else " (wall clock)")
             + (f" · {d['wall_seconds']:.1f} s of wall time" if d.get("wall_seconds") is not None else ""), ""]
    if d.get("refusal"):
        lines += [f"> **Refused:** {d['refusal']}", ""]
    if d.get("abort_reason"):
        lines += [f"> **Aborted:** {d['abort_reason']}", ""]
    if d.get("note"):
        lines += [f"> {d['note']}", ""]
    lines += ["## Scenario", "", sc.get("description") or "", "",
              f"- file: `{sc['path']}` (sha256 {sc.get('digest') or '-'})"]
    if d.get("runbook"):
        lines.append(f"- runbook it rehearses: `{d['runbook']}`")
    lines.append(f"- started {d.get('started_at')}, fault (t0) at {d.get('t0') or '-'}")
    if d.get("sim"):
        s = d["sim"]
        lines.append(f"- simulated {s['start']} to {s['end']} ({duration_text(s['simulated_seconds'])})")
    if sc.get("tags"):
        lines.append(f"- tags: {', '.join(sc['tags'])}")
    lines.append("")
    if d.get("preflight"):
        lines += ["### Preflight", "", "| check | result |", "|---|---|"]
        lines += [f"| {_md(c['name'])} | {check_status(c)}: {_md(c['message'])} |" for c in d["preflight"]]
        lines.append("")
    hyp = d.get("hypothesis") or {}
    if hyp.get("probes"):
        lines += [f"### Steady-state hypothesis: {hyp.get('title') or ''}", "",
                  "| probe | tolerance | observed | result |", "|---|---|---|---|"]
        lines += [f"| {_md(p['name'])} | {_md(tolerance_text(p['tolerance']))} | {_md(p['observed'])} | {'ok' if p['ok'] else 'DEVIATES'} |"
                  for p in hyp["probes"]]
        lines.append("")
    m = d.get("measurements") or {}
    if m:
        lines += ["## Response times (from the fault)", "", "| step | time | what |", "|---|---|---|"]
        lines += [f"| {label} | {duration_text(m.get(key))} | {what} |" for key, label, what in MEASURES]
        lines.append("")
    pred = d.get("prediction") or {}
    if pred:
        burn = f"{pred['burn']:.1f}x" if pred.get("burn") is not None else "unknown"
        lines += ["## The burn-rate maths' prediction, and what each hop cost", "",
                  f"{pred['slo']}: the fault burns {burn} ({pred.get('burn_basis')}); predicted detection"
                  f" {duration_text(pred.get('predicted_detection_seconds'))}, measured"
                  f" {duration_text(pred.get('measured_detection_seconds'))}.", "",
                  "| alert | windows | factor | for | keeps firing | predicted | how |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {t['alert']} ({t['tier']}) | {t['long']}/{t['short']} | {t['factor']:g}x | {t['for_seconds']}s |"
                  f" {_keep_text(t.get('keep_firing_seconds'))} | {duration_text(t['predicted_seconds'])} | {_md(t['why'])} |"
                  for t in pred["tiers"]]
        response = pred.get("response")
        if response and "group_wait_seconds" not in pred:  # embedded and live: the response hops predicted
            policies = ", ".join(response["policies"]) or "none"
            lines += ["", f"After detection: {response['alert']} ({response['tier']}, cause {response['cause']}) pages"
                      f" after {response['page_wait_seconds']:g}s and reaches serve after"
                      f" {response['delivery_wait_seconds']:g}s; the policies it matches ({policies}) act as it"
                      f" arrives" + (f", the ticket in {response['ticket_category']!r}" if response["ticket_category"]
                                     else "") + ".", "",
                      "| hop | predicted | from the fault | budget spent by then | how |", "|---|---|---|---|---|"]
            lines += [f"| {h['hop']} | {duration_text(h.get('predicted_seconds'))} | {duration_text(h['seconds'])} |"
                      f" {'-' if h['budget_spent'] is None else format(h['budget_spent'], '.2%')} | {_md(h.get('why', ''))} |"
                      for h in pred["hops"]]
        elif any("predicted_seconds" in h for h in pred["hops"]):  # the chain drill: predicted from the fault
            follow = (f" mitigation and the ticket: detection + the opsctl route's group_wait"
                      f" {response['delivery_wait_seconds']:g}s to serve, where {', '.join(response['policies']) or 'no policy'}"
                      " acts as it arrives" + (f" (the ticket in {response['ticket_category']!r})"
                                              if response.get("ticket_category") else "") + "."
                      if response else " mitigation and the ticket follow the notification to serve (not predicted).")
            lines += ["", f"Predicted page: detection + Alertmanager's group_wait {pred.get('group_wait_seconds', 0):g}s;"
                      + follow, "",
                      "| hop | predicted | measured |", "|---|---|---|"]
            lines += [f"| {h['hop']} | {duration_text(h['predicted_seconds'])} | {duration_text(h['seconds'])} |"
                      for h in pred["hops"]]
        else:
            lines += ["", "| hop | from the fault | budget spent by then |", "|---|---|---|"]
            lines += [f"| {h['hop']} | {duration_text(h['seconds'])} |"
                      f" {'-' if h['budget_spent'] is None else format(h['budget_spent'], '.2%')} |" for h in pred["hops"]]
        lines.append("")
    if d.get("expectations"):
        lines += ["## Expectations", "", "| | expectation | deadline | met at | observed / reason |", "|---|---|---|---|---|"]
        for v in d["expectations"]:
            mark = verdict_mark(v)
            text = v["detail"] if v["passed"] else v["reason"]
            lines.append(f"| {mark} | {_md(v['name'])} | {duration_text(v['within_seconds'])} |"
                         f" {duration_text(v['seconds'])} | {_md(text)} |")
        lines.append("")
    lines += _chain_markdown(d)
    budget = d.get("budget") or {}
    if budget.get("slos"):
        lines += ["## Error budget", "", f"{budget['basis']}.", "", "| SLO | spent by the drill | peak burn (1h) |",
                  "|---|---|---|"]
        for row in budget["slos"]:
            spent = "-" if row["spent"] is None else f"{row['spent'] * 100:.1f}%"
            lines.append(f"| {row['slo']} | {spent} | {rate_text(row['peak_burn_1h'])} |")
        lines.append("")
    timeline = d.get("timeline", [])
    key = key_events(timeline)
    lines += ["## Timeline", "", "| time | since fault | event | |", "|---|---|---|---|"]
    for e in key:
        lines.append(f"| {e['at']} | {duration_text(e['offset'])} | {e['kind']} | {_md(e['message'])} |")
    if len(key) < len(timeline):
        lines += ["", f"<details><summary>All {len(timeline)} events (checks, probes, the automation's"
                  " bookkeeping, verdicts)</summary>", "",
                  "| time | since fault | phase | event | |", "|---|---|---|---|---|"]
        for e in timeline:
            lines.append(f"| {e['at']} | {duration_text(e['offset'])} | {e['phase']} | {e['kind']} | {_md(e['message'])} |")
        lines += ["", "</details>"]
    lines += ["", "## Rollbacks", ""]
    if d.get("rollbacks"):
        lines += ["| action | status | |", "|---|---|---|"]
        lines += [f"| {r['action']} | {r['status']} | {_md(r['message'])} |" for r in d["rollbacks"]]
        lines.append("")
    lines.append("Nothing left behind." if d.get("clean") else
                 "**Left behind:** " + "; ".join(d.get("leftovers") or ["a rollback failed"]))
    lines += ["", "## Action items", ""]
    lines += [f"- {item}" for item in d.get("action_items") or []] or ["- none: every expectation and response target was met"]
    lines.append("")
    return "\n".join(lines)


def _chain_markdown(d: dict) -> list[str]:
    """A chain drill's extras: what each fault broke and what was seen, and the shortened timings."""
    lines = []
    if d.get("hops"):
        lines += ["## Hops from the fault", "", "| hop | component | from the fault | |", "|---|---|---|---|"]
        for h in d["hops"]:
            state = "ok" if h.get("passed") else ("never happened" if h.get("seconds") is None else "FAILED")
            if not h.get("required") and h.get("seconds") is None:
                state = "not required"
            lines.append(f"| {_md(h['title'])} | {_md(h['component'])} | {duration_text(h.get('seconds'))} |"
                         f" {_md(state + (': ' + h['failed'] if h.get('failed') else ''))} |")
        lines.append("")
    if d.get("attribution"):
        lines += ["## What the faults broke", ""] + [f"- **{a['hop']}**: {a['seen']}" for a in d["attribution"]] + [""]
    if d.get("shortened"):
        lines += ["## Timings shortened for the drill", "", "| setting | configured | in the drill | why |",
                  "|---|---|---|---|"]
        lines += [f"| {_md(s['where'])} | {s['was']} | {s['now']} | {_md(s['why'])} |" for s in d["shortened"]]
        lines.append("")
    return lines


def _chain_html(d: dict) -> list[str]:
    parts = []
    if d.get("attribution"):
        parts.append("<h2>What the faults broke</h2><ul>")
        parts += [f"<li><b>{escape(a['hop'])}</b>: {escape(a['seen'])}</li>" for a in d["attribution"]]
        parts.append("</ul>")
    if d.get("shortened"):
        parts.append("<h2>Timings shortened for the drill</h2>")
        parts.append(_table(["setting", "configured", "in the drill", "why"],
                            [[s["where"], s["was"], s["now"], s["why"]] for s in d["shortened"]]))
    return parts


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:960px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.5em 0}
td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:bold}
.passed{background:#2e7d32}.failed,.aborted{background:#c62828}.refused{background:#ef6c00}
.pass{color:#2e7d32;font-weight:bold}.fail{color:#c62828;font-weight:bold}.skip{color:#757575;font-style:italic}
.note{background:#fff3e0;border-left:4px solid #ef6c00;padding:.5em 1em}
code{background:#f4f4f4;padding:1px 4px}
.nowrap{white-space:nowrap}details{margin:.5em 0}summary{cursor:pointer;color:#555}
"""


def render_html(d: dict) -> str:
    from opsctl.drills.svg import burn_chart, hop_waterfall

    e = escape
    sc = d["scenario"]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Drill report: {e(sc['title'])}</title>", f"<style>{_CSS}</style></head><body>",
        f"<h1>Drill report: {e(sc['title'])}</h1>",
        f'<p><span class="badge {e(d["outcome"])}">{e(d["outcome"].upper())}</span> exit {d["exit_code"]} ·'
        f' run <code>{e(d["run_id"])}</code> · {e(d["mode"])}'
        + (f" · {d['wall_seconds']:.1f} s wall time" if d.get("wall_seconds") is not None else "") + "</p>",
    ]
    for key, label in (("refusal", "Refused"), ("abort_reason", "Aborted"), ("note", "Note")):
        if d.get(key):
            parts.append(f'<p class="note"><b>{label}:</b> {e(str(d[key]))}</p>')
    parts += ["<h2>Scenario</h2>", f"<p>{e(sc.get('description') or '')}</p>",
              f"<p>File <code>{e(sc['path'])}</code>; started {e(str(d.get('started_at')))};"
              f" fault (t0) at {e(str(d.get('t0') or '-'))}."
              + (f" Runbook it rehearses: <code>{e(d['runbook'])}</code>." if d.get("runbook") else "") + "</p>"]
    if d.get("preflight"):
        parts.append("<h3>Preflight</h3>")
        parts.append(_table(["check", "result", ""], [
            [c["name"], (check_status(c), _CLASS[check_status(c)]), c["message"]] for c in d["preflight"]]))
    hyp = d.get("hypothesis") or {}
    if hyp.get("probes"):
        parts.append(f"<h3>Steady-state hypothesis: {e(hyp.get('title') or '')}</h3>")
        parts.append(_table(["probe", "tolerance", "observed", "result"],
                            [[p["name"], tolerance_text(p["tolerance"]), p["observed"],
                              ("ok", "pass") if p["ok"] else ("DEVIATES", "fail")] for p in hyp["probes"]]))
    m = d.get("measurements") or {}
    if m:
        parts.append("<h2>Response times (from the fault)</h2>")
        parts.append(_table(["step", "time", "what"], [[label, duration_text(m.get(key)), what]
                                                       for key, label, what in MEASURES]))
    if d.get("expectations"):
        parts.append("<h2>Expectations</h2>")
        parts.append(_table(["", "expectation", "deadline", "met at", "observed / reason"], [
            [(verdict_mark(v), _CLASS[verdict_mark(v)]), v["name"], duration_text(v["within_seconds"]),
             duration_text(v["seconds"]), v["detail"] if v["passed"] else v["reason"]] for v in d["expectations"]]))
    parts += _chain_html(d)
    if d.get("hops"):
        parts.append('<h2 id="hop-waterfall">Hops from the fault</h2>')
        parts.append(hop_waterfall(d["hops"]))
    if d.get("chart") or not d.get("hops"):
        parts.append('<h2 id="burn-chart">Error budget burn</h2>')
        parts.append(burn_chart(d.get("chart") or {}))
    budget = d.get("budget") or {}
    if budget.get("slos"):
        parts.append(f"<p>{e(budget['basis'])}.</p>")
        parts.append(_table(["SLO", "spent by the drill", "peak burn (1h)"], [
            [r["slo"], "-" if r["spent"] is None else f"{r['spent'] * 100:.1f}%", rate_text(r['peak_burn_1h'])]
            for r in budget["slos"]]))
    timeline = d.get("timeline", [])
    key_rows = key_events(timeline)
    parts.append('<h2 id="timeline">Timeline</h2>')
    parts.append(_table(["time", "since fault", "event", ""], [
        [(t["at"], "nowrap"), (duration_text(t["offset"]), "nowrap"), t["kind"], t["message"]] for t in key_rows]))
    if len(key_rows) < len(timeline):
        parts.append(f'<details id="all-events"><summary>All {len(timeline)} events (checks, probes, the'
                     " automation's bookkeeping, verdicts)</summary>")
        parts.append(_table(["time", "since fault", "phase", "event", ""], [
            [(t["at"], "nowrap"), (duration_text(t["offset"]), "nowrap"), t["phase"], t["kind"], t["message"]]
            for t in timeline]))
        parts.append("</details>")
    parts.append("<h2>Rollbacks</h2>")
    if d.get("rollbacks"):
        parts.append(_table(["action", "status", ""], [[r["action"], r["status"], r["message"]] for r in d["rollbacks"]]))
    parts.append("<p>Nothing left behind.</p>" if d.get("clean") else
                 f'<p class="fail">Left behind: {e("; ".join(d.get("leftovers") or ["a rollback failed"]))}</p>')
    parts.append("<h2>Action items</h2><ul>")
    parts += [f"<li>{e(item)}</li>" for item in d.get("action_items") or []] or ["<li>none: every expectation and response target was met</li>"]
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"


_CLASS = {"ok": "pass", "PASS": "pass", "REFUSED": "fail", "FAIL": "fail", "skipped": "skip", "not evaluated": "skip"}


def _table(headers: list[str], rows: list[list]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>"]
    for row in rows:
        cells = []
        for cell in row:
            if isinstance(cell, tuple):
                cells.append(f'<td class="{cell[1]}">{escape(str(cell[0]))}</td>')
            else:
                cells.append(f"<td>{escape(str(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)
