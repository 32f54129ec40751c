"""A drill report's files: report.json, report.md and report.html, written atomically from the
typed report (`drills.report_model.DrillReport`, built by `drills.report`); the renderers read only
its fields. The HTML page has inline CSS and
an inline SVG chart: no scripts, no external assets, so it can be mailed or attached.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from opsctl.drills.report import MEASURES, key_events
from opsctl.drills.report_model import DrillReport, Number, Prediction
from opsctl.drills.text import duration_text, rate_text, tolerance_text
from opsctl.statefile import write_text_atomic

REPORT_MODE = 0o644  # reports are read by people and attached to postmortems; they hold no secret



def write_reports(run_dir: Path, report: DrillReport) -> dict[str, Path]:
    run_dir = Path(run_dir)
    paths = {"md": run_dir / "report.md", "json": run_dir / "report.json", "html": run_dir / "report.html"}
    report = report.replace(reports={k: str(v) for k, v in paths.items()})
    for kind, text in (("json", report.json_text()), ("md", render_markdown(report)), ("html", render_html(report))):
        write_text_atomic(paths[kind], text, mode=REPORT_MODE)
    return paths


def _keep_text(seconds: Number | None) -> str:
    """The rule's `keep_firing_for` (the fast tier's, so its own failover does not resolve it), or '-'."""
    return f"{seconds}s after its condition ends" if seconds else "-"


def _md(text: Any) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def _burn(rate: Number | None) -> str:
    return "-" if rate is None else rate_text(rate)


def _spent(share: Number | None) -> str:
    return "-" if share is None else format(share, ".2%")


def render_markdown(d: DrillReport) -> str:
    sc = d.scenario
    lines = [f"# Drill report: {sc.title}", "",
             f"**Outcome: {d.outcome.upper()}** (exit {d.exit_code}) · run `{d.run_id}` · {d.mode}"
             + (" (simulated time)" if d.mode == "embedded" else " (wall clock)")
             + (f" · {d.wall_seconds:.1f} s of wall time" if d.wall_seconds is not None else ""), ""]
    if d.refusal:
        lines += [f"> **Refused:** {d.refusal}", ""]
    if d.abort_reason:
        lines += [f"> **Aborted:** {d.abort_reason}", ""]
    if d.note:
        lines += [f"> {d.note}", ""]
    lines += ["## Scenario", "", sc.description or "", "",
              f"- file: `{sc.path}` (sha256 {sc.digest or '-'})"]
    if d.runbook:
        lines.append(f"- runbook it rehearses: `{d.runbook}`")
    lines.append(f"- started {d.started_at}, fault (t0) at {d.t0 or '-'}")
    if d.sim:
        s = d.sim
        lines.append(f"- simulated {s.start} to {s.end} ({duration_text(s.simulated_seconds)})")
    if sc.tags:
        lines.append(f"- tags: {', '.join(sc.tags)}")
    lines.append("")
    if d.preflight:
        lines += ["### Preflight", "", "| check | result |", "|---|---|"]
        lines += [f"| {_md(c.name)} | {c.shown}: {_md(c.message)} |" for c in d.preflight]
        lines.append("")
    hyp = d.hypothesis
    if hyp.probes:
        lines += [f"### Steady-state hypothesis: {hyp.title or ''}", "",
                  "| probe | tolerance | observed | result |", "|---|---|---|---|"]
        lines += [f"| {_md(p.name)} | {_md(tolerance_text(p.tolerance))} | {_md(p.observed)} | {'ok' if p.ok else 'DEVIATES'} |"
                  for p in hyp.probes]
        lines.append("")
    m = d.measurements
    if m:
        lines += ["## Response times (from the fault)", "", "| step | time | what |", "|---|---|---|"]
        lines += [f"| {label} | {duration_text(m.seconds(key))} | {what} |" for key, label, what in MEASURES]
        lines.append("")
    pred = d.prediction
    if pred:
        lines += _prediction_markdown(pred)
    if d.expectations:
        lines += ["## Expectations", "", "| | expectation | deadline | met at | observed / reason |", "|---|---|---|---|---|"]
        for v in d.expectations:
            text = v.detail if v.passed else v.reason
            lines.append(f"| {v.mark} | {_md(v.name)} | {duration_text(v.within_seconds)} |"
                         f" {duration_text(v.seconds)} | {_md(text)} |")
        lines.append("")
    lines += _chain_markdown(d)
    budget = d.budget
    if budget and budget.slos:
        lines += ["## Error budget", "", f"{budget.basis}.", "", "| SLO | spent by the drill | peak burn (1h) |",
                  "|---|---|---|"]
        for row in budget.slos:
            spent = "-" if row.spent is None else f"{row.spent * 100:.1f}%"
            lines.append(f"| {row.slo} | {spent} | {_burn(row.peak_burn_1h)} |")
        lines.append("")
    timeline = d.timeline
    key = key_events(timeline)
    lines += ["## Timeline", "", "| time | since fault | event | |", "|---|---|---|---|"]
    for e in key:
        lines.append(f"| {e.at} | {duration_text(e.offset)} | {e.kind} | {_md(e.message)} |")
    if len(key) < len(timeline):
        lines += ["", f"<details><summary>All {len(timeline)} events (checks, probes, the automation's"
                  " bookkeeping, verdicts)</summary>", "",
                  "| time | since fault | phase | event | |", "|---|---|---|---|---|"]
        for e in timeline:
            lines.append(f"| {e.at} | {duration_text(e.offset)} | {e.phase} | {e.kind} | {_md(e.message)} |")
        lines += ["", "</details>"]
    lines += ["", "## Rollbacks", ""]
    if d.rollbacks:
        lines += ["| action | status | |", "|---|---|---|"]
        lines += [f"| {r.action} | {r.status} | {_md(r.message)} |" for r in d.rollbacks]
        lines.append("")
    lines.append("Nothing left behind." if d.clean else
                 "**Left behind:** " + "; ".join(d.leftovers or ["a rollback failed"]))
    lines += ["", "## Action items", ""]
    lines += [f"- {item}" for item in d.action_items] or ["- none: every expectation and response target was met"]
    lines.append("")
    return "\n".join(lines)


def _prediction_markdown(pred: Prediction) -> list[str]:
    burn = f"{pred.burn:.1f}x" if pred.burn is not None else "unknown"
    lines = ["## The burn-rate maths' prediction, and what each hop cost", "",
             f"{pred.slo}: the fault burns {burn} ({pred.burn_basis}); predicted detection"
             f" {duration_text(pred.predicted_detection_seconds)}, measured"
             f" {duration_text(pred.measured_detection_seconds)}.", ""]
    if pred.fault is not None:  # a later fault than the first pages first (prediction.first_page)
        lines += [f"Predicted from fault {pred.fault + 1} ({pred.fault_kind}), the earliest page over all faults,"
                  f" injected {duration_text(pred.onset_seconds)} after the first: the tiers' times are after its"
                  " onset, detection and every hop after the first fault.", ""]
    lines += ["| alert | windows | factor | for | keeps firing | predicted | how |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {t.alert} ({t.tier}) | {t.long}/{t.short} | {t.factor:g}x | {t.for_seconds}s |"
              f" {_keep_text(t.keep_firing_seconds)} | {duration_text(t.predicted_seconds)} | {_md(t.why)} |"
              for t in pred.tiers]
    response = pred.response
    if response and "group_wait_seconds" not in pred.keys():  # embedded and live: the response hops predicted
        policies = ", ".join(response.policies) or "none"
        lines += ["", f"After detection: {response.alert} ({response.tier}, cause {response.cause}) pages"
                  f" after {response.page_wait_seconds:g}s and reaches serve after"
                  f" {response.delivery_wait_seconds:g}s; the policies it matches ({policies}) act as it"
                  f" arrives" + (f", the ticket in {response.ticket_category!r}" if response.ticket_category
                                 else "") + ".", "",
                  "| hop | predicted | from the fault | budget spent by then | how |", "|---|---|---|---|---|"]
        lines += [f"| {h.hop} | {duration_text(h.predicted_seconds)} | {duration_text(h.seconds)} |"
                  f" {_spent(h.budget_spent)} | {_md(h.why if 'why' in h.keys() else '')} |" for h in pred.hops]
    elif any("predicted_seconds" in h.keys() for h in pred.hops):  # the chain drill: predicted from the fault
        follow = (f" mitigation and the ticket: detection + the opsctl route's group_wait"
                  f" {response.delivery_wait_seconds:g}s to serve, where {', '.join(response.policies) or 'no policy'}"
                  " acts as it arrives" + (f" (the ticket in {response.ticket_category!r})"
                                          if response.ticket_category else "") + "."
                  if response else " mitigation and the ticket follow the notification to serve (not predicted).")
        lines += ["", f"Predicted page: detection + Alertmanager's group_wait {pred.group_wait_seconds or 0:g}s;"
                  + follow, "",
                  "| hop | predicted | measured |", "|---|---|---|"]
        lines += [f"| {h.hop} | {duration_text(h.predicted_seconds)} | {duration_text(h.seconds)} |"
                  for h in pred.hops]
    else:
        lines += ["", "| hop | from the fault | budget spent by then |", "|---|---|---|"]
        lines += [f"| {h.hop} | {duration_text(h.seconds)} | {_spent(h.budget_spent)} |" for h in pred.hops]
    lines.append("")
    return lines


def _chain_markdown(d: DrillReport) -> list[str]:
    """A chain drill's extras: what each fault broke and what was seen, and the shortened timings."""
    lines = []
    if d.hops:
        lines += ["## Hops from the fault", "", "| hop | component | from the fault | |", "|---|---|---|---|"]
        for h in d.hops:
            state = "ok" if h.passed else ("never happened" if h.seconds is None else "FAILED")
            if not h.required and h.seconds is None:
                state = "not required"
            lines.append(f"| {_md(h.title)} | {_md(h.component)} | {duration_text(h.seconds)} |"
                         f" {_md(state + (': ' + h.failed if h.failed else ''))} |")
        lines.append("")
    if d.attribution:
        lines += ["## What the faults broke", ""] + [f"- **{a.hop}**: {a.seen}" for a in d.attribution] + [""]
    if d.shortened:
        lines += ["## Timings shortened for the drill", "", "| setting | configured | in the drill | why |",
                  "|---|---|---|---|"]
        lines += [f"| {_md(s.where)} | {s.was} | {s.now} | {_md(s.why)} |" for s in d.shortened]
        lines.append("")
    return lines


