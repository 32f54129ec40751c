"""`opsctl drill list|validate|run|report|cleanup`."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import choice


@click.group()
def drill():
    """Game-day drills: mock outages that page, fail over, file the vendor ticket and measure the response.

    On the embedded default a drill runs in simulated time in its own directory
    (<state_dir>/drills/<run-id>/): its own metric store, pager and ticket ledgers and split, so it
    finishes in seconds and touches nothing else. --live runs the same scenario against the
    configured Prometheus, pager, ticket channel and actuator in wall-clock time, with real faults
    in the namespaces listed in drills.live.fault_namespaces. Everything a drill does is marked as a drill.

    \b
    Examples:
      opsctl drill list
      opsctl drill validate chaos/
      opsctl drill run vendor-outage
      opsctl drill run escalation-only --live --dry-run
      opsctl drill report latest -o html --path
      opsctl drill history vendor-outage --html history.html
      opsctl drill cleanup

    Exit codes of `run`: 0 every expectation met, 1 an expectation failed or the drill aborted,
    2 invalid scenario, 4 refused by preflight (a real incident open, alerts firing, steady state not met).
    """


def _scenario_paths(app, paths) -> list:
    from opsctl.drills.catalog import scenario_paths

    return scenario_paths(list(paths), app.config)


def _progress(line: str) -> None:
    click.echo(line, err=True)


@drill.command(name="list")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--runs", is_flag=True, help="List past runs (newest first) instead of scenarios.")
@output_option
@click.pass_obj
def list_(app, paths, runs, output):
    """Scenarios by name (drills.scenarios, then those shipped with opsctl), or past runs with --runs.

    \b
    Examples:
      opsctl drill list
      opsctl drill list --runs -o json
      opsctl drill history vendor-outage   # the trend across a scenario's runs
    """
    from opsctl.drills.state import run_rows

    if runs:
        rows = run_rows(app.config.drills_path)
        emit(rows, output, table=lambda data: render_table(
            ["RUN", "MODE", "OUTCOME", "STARTED", "SCENARIO"],
            [[r["run_id"], r["mode"], "running" if r["running"] else r["outcome"] or r["phase"], r["started_at"],
              r["title"]] for r in data]) + "\n(the trend across a scenario's runs: opsctl drill history SCENARIO)"
            if data else "no drill runs yet")
        return
    from opsctl.drills.catalog import catalog, scenario_rows

    if paths:
        found = [(p.stem, p, "given") for p in _scenario_paths(app, paths)]
    else:
        found = catalog(app.config)
    rows = scenario_rows(found)
    emit(rows, output, table=lambda data: render_table(
        ["NAME", "FILE", "FAULTS", "EXPECT", "TITLE"],
        [[r["name"], r["file"], ",".join(r.get("faults") or []) or "-", r.get("expectations", "-"),
          r["title"] if r["valid"] else "INVALID: run `opsctl drill validate`"] for r in data],
        drop=("FILE", "EXPECT", "FAULTS")))  # the name never cut; these go first on a narrow terminal


@drill.command()
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--live", is_flag=True, help="Also check what a live run needs (fault targets in allowed namespaces).")
@output_option
@click.pass_obj
def validate(app, paths, live, output):
    """Check scenario files: the format (every problem with file and key path) and the config's names.

    Exit 2 when any file is invalid.

    \b
    Examples:
      opsctl drill validate
      opsctl drill validate chaos/vendor-outage.yaml --live
    """
    from opsctl.drills.catalog import validate_rows
    from opsctl.errors import ConfigError

    rows, problems = validate_rows(_scenario_paths(app, paths), app.config, live=live)
    emit(rows, output, table=lambda data: "\n".join(
        f"{'ok     ' if r['valid'] else 'INVALID'} {r['file']}" + "".join(f"\n  - {p}" for p in r["problems"])
        for r in data))
    if problems:
        invalid = [r["file"] for r in rows if not r["valid"]]
        raise ConfigError(f"{len(invalid)} of {len(rows)} scenario(s) invalid: {', '.join(invalid)}")


@drill.command()
@click.argument("scenario", metavar="SCENARIO|NAME", shell_complete=lambda c, p, i: _complete_scenario(c, p, i))
@click.option("--live", is_flag=True, help="Run against the configured systems in wall-clock time, with real faults.")
@click.option("--dry-run", is_flag=True, help="Preflight checks and the plan; create, inject, page and file nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on the terminal.")
@click.option("--chain", is_flag=True, help="Send the fault down the real chain: exporter, Prometheus, Alertmanager, "
              "PagerDuty endpoint, opsctl serve, actuator, ticket channel (real binaries, minutes of wall time).")
@click.option("--routing", metavar="FILE", type=click.Path(dir_okay=False),
              help="--chain: the Alertmanager config whose routing is rehearsed (default: the routing"
                   " `opsctl slo routes` generates from the config in use).")
@click.option("--chain-timeout", metavar="DURATION",
              help="--chain: how long after the fault every hop may take (30s..1h). Default: the page time the"
                   " burn-rate maths predicts from the fault (its error share, or for a latency or capacity fault"
                   " its share of requests over each latency SLO's threshold; the backend's traffic share, the"
                   " tiers' windows, factors and for:, the evaluation interval, Alertmanager's group_wait) plus a"
                   " 3m margin; the 3m margin alone when no page is predicted; 4m for a fault with nothing to"
                   " predict (quality).")
@output_option
@click.pass_obj
def run(app, scenario, live, dry_run, quiet, chain, routing, chain_timeout, output):
    """Run a drill scenario and write its report (Markdown, JSON, HTML).

    SCENARIO is a file, or a name from `opsctl drill list` (looked up in drills.scenarios, then in
    the scenarios shipped with opsctl), so it runs from any directory.

    Progress (phase lines with the simulated or wall time) goes to stderr; the summary and the
    report's location to stdout. Ctrl-C stops the drill and runs its rollbacks.

    \b
    Examples:
      opsctl drill run chaos/vendor-outage.yaml
      opsctl drill run vendor-outage                   # by name, from anywhere
      opsctl drill run chaos/escalation-only.yaml -o json
      opsctl drill run escalation-only --live --dry-run
      opsctl drill run vendor-outage --chain           # the real chain on this machine, ~2 minutes
    """
    from opsctl.drills.catalog import resolve_scenario
    from opsctl.drills.engine import Engine
    from opsctl.drills.scenario import load_scenario

    cfg = app.config
    sc = load_scenario(resolve_scenario(scenario, cfg))
    if chain:
        from opsctl.drills.chain.launch import launch_chain

        launched = launch_chain(sc, cfg, live=live, dry_run=dry_run, routing=routing, timeout=chain_timeout,
                                progress=None if quiet else _progress)
        if launched.drill is None:
            _show_plan(launched.plan, output)
        else:
            _finish(launched.drill.run(), output)
        return
    if dry_run:
        from opsctl.drills.plan import dry_run_plan
        from opsctl.drills.scenario import check_against_config, raise_problems
        from opsctl.slo.loading import load_slos

        raise_problems(check_against_config(sc, cfg, [s.name for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)],
                                            live=live), f"{scenario}: the scenario does not fit the config")
        _show_plan(dry_run_plan(sc, cfg, live=live), output)
        return
    _finish(Engine(sc, cfg, live=live, progress=None if quiet else _progress).run(), output)


def _show_plan(plan, output: str) -> None:
    """A dry run's plan (drills.plan.Plan); exit 4 when its preflight would refuse the drill."""
    from opsctl.errors import GuardRefused

    emit(plan.to_dict(), output, table=lambda _: plan.text())
    if plan.would_refuse:
        raise GuardRefused("preflight would refuse this drill: " + "; ".join(plan.refusals()))


