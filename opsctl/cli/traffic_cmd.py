"""`opsctl traffic status|set|ramp|failover|restore|history`."""

from __future__ import annotations

import sys

from typing import TYPE_CHECKING

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import IDENTIFIER, LINE
from opsctl.cli import complete
from opsctl.cli.source_options import prometheus_url_option
from opsctl.cli.main import all_services_option

if TYPE_CHECKING:
    from opsctl.traffic.controller import ChangeResult
    from opsctl.traffic.ramp import RampOutcome
    from opsctl.traffic.record import ChangeEntry
    from opsctl.traffic.split import Split


@click.group()
def traffic():
    """The split between backends: see it, set it, ramp it, fail over and restore.

    \b
    Examples:
      opsctl traffic status
      opsctl traffic set databricks=70 internal=30 --reason "load test" --yes
      opsctl traffic ramp internal=50 --step 10 --interval 5m --reason "rollout" --yes
      opsctl traffic failover --from databricks --incident INC-123 --yes
      opsctl traffic restore --incident INC-123 --yes
      opsctl traffic history --incident INC-123

    Every change passes the guards (bounds, freeze, rate limit, error budget, capacity) and is
    recorded in the audit log, applied or not. Exit codes: 2 invalid split, 4 refused by a guard,
    5 lost to a concurrent change. Set $OPSCTL_ACTOR to name the actor in automation.
    """


def change_options(*, emergency: bool = True, incident_required: bool = False):
    """--dry-run, -o, --reason, --incident, --yes (and --emergency) for every command that changes something."""

    def wrap(fn):
        fn = output_option(fn)
        fn = prometheus_url_option(fn)
        fn = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (automation).")(fn)
        if emergency:
            fn = click.option("--emergency", is_flag=True,
                              help="Override freeze, rate and budget guards; needs --incident; recorded.")(fn)
        fn = click.option("--incident", metavar="ID", type=IDENTIFIER, required=incident_required,
                          shell_complete=complete.open_failovers if incident_required else complete.incidents,
                          help="Incident this change serves (recorded; required for --emergency).")(fn)
        fn = click.option("--reason", metavar="TEXT", type=LINE, default="", help="Why (recorded in the audit log).")(fn)
        fn = click.option("--dry-run", is_flag=True,
                          help="Run every guard and the server's dry run; change nothing.")(fn)
        return fn

    return wrap


def _progress(message: str) -> None:
    click.echo(message, err=True)


def _preflight(service, action: str, check, *, reason: str = "", incident: str | None = None,
               emergency: bool = False):
    """Run the command's own checks (flags, reason, confirmation, a running ramp); a refusal there is
    audited like a guard's, with the same exit code."""
    from opsctl.errors import OpsctlError

    try:
        return check()
    except OpsctlError as exc:
        service.controller.refuse(action, exc.message, reason=reason, incident=incident, emergency=emergency,
                                  hint=exc.hint, error=type(exc))


def _service(app, dry_run: bool):
    from opsctl.traffic.service import TrafficService

    return TrafficService(app.config, dry_run=dry_run, progress=_progress, clock=_clock(app.config))


def _clock(cfg):
    """`OPSCTL_CLOCK=simulated` (a rehearsal and test hook, docs/design.md "One clock hook"): the
    command's waits (a ramp's soaks) pass at once in simulated time, starting at the wall clock
    (with OPSCTL_CLOCK_OFFSET). Only where nothing real moves: the file actuator, local state."""
    import os

    from opsctl.errors import UsageError

    kind = os.environ.get("OPSCTL_CLOCK", "") or "wall"
    if kind == "wall":
        return None
    if kind != "simulated":
        raise UsageError(f"OPSCTL_CLOCK={kind}: unknown clock (known: wall, simulated)")
    if cfg.traffic.actuator != "file" or cfg.state.backend != "local":
        raise UsageError("OPSCTL_CLOCK=simulated skips a ramp's soak: it is refused with a real actuator"
                         f" ({cfg.traffic.actuator}) or shared state ({cfg.state.backend})",
                         hint="unset OPSCTL_CLOCK; it is for rehearsals on the file actuator")
    from opsctl.clock import SimClock, wall_now

    return SimClock(wall_now())