def _chain_html(d: DrillReport) -> list[str]:
    parts = []
    if d.attribution:
        parts.append("<h2>What the faults broke</h2><ul>")
        parts += [f"<li><b>{escape(a.hop)}</b>: {escape(a.seen)}</li>" for a in d.attribution]
        parts.append("</ul>")
    if d.shortened:
        parts.append("<h2>Timings shortened for the drill</h2>")
        parts.append(table(["setting", "configured", "in the drill", "why"],
                            [[s.where, s.was, s.now, s.why] for s in d.shortened]))
    return parts


CSS = """
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


def render_html(d: DrillReport) -> str:
    from opsctl.drills.svg import burn_chart, hop_waterfall

    e = escape
    sc = d.scenario
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Drill report: {e(sc.title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>Drill report: {e(sc.title)}</h1>",
        f'<p><span class="badge {e(d.outcome)}">{e(d.outcome.upper())}</span> exit {d.exit_code} ·'
        f' run <code>{e(d.run_id)}</code> · {e(d.mode)}'
        + (f" · {d.wall_seconds:.1f} s wall time" if d.wall_seconds is not None else "") + "</p>",
    ]
    for value, label in ((d.refusal, "Refused"), (d.abort_reason, "Aborted"), (d.note, "Note")):
        if value:
            parts.append(f'<p class="note"><b>{label}:</b> {e(str(value))}</p>')
    parts += ["<h2>Scenario</h2>", f"<p>{e(sc.description or '')}</p>",
              f"<p>File <code>{e(sc.path)}</code>; started {e(str(d.started_at))};"
              f" fault (t0) at {e(str(d.t0 or '-'))}."
              + (f" Runbook it rehearses: <code>{e(d.runbook)}</code>." if d.runbook else "") + "</p>"]
    if d.preflight:
        parts.append("<h3>Preflight</h3>")
        parts.append(table(["check", "result", ""], [
            [c.name, (c.shown, _CLASS[c.shown]), c.message] for c in d.preflight]))
    hyp = d.hypothesis
    if hyp.probes:
        parts.append(f"<h3>Steady-state hypothesis: {e(hyp.title or '')}</h3>")
        parts.append(table(["probe", "tolerance", "observed", "result"],
                            [[p.name, tolerance_text(p.tolerance), p.observed,
                              ("ok", "pass") if p.ok else ("DEVIATES", "fail")] for p in hyp.probes]))
    m = d.measurements
    if m:
        parts.append("<h2>Response times (from the fault)</h2>")
        parts.append(table(["step", "time", "what"], [[label, duration_text(m.seconds(key)), what]
                                                       for key, label, what in MEASURES]))
    if d.expectations:
        parts.append("<h2>Expectations</h2>")
        parts.append(table(["", "expectation", "deadline", "met at", "observed / reason"], [
            [(v.mark, _CLASS[v.mark]), v.name, duration_text(v.within_seconds),
             duration_text(v.seconds), v.detail if v.passed else v.reason] for v in d.expectations]))
    parts += _chain_html(d)
    if d.hops:
        parts.append('<h2 id="hop-waterfall">Hops from the fault</h2>')
        parts.append(hop_waterfall(d.hops))
    if d.chart or not d.hops:
        parts.append('<h2 id="burn-chart">Error budget burn</h2>')
        parts.append(burn_chart(d.chart))
    budget = d.budget
    if budget and budget.slos:
        parts.append(f"<p>{e(budget.basis)}.</p>")
        parts.append(table(["SLO", "spent by the drill", "peak burn (1h)"], [
            [r.slo, "-" if r.spent is None else f"{r.spent * 100:.1f}%", _burn(r.peak_burn_1h)]
            for r in budget.slos]))
    timeline = d.timeline
    key_rows = key_events(timeline)
    parts.append('<h2 id="timeline">Timeline</h2>')
    parts.append(table(["time", "since fault", "event", ""], [
        [(t.at, "nowrap"), (duration_text(t.offset), "nowrap"), t.kind, t.message] for t in key_rows]))
    if len(key_rows) < len(timeline):
        parts.append(f'<details id="all-events"><summary>All {len(timeline)} events (checks, probes, the'
                     " automation's bookkeeping, verdicts)</summary>")
        parts.append(table(["time", "since fault", "phase", "event", ""], [
            [(t.at, "nowrap"), (duration_text(t.offset), "nowrap"), t.phase, t.kind, t.message]
            for t in timeline]))
        parts.append("</details>")
    parts.append("<h2>Rollbacks</h2>")
    if d.rollbacks:
        parts.append(table(["action", "status", ""], [[r.action, r.status, r.message] for r in d.rollbacks]))
    parts.append("<p>Nothing left behind.</p>" if d.clean else
                 f'<p class="fail">Left behind: {e("; ".join(d.leftovers or ["a rollback failed"]))}</p>')
    parts.append("<h2>Action items</h2><ul>")
    parts += [f"<li>{e(item)}</li>" for item in d.action_items] or ["<li>none: every expectation and response target was met</li>"]
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"


_CLASS = {"ok": "pass", "PASS": "pass", "REFUSED": "fail", "FAIL": "fail", "skipped": "skip", "not evaluated": "skip", "not judged here": "skip"}


def table(headers: list[str], rows: list[list[Any]]) -> str:
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


def summary_text(d: DrillReport, paths: Mapping[str, str | Path]) -> str:
    """A run's summary from its typed report (drills.report_model.DrillReport)."""
    from opsctl.drills.text import rel_path

    lines = [f"drill {d.run_id}: {d.outcome.upper()} ({d.scenario.title})"]
    if d.wall_seconds is not None:
        sim = d.sim
        lines[0] += f" in {d.wall_seconds:.1f} s wall" + (
            f", {duration_text(sim.simulated_seconds)} simulated" if sim else "")
    m = d.measurements
    if m:
        lines.append("  " + "  ".join(f"{label}: {duration_text(m.seconds(key))}" for key, label, _ in MEASURES
                                      if m.seconds(key) is not None))
    for v in d.expectations:
        lines.append(f"  {v.mark}  {v.name}" + ("" if v.passed else f": {v.reason}"))
    for r in d.rollbacks:
        if r.status != "done":
            lines.append(f"  rollback {r.action} {r.status}: {r.message}")
    for item in d.leftovers:
        lines.append(f"  LEFT BEHIND: {item}")
    lines.append(f"report: {rel_path(paths['md'])}")
    lines.append(f"        {rel_path(paths['html'])}")
    lines.append(f"        {rel_path(paths['json'])}")
    return "\n".join(lines)