def _finish(result, output: str) -> None:
    """A finished drill (embedded, live or chain): its summary, where the report is, its exit code."""
    from opsctl.drills.render import summary_text
    from opsctl.drills.text import rel_path
    from opsctl.errors import GuardRefused, OpsctlError

    emit(result.report.to_dict(), output, table=lambda _: summary_text(result.report, result.paths))
    if output != "table":
        click.echo(f"report: {rel_path(result.paths['md'])} (also .json, .html)", err=True)
    if result.exit_code == 4:
        raise GuardRefused(f"drill refused: {result.report.refusal}")
    if result.exit_code:
        raise OpsctlError(f"drill {result.outcome}: " + "; ".join(result.failures[:5]),
                          hint=f"see the report: {rel_path(result.paths['md'])}")


@drill.command()
@click.argument("run_id", required=False, default="latest", metavar="[RUN_ID|latest]")
@click.option("--format", "fmt", type=choice(["md", "html", "json"]), hidden=True,
              help="Deprecated: -o md|html|json.")
@click.option("--path", "path_only", is_flag=True, help="Print only the report file's path (-o md, html or json:"
                                                        " that file; default the Markdown).")
@click.option("-o", "--output", "output", type=choice(["table", "json", "yaml", "md", "html"]), default="table",
              show_default=True, help="Output format: the summary (table), the report as JSON or YAML (stable for"
                                      " scripts), or the report file itself (md, html).")
@click.pass_obj
def report(app, run_id, fmt, path_only, output):
    """Show a run's report (default: the newest run).

    \b
    Examples:
      opsctl drill report
      opsctl drill report 20261129T101500Z-vendor-outage-1a2b -o json
      opsctl drill report latest -o html --path
      opsctl drill report -o md | less
    """
    from opsctl.drills.render import summary_text
    from opsctl.drills.report_model import read_report
    from opsctl.drills.state import find_run
    from opsctl.errors import NoDataError, UsageError

    if fmt:
        if output != "table" and output != fmt:
            raise UsageError(f"--format {fmt} and -o {output} contradict each other: give -o alone")
        click.echo(f"note: --format is deprecated: use -o {fmt}", err=True)
        output = fmt
    fmt = output if output in ("md", "html") or (output == "json" and path_only) else None
    state = find_run(app.config.drills_path, run_id)
    path = state.report_path(fmt or "md")
    if not state.report_path("json").exists():
        raise NoDataError(f"drill {state.run_id} has no report yet ({'running' if state.is_running() else state.phase})",
                          hint="an interrupted drill gets its report from `opsctl drill cleanup`")
    if path_only:
        click.echo(str(path))
        return
    if fmt:
        click.echo(path.read_text().rstrip("\n"))
        return
    stored = read_report(state.report_path("json"))  # one line, exit 3, when it is not a drill report
    paths = {k: str(state.report_path(k)) for k in ("md", "json", "html")}
    emit(stored.to_dict(), output, table=lambda _: summary_text(stored, paths))


