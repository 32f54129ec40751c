"""`opsctl traffic status|set|ramp|failover|restore|history`."""

from __future__ import annotations

import sys

import click

from opsctl.cli.output import emit, output_option
from opsctl.cli.params import IDENTIFIER, LINE
from opsctl.cli import complete
from opsctl.cli.source_options import prometheus_url_option
from opsctl.cli.main import all_services_option
from opsctl.cli.traffic_render import render_outcome, run_change, run_ramp

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
    """`OPSCTL_CLOCK=simulated` (a rehearsal and test hook, docs/decisions/0007-one-clock-hook.md): the
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


def _confirmer(yes: bool, dry_run: bool, order, cfg=None):
    """None when no question is needed; refuses to guess when nobody can answer. The question shows
    the four policy guards and, with `cfg`, a read-only preview of the capacity guard (the fifth,
    which runs, and may scale, only once confirmed), so it lists the guards `--dry-run` shows."""
    from opsctl.errors import UsageError

    if yes or dry_run:
        return None
    if not sys.stdin.isatty():
        raise UsageError("this changes live traffic: pass --yes to confirm without a terminal, or --dry-run to preview")

    def confirm(what) -> bool:
        from opsctl.cli.traffic_render import prompt_text

        if isinstance(what, str):
            text = what
        else:
            from opsctl.traffic.guards import capacity_preview

            preview = None
            if cfg is not None and what.requested is not None:
                preview = capacity_preview(cfg, what.action, what.before, what.requested, emergency=what.emergency,
                                           incident=what.incident, operation_id=what.operation_id,
                                           reason=what.reason)
            text = prompt_text(what, order, preview)
        click.echo(text, err=True)
        return click.confirm("Apply?", default=False, err=True)

    return confirm


def _running_ramp_blocks(app, emergency: bool) -> None:
    from opsctl.errors import ConflictError
    from opsctl.traffic.ramp_record import RampOwner
    from opsctl.traffic.rampstate import running_ramp

    live = running_ramp(app.config)
    if live and not emergency:
        owner = live.owner or RampOwner()
        raise ConflictError(
            f"a ramp is running ({live.id}, pid {owner.pid} on {owner.host}); a manual change"
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
    from opsctl.cli.traffic_render import status_text
    from opsctl.clock import wall_now
    from opsctl.errors import NoDataError
    from opsctl.traffic.status import traffic_status

    order = list(app.config.backends)
    shown = traffic_status(app.config, wall_now())
    emit(shown.to_dict(order), output, table=lambda _: status_text(shown, order))
    if shown.split is None:
        raise NoDataError(f"the split is unknown: {shown.note}")


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
        return (*parsed, _confirmer(yes, dry_run, list(app.config.backends), app.config))

    assigned, mirrored, confirm = _preflight(service, "set", check, reason=reason, incident=incident,
                                             emergency=emergency)
    run_change(app, output, lambda: service.set(assigned, mirrored, reason=reason, incident=incident,
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
        return run_ramp(lambda: service.resume(check=False), output, order)
    if abort:
        return run_ramp(lambda: service.abort(reason), output, order)

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
        return assigned, seconds, _confirmer(yes, dry_run, order, app.config)

    assigned, seconds, confirm = _preflight(service, "ramp", check, reason=reason, incident=incident,
                                            emergency=emergency)

    def target_of(current: Split) -> Split:
        if len(assigned) == 1 or sum(assigned.values()) != 100:
            unknown = [b for b in assigned if b not in cfg.backends]
            if unknown:
                raise UsageError(f"BACKEND=PCT: unknown backend {unknown[0]!r} (known: {', '.join(order)})")
            return Split.of(fill_remainder(assigned, current, order), current.shadow)
        return Split.of(assigned, current.shadow)

    return run_ramp(lambda: service.ramp(target_of, step=step, interval=seconds, reason=reason, incident=incident,
                                          emergency=emergency, confirm=confirm, check=False), output, order)


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
    confirm = _preflight(service, "failover", lambda: _confirmer(yes, dry_run, list(app.config.backends), app.config),
                         reason=reason, incident=incident, emergency=True)
    result = service.failover(source, incident, to=receivers, reason=reason, confirm=confirm, check=False)
    from opsctl.cli.traffic_render import change_text

    render_outcome(result, output, list(app.config.backends), change_text)
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
        return seconds, _confirmer(yes, dry_run, order, app.config)

    seconds, confirm = _preflight(service, "restore", check, reason=reason, incident=incident, emergency=emergency)
    return run_ramp(lambda: service.restore(incident, step=step, interval=seconds, reason=reason,
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
    from opsctl.traffic.change_entry import ChangeEntry

    if attempts:  # the local audit log's lines, shown as written; typed once for the table
        logged = service.attempts(incident=incident, applied=applied, limit=limit or None)
        entries, shown = [ChangeEntry.parse(e) for e in logged], logged
    else:
        entries = service.history(incident=incident, limit=limit or None)
        shown = [e.to_dict() for e in entries]
    from opsctl.cli.traffic_render import history_table

    emit(shown, output, table=lambda _: history_table(entries, order))
