"""What the traffic commands print as tables and text: a change's result, a ramp's outcome, the
status, the history. Pure functions of the typed results (`ChangeResult`, `RampOutcome`,
`TrafficStatus`, `ChangeEntry`), so `cli/traffic_cmd.py`'s bodies only parse, call and render."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import click

from opsctl.cli.output import emit, render_table

if TYPE_CHECKING:
    from opsctl.traffic.change import ChangeResult
    from opsctl.traffic.guards import GuardResult
    from opsctl.traffic.ramp import RampOutcome
    from opsctl.traffic.change_entry import ChangeEntry
    from opsctl.traffic.split import Split
    from opsctl.traffic.status import CapacityStatus, TrafficStatus


def describe(split: "Split | None", order) -> str:
    """`internal 20 / databricks 80 (shadow internal 5%)`, in the config's backend order."""
    if split is None:
        return "unset"
    text = " / ".join(f"{b} {split.weight(b)}" for b in order)
    text = text or " / ".join(f"{b} {split.weight(b)}" for b in split.backends())
    names = [*order, *(b for b in sorted(split.shadow) if b not in order)]
    shadow = [f"{b} {split.shadow_of(b)}%" for b in names if split.shadow_of(b)]
    return text + (" (shadow " + ", ".join(shadow) + ")" if shadow else "")


def described(split: "dict | None", order) -> str:
    """`describe` of a split as a stored document holds it (a ramp's plan, `traffic status`)."""
    from opsctl.traffic.change_entry import split_of

    typed = split_of(split)
    if split is None or typed is None:
        return "unset"
    present = [b for b in order if b in split["weights"]] or list(split["weights"])
    return describe(typed, present)


def change_text(r: "ChangeResult", order) -> str:
    if r.before is None and r.after is None and r.version_before is None:
        # Refused before the split was read (a flag check, e.g. --emergency without --incident):
        # say what was asked and that nothing was read or changed, not `unset -> unset (version None)`.
        asked = "" if r.requested is None else f", asked {describe(r.requested, order)}"
        lines = [f"{r.outcome:<9} {r.action}: nothing changed{asked}", f"target    {r.target} (not read)"]
    else:
        lines = [
            f"{r.outcome:<9} {r.action}: {describe(r.before, order)} -> {describe(r.after, order)}",
            f"target    {r.target} (version {r.version_before}"
            + (f" -> {r.version})" if r.version and r.version != r.version_before else ")"),
        ]
    if r.requested is not None and r.requested != r.after and not (r.before is None and r.after is None
                                                                      and r.version_before is None):
        lines.append(f"asked     {describe(r.requested, order)}")
    step = r.degradation
    if step is not None:
        lines.append(f"DEGRADED  {describe(step.before, order)} -> {describe(step.after, order)}"
                     f" ({step.outcome}, change {step.change_id or '-'})")
    if r.partial is not None:
        lines.append(f"PARTIAL   {r.partial.message}")
    for backend, s in r.shortfall.items():
        lines.append(f"SHORT     {backend}: {s['not_moved']} points could not move (capacity carries"
                     f" {s['capacity_share']}%); they stay where they were")
    if r.incident or r.reason:
        lines.append(f"why       {r.incident or '-'}: {r.reason or ''}")
    if r.guards:
        rows = []
        for g in r.guards:
            mark = "OVERRIDE" if g.overridden else "skip" if g.skipped else "ok" if g.ok else "REFUSED"
            rows.append([mark, g.name, g.message])
            if not g.ok and g.remedy:
                rows.append(["", "", f"what to do: {g.remedy}"])
        lines.append("guards")
        lines.extend("  " + line for line in render_table(["", "GUARD", "RESULT"], rows).splitlines()[2:])
    lines.extend(f"WARNING   {w}" for w in r.warnings)
    lines.extend(f"recorded  {x}" for x in r.recorded)
    if r.message and r.outcome != "refused":
        lines.append(f"note      {r.message}")
    return "\n".join(lines)