def _require_reason(reason: str, incident: str | None, dry_run: bool) -> None:
    from opsctl.errors import UsageError

    if not dry_run and not reason.strip() and not incident:
        raise UsageError("say why: give --reason TEXT or --incident ID (both are recorded in the audit log)")


def _confirmer(yes: bool, dry_run: bool, order):
    """None when no question is needed; refuses to guess when nobody can answer."""
    from opsctl.errors import UsageError

    if yes or dry_run:
        return None
    if not sys.stdin.isatty():
        raise UsageError("this changes live traffic: pass --yes to confirm without a terminal, or --dry-run to preview")

    def confirm(what) -> bool:
        text = what if isinstance(what, str) else _change_text(what, order)
        click.echo(text, err=True)
        return click.confirm("Apply?", default=False, err=True)

    return confirm


def _render_outcome(outcome, output: str, order, render) -> None:
    """Render what a change returned (`check=False`: a refusal still shows its guards, -o json still
    prints the result; a refusal's table goes to stderr), then exit with its error's code."""
    failed = outcome.error
    if output != "table":
        emit(outcome.to_dict(order), output)
    else:
        click.echo(render(outcome, order), err=failed is not None)
    if failed is not None:
        raise failed


def _run_change(app, output: str, call) -> None:
    _render_outcome(call(), output, list(app.config.backends), _change_text)


def _run_ramp(call, output, order) -> None:
    try:
        outcome = call()
    except KeyboardInterrupt:
        click.echo("interrupted: the ramp's state is saved; continue with `opsctl traffic ramp --resume`"
                   " or return to its start with `opsctl traffic ramp --abort`", err=True)
        raise
    _render_outcome(outcome, output, order, _ramp_text)


def _describe(split: "Split | None", order) -> str:
    """`internal 20 / databricks 80 (shadow internal 5%)`, in the config's backend order."""
    if split is None:
        return "unset"
    text = " / ".join(f"{b} {split.weight(b)}" for b in order)
    text = text or " / ".join(f"{b} {split.weight(b)}" for b in split.backends())
    names = [*order, *(b for b in sorted(split.shadow) if b not in order)]
    shadow = [f"{b} {split.shadow_of(b)}%" for b in names if split.shadow_of(b)]
    return text + (" (shadow " + ", ".join(shadow) + ")" if shadow else "")


def _described(split: "dict | None", order) -> str:
    """`_describe` of a split as a stored document holds it (a ramp's plan, `traffic status`)."""
    from opsctl.traffic.split import Split

    if split is None:
        return "unset"
    present = [b for b in order if b in split["weights"]] or list(split["weights"])
    return _describe(Split.of(split["weights"], split.get("shadow")), present)