@drill.command()
@click.argument("scenario", required=False, metavar="[SCENARIO]",
                shell_complete=lambda c, p, i: _complete_scenario(c, p, i))
@click.option("--mode", type=choice(["embedded", "live", "chain"]), default=None,
              help="Only the runs of this mode (their times are not comparable across modes).")
@click.option("--html", "html_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write the trend as a chart (SVG in a self-contained HTML page) to FILE.")
@output_option
@click.pass_obj
def history(app, scenario, mode, html_file, output):
    """The trend of a scenario's drills: detect, mitigate and budget spent across its runs.

    One row a finished run (oldest first), then the newest run against the median of the runs
    before it, per measure (better, worse or the same within 5%). Without SCENARIO: every
    scenario that has runs. Exit 3 when there is no finished run to show.

    \b
    Examples:
      opsctl drill history vendor-outage
      opsctl drill history vendor-outage --mode embedded --html history.html
      opsctl drill history -o json
    """
    from pathlib import Path

    from opsctl.drills.history import history_data, load_history, render_html, trend_text, value_text
    from opsctl.drills.text import rel_path
    from opsctl.errors import NoDataError, UsageError
    from opsctl.statefile import atomic_file

    groups = load_history(app.config.drills_path, scenario, mode)
    if not groups:
        what = f"scenario {scenario!r}" if scenario else "any scenario"
        raise NoDataError(f"no finished drill runs of {what}" + (f" in {mode} mode" if mode else "")
                          + f" under {app.config.drills_path}",
                          hint="run one: opsctl drill run " + (scenario or "vendor-outage"))
    data = history_data(groups)
    if html_file:
        try:
            with atomic_file(Path(html_file), mode=0o644) as fh:
                fh.write(render_html(groups))
        except OSError as exc:
            raise UsageError(f"cannot write {html_file}: {exc.strerror or exc}") from None

    def table(rows):
        out = []
        for g in rows:
            runs = groups[g["scenario"]]
            out.append(f"{g['scenario']}: {g['title']} ({len(runs)} run(s))")
            out.append(render_table(["RUN", "MODE", "OUTCOME", "DETECT", "MITIGATE", "BUDGET", "ITEMS"], [
                [r.run_id, r.mode, r.outcome, value_text(r.detect, "duration"), value_text(r.mitigate, "duration"),
                 value_text(r.budget_spent, "share"), r.action_items] for r in runs]))
            out.append(f"trend: {trend_text(g['trend'])}")
            out.append("")
        if html_file:
            out.append(f"chart: {rel_path(html_file)}")
        return "\n".join(out).rstrip("\n")

    emit(data, output, table=table)
    if html_file and output != "table":
        click.echo(f"chart: {rel_path(html_file)}", err=True)


@drill.command()
@click.argument("run_id", required=False, metavar="[RUN_ID]")
@click.option("--dry-run", is_flag=True, help="Show what would be rolled back; change nothing.")
@output_option
@click.pass_obj
def cleanup(app, run_id, dry_run, output):
    """Finish the rollbacks of drills whose process died (kill -9, a crash), from their saved state.

    Removes the drill's faults, puts the split back (only if nobody changed it since) and resolves
    the drill's pages, then writes the run's report. A drill still running is left alone (exit 5
    when named). Exit 1 when something could not be undone.

    \b
    Examples:
      opsctl drill cleanup
      opsctl drill cleanup 20261129T101500Z-vendor-outage-1a2b --dry-run
    """
    from opsctl.drills.cleanup import cleanup as do_cleanup
    from opsctl.errors import OpsctlError

    results = do_cleanup(app.config, run_id, dry_run=dry_run, progress=None if output != "table" else _progress)
    emit(results, output, table=lambda rows: "\n".join(
        f"{r['run_id']}: {r['status']}: {r['message']}" for r in rows) if rows else "no interrupted drill to clean up")
    bad = [r for r in results if r["status"] in ("failed", "incomplete")]
    if bad:
        raise OpsctlError(f"{len(bad)} drill(s) could not be fully rolled back: "
                          + "; ".join(f"{r['run_id']}: {r['message']}" for r in bad))


def _complete_scenario(ctx, param, incomplete):
    """Scenario names (drills.scenarios, then the shipped ones) that match, else files
    (complete.names_or_files)."""
    from opsctl.cli.complete import names_or_files, scenarios

    return names_or_files(scenarios(ctx, param, incomplete), incomplete)