def prompt_text(r: "ChangeResult", order, preview: "GuardResult | None") -> str:
    """The confirmation question's text: the change with its policy guards, and the capacity guard
    previewed read-only (marked `preview`; it runs for real, and may scale, once confirmed)."""
    if preview is None:
        return change_text(r, order)
    from dataclasses import replace

    shown = replace(preview, message=f"{preview.message} (preview, read only: checked again once confirmed)")
    return change_text(replace(r, guards=[*r.guards, shown]), order)


def ramp_text(outcome: "RampOutcome", order) -> str:
    lines = [f"{outcome.status}: {outcome.message}"]
    plan = () if outcome.stored else outcome.state.steps  # a plan's steps (a stored ramp shows its summary)
    if plan:
        lines.append("plan: " + " -> ".join(described(s, order) for s in plan))
    for step in outcome.results:
        lines.append("")
        lines.append(change_text(step, order))
    return "\n".join(lines)


def status_text(s: "TrafficStatus", order: list[str]) -> str:
    """`traffic status`'s table, line by line from the status's fields."""
    lines = [
        f"split       {describe_stored(s.split, order)}" + (f"   ({s.note})" if s.note else ""),
        f"actuator    {s.actuator}: {s.target} (version {s.version})",
    ]
    mirror = s.shadow_object
    if mirror is not None:
        if mirror.error:
            lines.append(f"shadow      {mirror.actuator}: unknown ({mirror.error})")
        else:
            shares = ", ".join(f"{b} {p}%" for b, p in (mirror.mirror(order) or {}).items()) or "none"
            lines.append(f"shadow      {mirror.actuator}: {mirror.target} (version {mirror.version}):"
                         f" mirrors {shares}" + (f"   ({mirror.note})" if mirror.note else ""))
    lines.append(f"metrics     {s.metrics_source}: {s.metrics_where}")
    last = s.last_change
    if last is not None:
        why = " ".join(x for x in (last.incident or "", last.reason or "") if x)
        lines.append(f"last change {last.time} {last.action} by {last.actor}" + (f": {why}" if why else "")
                     + (f" [overrode {', '.join(last.overrides)}]" if last.overrides else ""))
    else:
        lines.append("last change none recorded")
    for incident, f in sorted(s.open_failovers.items()):
        lines.append(f"FAILOVER    incident {incident} open since {f.opened_at} by {f.actor};"
                     f" restore returns to {described(f.saved, order)}"
                     f" (opsctl traffic restore --incident {incident})")
    if s.freezes_active:
        for w in s.freezes_active:
            lines.append(f"FREEZE      {w.name} until {w.local(w.end)}: routine changes refused"
                         " (emergencies: --emergency --incident ID)")
    else:
        nxt = s.next_freeze
        lines.append("freeze      none in force" + (f"; next: {nxt.name} from {nxt.local(nxt.start)}" if nxt else ""))
    lines.extend(_capacity_lines(s.capacity))
    ramp = s.ramp
    if ramp is not None:
        state = "running" if ramp.live else "INTERRUPTED (resume: opsctl traffic ramp --resume; or --abort)"
        lines.append(f"ramp        {ramp.id} {state}: step {ramp.done}/{ramp.total} toward"
                     f" {described(ramp.target, order)}")
    return "\n".join(lines)


def _capacity_lines(cap: "CapacityStatus | None") -> list[str]:
    if cap is None:
        return ["capacity    not configured"]
    c = cap.reading
    if c is None:
        return [f"capacity    {cap.backend}: unknown ({cap.error})"]
    if c.total_rps is None:
        lines = [f"capacity    {cap.backend}: {c.ready} ready x {c.rps_per_replica:g} rps = {c.capacity_rps:g} rps;"
                 " headroom unknown: no request-rate data"]
    else:
        lines = [f"capacity    {cap.backend}: {c.ready} ready x {c.rps_per_replica:g} rps = {c.capacity_rps:g} rps"
                 f" for {c.total_rps:.1f} rps total; carries up to {c.max_share()}% with {c.headroom:.0%} headroom"
                 f" (now {cap.share_now}%; {c.max_share(c.max_replicas)}% at {c.max_replicas} replicas)"]
    for name, v in (cap.vendors or {}).items():
        r = v.reading
        if r is None:
            lines.append(f"capacity    {name}: unknown ({v.error})")
            continue
        unit = "requests/s" if r.unit == "requests" else "tokens/s"
        fits = r.max_share()
        lines.append(f"capacity    {name}: provisioned {r.provisioned:g} {unit}, carries up to {fits}% with"
                     f" {r.headroom:.0%} headroom (now {v.share_now}%)" if fits is not None else
                     f"capacity    {name}: provisioned throughput or current {unit} unknown (no data)")
    return lines