def _change_text(r: "ChangeResult", order) -> str:
    lines = [
        f"{r.outcome:<9} {r.action}: {_describe(r.before, order)} -> {_describe(r.after, order)}",
        f"target    {r.target} (version {r.version_before}"
        + (f" -> {r.version})" if r.version and r.version != r.version_before else ")"),
    ]
    if r.requested is not None and r.requested != r.after:
        lines.append(f"asked     {_describe(r.requested, order)}")
    step = r.degradation
    if step is not None:
        lines.append(f"DEGRADED  {_describe(step.before, order)} -> {_describe(step.after, order)}"
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


def _running_ramp_blocks(app, emergency: bool) -> None:
    from opsctl.errors import ConflictError
    from opsctl.traffic.rampstate import running_ramp

    live = running_ramp(app.config)
    if live and not emergency:
        raise ConflictError(
            f"a ramp is running ({live.get('id')}, pid {live.get('pid')} on {live.get('host')}); a manual change"
            " would fight it",
            hint="wait for it, stop it (Ctrl-C / kill PID) and `opsctl traffic ramp --abort`, or use --emergency --incident ID",
        )


# ---------------------------------------------------------------------------------------------


@traffic.command()
@prometheus_url_option
@output_option
@click.pass_obj
@all_services_option
def status(app, output):
    """Current weights and shadow, where they live, the last change, freezes, capacity headroom.

    Exit 3 when the split is unknown (e.g. nothing stored yet and no default configured).
    """
    from opsctl.clock import wall_now
    from opsctl.errors import NoDataError
    from opsctl.traffic.status import traffic_status

    data = traffic_status(app.config, wall_now())
    emit(data, output, table=lambda d: _status_text(d, list(app.config.backends)))
    if data["split"] is None:
        raise NoDataError(f"the split is unknown: {data['note']}")


def _status_text(d: dict, order) -> str:
    lines = [
        f"split       {_described(d['split'], order)}" + (f"   ({d['note']})" if d.get("note") else ""),
        f"actuator    {d['actuator']}: {d['target']} (version {d['version']})",
    ]
    mirror = d.get("shadow_object")
    if mirror is not None:
        if mirror.get("error"):
            lines.append(f"shadow      {mirror['actuator']}: unknown ({mirror['error']})")
        else:
            shares = ", ".join(f"{b} {p}%" for b, p in (mirror["mirror"] or {}).items()) or "none"
            lines.append(f"shadow      {mirror['actuator']}: {mirror['target']} (version {mirror['version']}):"
                         f" mirrors {shares}" + (f"   ({mirror['note']})" if mirror.get("note") else ""))
    if d.get("metrics"):
        lines.append(f"metrics     {d['metrics']['source']}: {d['metrics']['where']}")
    last = d.get("last_change")
    if last:
        why = " ".join(x for x in (last.get("incident") or "", last.get("reason") or "") if x)
        lines.append(f"last change {last['time']} {last['action']} by {last['actor']}" + (f": {why}" if why else "")
                     + (f" [overrode {', '.join(last['overrides'])}]" if last.get("overrides") else ""))
    else:
        lines.append("last change none recorded")
    for f in d.get("open_failovers") or []:
        lines.append(f"FAILOVER    incident {f['incident']} open since {f['since']} by {f['actor']};"
                     f" restore returns to {_described(f['saved'], order)}"
                     f" (opsctl traffic restore --incident {f['incident']})")
    if d["freezes_active"]:
        for f in d["freezes_active"]:
            lines.append(f"FREEZE      {f['name']} until {f['end_local']}: routine changes refused"
                         " (emergencies: --emergency --incident ID)")
    else:
        nxt = d.get("next_freeze")
        lines.append("freeze      none in force" + (f"; next: {nxt['name']} from {nxt['start_local']}" if nxt else ""))
    cap = d.get("capacity")
    if cap is None:
        lines.append("capacity    not configured")
    elif cap.get("error"):
        lines.append(f"capacity    {cap['backend']}: unknown ({cap['error']})")
    elif cap.get("current_rps") is None:
        lines.append(f"capacity    {cap['backend']}: {cap['ready_replicas']} ready x {cap['rps_per_replica']:g} rps"
                     f" = {cap['capacity_rps']:g} rps; headroom unknown: no request-rate data")
    else:
        lines.append(
            f"capacity    {cap['backend']}: {cap['ready_replicas']} ready x {cap['rps_per_replica']:g} rps ="
            f" {cap['capacity_rps']:g} rps for {cap['current_rps']:.1f} rps total; carries up to {cap['max_share']}%"
            f" with {cap['headroom']:.0%} headroom (now {cap['share_now']}%; {cap['max_share_at_max_replicas']}%"
            f" at {cap['max_replicas']} replicas)")
    for name, v in ((cap or {}).get("vendors") or {}).items():
        unit = "requests/s" if v.get("unit") == "requests" else "tokens/s"
        lines.append(f"capacity    {name}: unknown ({v['error']})" if v.get("error") else
                     f"capacity    {name}: provisioned {v['provisioned']:g} {unit}, carries up to {v['max_share']}%"
                     f" with {v['headroom']:.0%} headroom (now {v['share_now']}%)" if v.get("max_share") is not None else
                     f"capacity    {name}: provisioned throughput or current {unit} unknown (no data)")
    ramp = d.get("ramp")
    if ramp:
        state = "running" if ramp["live"] else "INTERRUPTED (resume: opsctl traffic ramp --resume; or --abort)"
        lines.append(f"ramp        {ramp['id']} {state}: step {ramp['done']}/{ramp['total']} toward"
                     f" {_described(ramp['target'], order)}")
    return "\n".join(lines)


@traffic.command(name="set")
@click.argument("weights", nargs=-1, required=True, metavar="BACKEND=PCT...", shell_complete=complete.assignments)
@click.option("--shadow", "shadow", multiple=True, metavar="BACKEND=PCT", shell_complete=complete.assignments,
              help="Mirror PCT% of requests to BACKEND, answers discarded (0 stops it). Repeatable.")
@change_options()
@click.pass_obj
def set_(app, weights, shadow, dry_run, reason, incident, emergency, yes, output):
    """Set the split in one step; the listed weights must sum to 100 (unlisted backends get 0).

    \b
    Examples:
      opsctl traffic set databricks=80 internal=20 --reason "back to normal" --yes
      opsctl traffic set databricks=80 internal=20 --shadow internal=10 --reason "warm-up" --yes
      opsctl traffic set internal=100 --emergency --incident INC-7 --yes
    """
    from opsctl.traffic.split import parse_assignments

    service = _service(app, dry_run)

    def check():
        parsed = parse_assignments(weights, "BACKEND=PCT"), parse_assignments(shadow, "--shadow")
        _require_reason(reason, incident, dry_run)
        if not dry_run:
            _running_ramp_blocks(app, emergency)
        return (*parsed, _confirmer(yes, dry_run, list(app.config.backends)))

    assigned, mirrored, confirm = _preflight(service, "set", check, reason=reason, incident=incident,
                                             emergency=emergency)
    _run_change(app, output, lambda: service.set(assigned, mirrored, reason=reason, incident=incident,
                                                 emergency=emergency, confirm=confirm, check=False))


@traffic.command()
@click.argument("weights", nargs=-1, metavar="[BACKEND=PCT]...", shell_complete=complete.assignments)
@click.option("--to", "to", multiple=True, metavar="BACKEND=PCT", hidden=True, shell_complete=complete.assignments,
              help="Deprecated spelling of the positional BACKEND=PCT.")
@click.option("--step", type=int, help="Percentage points per step (default: traffic.ramp.step).")
@click.option("--interval", metavar="DUR", help="Wait between steps before the burn check, e.g. 5m, 30s, 0s"
                                                " (default: traffic.ramp.interval).")
@click.option("--resume", is_flag=True, help="Continue a ramp interrupted by a crash or Ctrl-C.")
@click.option("--abort", is_flag=True, help="Return an interrupted ramp to where it started.")
@change_options()
@click.pass_obj
def ramp(app, weights, to, step, interval, resume, abort, dry_run, reason, incident, emergency, yes, output):
    """Move the split in steps toward BACKEND=PCT..., checking the receiving backend's burn rate between steps.

    The target is written as for `traffic set`; one backend alone: the others share the rest in
    proportion to their current weights.

    A page-level burn or missing data aborts the ramp and returns to where it started (exit 4).
    Progress is printed on the terminal. State is saved after every step, so `--resume`
    continues after a crash; a second ramp is refused while one runs (exit 5).

    \b
    Examples:
      opsctl traffic ramp internal=50 --step 10 --interval 5m --reason "rollout" --yes
      opsctl traffic ramp databricks=40 internal=40 spare=20 --reason "3-way" --yes
      opsctl traffic ramp --resume
      opsctl traffic ramp --abort --reason "operator stopped it"
    """
    from opsctl.clock import parse_duration
    from opsctl.errors import UsageError
    from opsctl.traffic.split import Split, fill_remainder, parse_assignments

    cfg = app.config
    order = list(cfg.backends)
    service = _service(app, dry_run)

    if to:
        click.echo("note: --to BACKEND=PCT is deprecated: give the target as for `traffic set`,"
                   f" e.g. `opsctl traffic ramp {' '.join(to)}`", err=True)
    to = tuple(to) + tuple(weights)

    def flags():
        if resume and abort:
            raise UsageError("--resume and --abort contradict each other")
        if (resume or abort) and (to or step or interval or dry_run):
            raise UsageError("--resume and --abort take the ramp's saved plan; do not give BACKEND=PCT, --step,"
                             " --interval or --dry-run")

    _preflight(service, "ramp", flags, reason=reason, incident=incident, emergency=emergency)
    if resume:
        return _run_ramp(lambda: service.resume(check=False), output, order)
    if abort:
        return _run_ramp(lambda: service.abort(reason), output, order)

    def check():
        if not to:
            raise UsageError("give the target as BACKEND=PCT..., e.g. `opsctl traffic ramp internal=50` (or --resume"
                             " / --abort)")
        assigned = parse_assignments(to, "BACKEND=PCT")
        try:
            seconds = parse_duration(interval) if interval is not None else cfg.traffic.ramp.interval.seconds
        except ValueError as exc:
            raise UsageError(f"--interval: {exc}") from None
        _require_reason(reason, incident, dry_run)
        return assigned, seconds, _confirmer(yes, dry_run, order)

    assigned, seconds, confirm = _preflight(service, "ramp", check, reason=reason, incident=incident,
                                            emergency=emergency)

    def target_of(current: Split) -> Split:
        if len(assigned) == 1 or sum(assigned.values()) != 100:
            unknown = [b for b in assigned if b not in cfg.backends]
            if unknown:
                raise UsageError(f"BACKEND=PCT: unknown backend {unknown[0]!r} (known: {', '.join(order)})")
            return Split.of(fill_remainder(assigned, current, order), current.shadow)
        return Split.of(assigned, current.shadow)

    return _run_ramp(lambda: service.ramp(target_of, step=step, interval=seconds, reason=reason, incident=incident,
                                          emergency=emergency, confirm=confirm, check=False), output, order)


def _ramp_text(outcome: "RampOutcome", order) -> str:
    lines = [f"{outcome.status}: {outcome.message}"]
    plan = outcome.state.get("steps")  # the ramp's stored document (RampState.summary)
    if plan:
        lines.append("plan: " + " -> ".join(_described(s, order) for s in plan))
    for step in outcome.results:
        lines.append("")
        lines.append(_change_text(step, order))
    return "\n".join(lines)


@traffic.command()
@click.option("--from", "source", required=True, metavar="BACKEND", shell_complete=complete.backends, help="The failing backend to move traffic off.")
@click.option("--to", "receivers", multiple=True, metavar="BACKEND", shell_complete=complete.backends,
              help="Where its share goes (default: every other backend, in proportion to its weight).")
@change_options(emergency=False, incident_required=True)
@click.pass_obj
def failover(app, source, receivers, dry_run, reason, incident, yes, output):
    """Emergency: move as much of BACKEND's share to the others as their capacity allows, in one step.

    Always an emergency tied to --incident: freeze, rate and budget guards are overridden and the
    overrides recorded; capacity is not: the internal Deployment is scaled up to its maximum and
    only what its ready replicas carry moves; the rest goes to traffic.degradation when configured,
    else stays. A move that stays partial is printed and exits 4. Shadow traffic stops.
    `opsctl traffic restore --incident ID` returns to the split saved here.

    \b
    Example:
      opsctl traffic failover --from databricks --incident INC-123 --reason "vendor 5xx" --yes
    """
    service = _service(app, dry_run)
    confirm = _preflight(service, "failover", lambda: _confirmer(yes, dry_run, list(app.config.backends)),
                         reason=reason, incident=incident, emergency=True)
    result = service.failover(source, incident, to=receivers, reason=reason, confirm=confirm, check=False)
    _render_outcome(result, output, list(app.config.backends), _change_text)
    if result.partial is not None:  # a partial move: what moved is applied and printed; the exit code says the rest
        from opsctl.errors import GuardRefused

        raise GuardRefused(result.partial.message, hint=result.partial.hint)


@traffic.command()
@click.option("--step", type=int, help="Percentage points per step (default: traffic.ramp.step).")
@click.option("--interval", metavar="DUR", help="Wait between steps (default: traffic.ramp.interval).")
@change_options(incident_required=True)
@click.pass_obj
def restore(app, step, interval, dry_run, reason, incident, emergency, yes, output):
    """Return gradually to the split saved when the incident's failover began (a ramp).

    Inside a freeze, a restore is a change like any other: add --emergency. An interrupted restore
    continues with `opsctl traffic ramp --resume`.

    \b
    Example:
      opsctl traffic restore --incident INC-123 --step 20 --interval 5m --yes
    """
    from opsctl.clock import parse_duration
    from opsctl.errors import UsageError

    cfg = app.config
    order = list(cfg.backends)
    service = _service(app, dry_run)

    def check():
        try:
            seconds = parse_duration(interval) if interval is not None else cfg.traffic.ramp.interval.seconds
        except ValueError as exc:
            raise UsageError(f"--interval: {exc}") from None
        service.saved_split(incident)  # an unknown incident fails before anything is asked
        return seconds, _confirmer(yes, dry_run, order)

    seconds, confirm = _preflight(service, "restore", check, reason=reason, incident=incident, emergency=emergency)
    return _run_ramp(lambda: service.restore(incident, step=step, interval=seconds, reason=reason,
                                             emergency=emergency, confirm=confirm, check=False), output, order)


@traffic.command()
@click.option("--limit", type=int, default=20, show_default=True, help="Newest N entries (0: all).")
@click.option("--incident", metavar="ID", shell_complete=complete.incidents, help="Only entries for this incident.")
@click.option("--applied", is_flag=True, help="With --attempts: only applied changes.")
@click.option("--attempts", is_flag=True,
              help="Every attempt made from this host (refused, conflicts, dry runs), from the local audit log.")
@output_option
@click.pass_obj
def history(app, limit, incident, applied, attempts, output):
    """Applied traffic changes, newest first, from the change record stored with the split.

    Every laptop, `opsctl serve` replica and drill reads the same record, so all show the same
    history (the newest `state.history` changes; older ones are in Kubernetes Events and logs).
    `--attempts` shows this host's audit log instead: every attempt, applied or refused.

    \b
    Examples:
      opsctl traffic history
      opsctl traffic history --incident INC-123 -o json
      opsctl traffic history --attempts --limit 50
    """
    from opsctl.traffic.service import TrafficService

    order = list(app.config.backends)
    service = TrafficService(app.config, hooks=[])
    from opsctl.traffic.record import ChangeEntry

    if attempts:  # the local audit log's lines, shown as written; typed once for the table
        logged = service.attempts(incident=incident, applied=applied, limit=limit or None)
        entries, shown = [ChangeEntry.parse(e) for e in logged], logged
    else:
        entries = service.history(incident=incident, limit=limit or None)
        shown = [e.to_dict() for e in entries]
    emit(shown, output, table=lambda _: _history_table(entries, order))


def _history_table(entries: "list[ChangeEntry]", order) -> str:
    headers = ["TIME (UTC)", "ACTOR", "ACTION", "OUTCOME", f"CHANGE ({'/'.join(order)})", "INCIDENT", "OVERRIDES",
               "REASON"]
    rows = [[_short_time(e.time), e.actor, e.action, e.outcome, _change_cell(e.before_split, e.after_split, order),
             e.incident or "-", ", ".join(e.overrides) or "-", e.reason]
            for e in entries]
    # a column nothing filled in (no incident, no override in these rows) is left out of the table
    keep = [i for i, h in enumerate(headers) if h not in ("INCIDENT", "OVERRIDES") or any(r[i] != "-" for r in rows)]
    return render_table([headers[i] for i in keep], [[r[i] for i in keep] for r in rows])


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