def describe_stored(split: "Split | None", order: list[str]) -> str:
    """`described` of a split as its stored document shows it (`Split.to_dict` in the config's order)."""
    return described(split.to_dict(order) if split is not None else None, order)


def history_table(entries: "list[ChangeEntry]", order) -> str:
    headers = ["TIME (UTC)", "ACTOR", "ACTION", "OUTCOME", f"CHANGE ({'/'.join(order)})", "INCIDENT", "OVERRIDES",
               "REASON"]
    rows = [[_short_time(e.time), e.actor, e.action, e.outcome, _change_cell(e.before_split, e.after_split, order),
             e.incident or "-", ", ".join(e.overrides) or "-", e.reason]
            for e in entries]
    # a column nothing filled in (no incident, no override in these rows) is left out of the table
    keep = [i for i, h in enumerate(headers) if h not in ("INCIDENT", "OVERRIDES") or any(r[i] != "-" for r in rows)]
    return render_table([headers[i] for i in keep], [[r[i] for i in keep] for r in rows],
                        drop=("OVERRIDES", "ACTOR", "INCIDENT", "OUTCOME"))  # the time never cut; these go first


def _short_time(text: str | None) -> str:
    """2026-12-01T09:51:37.733Z -> 2026-12-01T09:51:37: the header says UTC."""
    if not text:
        return "-"
    return text.split(".")[0].rstrip("Z")


def _weights(split: "Split | None", order) -> str:
    if split is None:
        return "unset"
    return "/".join(str(split.weight(n)) for n in order)


def _change_cell(before: "Split | None", after: "Split | None", order) -> str:
    """`80/20 -> 50/50` in the header's backend order, shadow changes after: a column a
    100-column terminal holds."""
    if after is None:
        return "-"
    text = f"{_weights(before, order)} -> {_weights(after, order)}"
    for n in order:
        old, new = before.shadow_of(n) if before is not None else 0, after.shadow_of(n)
        if old or new:
            text += f" (shadow {n} {new}%)" if old == new else f" (shadow {n} {old}->{new}%)"
    return text


# -- results rendered, then their error raised (its exit code) -------------------------------------


def render_outcome(outcome: Any, output: str, order: list[str], render: Callable[[Any, list[str]], str]) -> None:
    """Render what a change returned (`check=False`: a refusal still shows its guards, -o json still
    prints the result; a refusal's table goes to stderr), then exit with its error's code."""
    failed = outcome.error
    if output != "table":
        emit(outcome.to_dict(order), output)
    else:
        click.echo(render(outcome, order), err=failed is not None)
    if failed is not None:
        raise failed


def run_change(app: Any, output: str, call: Callable[[], "ChangeResult"]) -> None:
    """Call a change (`check=False`) and render its result."""
    render_outcome(call(), output, list(app.config.backends), change_text)


def run_ramp(call: Callable[[], "RampOutcome"], output: str, order: list[str]) -> None:
    """Call a ramp (`check=False`) and render its outcome; Ctrl-C says how to go on."""
    try:
        outcome = call()
    except KeyboardInterrupt:
        click.echo("interrupted: the ramp's state is saved; continue with `opsctl traffic ramp --resume`"
                   " or return to its start with `opsctl traffic ramp --abort`", err=True)
        raise
    render_outcome(outcome, output, order, ramp_text)
