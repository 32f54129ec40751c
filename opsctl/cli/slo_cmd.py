"""`opsctl slo`: the group, and the commands that read SLOs and judge them against the metrics,
`report|validate|alerts`; each body parses, calls the core (`opsctl.slo`) and renders
(`slo_render.py`, or the document as JSON/YAML). The commands that write the SLOs as other tools'
files, `rules|dashboard|convert`, are slo_files_cmd.py's; the SLO paths both take, slo_paths.py's."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option
from opsctl.cli.params import TIME, choice
from opsctl.cli.source_options import open_checked_source, source_options
from opsctl.cli.main import all_services_option
from opsctl.cli.slo_files_cmd import convert, dashboard, routes, rules
from opsctl.cli.slo_paths import complete_slo, slo_paths
from opsctl.cli.slo_render import alerts_table, report_table, validate_table


@click.group()
def slo():
    """SLOs, error budgets and burn rates over the proxy's client-side metrics.

    \b
    Examples:
      opsctl slo report                                   # configured source and SLOs
      opsctl slo report --prometheus-url http://127.0.0.1:9090 slos/ -o json
      opsctl slo report --at 2026-11-26T15:00:00Z --fail-on page
      opsctl slo validate slos/
      opsctl slo rules --out slo-rules.yaml && promtool check rules slo-rules.yaml
      opsctl slo alerts --at 2026-11-26T15:00:00Z -o json
      opsctl slo dashboard --out grafana/opsctl-slo-llm-inference.json
      opsctl slo dashboard --all-services --service-config a.yaml --service-config b.yaml --out-dir grafana/
      opsctl slo convert slos/ --to openslo --out-dir slos-openslo/
    """


for _command in (rules, dashboard, convert, routes):  # the SLOs written as other tools' files: slo_files_cmd.py
    slo.add_command(_command)


@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=complete_slo)
@click.option("--prometheus-url", envvar="OPSCTL_PROMETHEUS_URL", metavar="URL",
              help="Also ask this Prometheus how many series each SLO query answers (one is wanted).")
@click.option("--at", "at", type=TIME, help="With --prometheus-url: count the series at this instant (RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m;"
                                               " default: now).")
@output_option
@click.pass_obj
def validate(app, paths, prometheus_url, at, output):
    """Check SLO files; every problem is listed with its file and field (exit 2).

    An SLO is its config's service's: a file naming another service (its service_name, or a
    selector's service label) is refused, naming the file and the fix.

    With --prometheus-url, each query is also run over 5 minutes: one answering several series
    (e.g. per instance, without sum) is a problem, since no single number could be its SLI.

    \b
    Examples:
      opsctl slo validate slos/
      opsctl slo validate slos/ -o json | jq -r '.[].name'
      opsctl slo validate slos/ --prometheus-url http://localhost:9090
    """
    from opsctl.slo.loading import load_slos

    from opsctl.slo.service_matcher import check_other_service, check_service_matchers

    slos = load_slos(slo_paths(app, paths), app.config.backends, config=app.config)
    check_other_service(slos, app.config)  # a file copied from another service's SLOs
    if app.config.requires_service_matcher:
        check_service_matchers(slos, app.config)
    if prometheus_url:
        from opsctl.errors import ConfigError
        from opsctl.slo.report_source import series_problems

        source, when = open_checked_source(app.config, "prometheus", prometheus_url, at)
        problems = series_problems(slos, source, when)
        if problems:
            raise ConfigError(f"{len(problems)} SLO query(ies) answer several series", problems=problems)
    data = [{"file": str(s.file), "name": s.name, "kind": s.kind, "goal": s.goal, "backend": s.backend,
             "format": getattr(s, "source_format", None), "notes": list(s.notes)} for s in slos]

    emit(data, output, table=validate_table)


@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=complete_slo)
@source_options
@click.option("--fail-on", type=choice(["page", "ticket"]), help="Exit 1 when any SLO is at this level or worse.")
@click.option("--exclude-drills", is_flag=True,
              help="Also show the budget without what drills on these systems spent (their recorded windows).")
@click.option("--cross-check", is_flag=True,
              help="Also have slo-generator compute every window's SLI from the same counts; exit 1 if it disagrees.")
@click.option("--export", "export_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Publish slo-generator's report of every SLO and window through the exporters FILE configures"
                   " (slo-generator's shared-config format: exporters: prometheus, cloudevent).")
@output_option
@click.pass_obj
@all_services_option
def report(app, paths, prometheus_url, source_kind, at, fail_on, exclude_drills, cross_check, export_file, output):
    """Per SLO: SLI over the period, error budget left, burn rates and alert status.

    Status follows the multi-window multi-burn-rate pairs (page: 1h & 5m, 6h & 30m; ticket:
    1d & 2h, 3d & 6h), their factors scaled to the SLO period. Exit 3 when any SLO has no data.
    The figures are opsctl's own; slo-generator is loaded only for --cross-check and --export.

    \b
    Examples:
      opsctl slo report
      opsctl slo report --exclude-drills -o json    # the budget with and without live drills
      opsctl slo report --cross-check               # slo-generator recomputes every SLI
      opsctl slo report --export exporters.yaml     # push to a Pushgateway, POST CloudEvents
    """
    from opsctl.errors import NoDataError, OpsctlError
    from opsctl.slo.loading import load_slos
    from opsctl.slo.report import build_report
    from opsctl.slo.report_source import source_notes, why_no_data

    cfg = app.config
    exporters = None
    if export_file:
        from opsctl.slo.export import load_exporters

        exporters = load_exporters(export_file)  # a bad file fails before any query
    slos = load_slos(slo_paths(app, paths), cfg.backends, config=cfg)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    when, aligned = _aligned(source, when, at, cfg)
    reads = None
    if app.fleet is not None:  # --all-services: every service at one instant, the recorded series read once
        from opsctl.slo.report import fleet_reads

        when = app.fleet.setdefault("at", when) if at is None else when
        reads = fleet_reads(app.fleet, source, when)
    progress = (lambda msg: click.echo(msg, err=True)) if output == "table" else None
    results = build_report(slos, source, when, cfg.slos.period_seconds, progress=progress, coverage=True,
                           recorded_interval=cfg.alerting.interval_seconds, cross_check=cross_check,
                           service=cfg.service, reads=reads)
    if exporters:
        _export(results, exporters, cfg.slos.period_seconds)
    rows = [r.to_dict() for r in results]
    said = source_notes(source)
    for row in rows:
        row["notes"] = ([aligned] if aligned else []) + said + row["notes"]
    if exclude_drills:
        from opsctl.drills.spend import with_drill_spend

        rows = with_drill_spend(cfg, results, rows, source, when)
    emit(rows, output, table=report_table)
    if cross_check:  # check_sli raised on any disagreement: reaching here means every window agreed
        click.echo(f"cross-check: ok, slo-generator's SLI agrees with opsctl's on every window with data"
                   f" of {len(results)} SLO(s)", err=True)
    broken = [f"{r.slo.file}: {r.slo.name}: {r.status.reason}" for r in results if r.status.reason.startswith("broken SLI")]
    if broken:
        raise NoDataError("; ".join(broken))
    unknown = [r.slo.name for r in results if r.status.level == "unknown"]
    if unknown:
        raise NoDataError(f"no data for {len(unknown)} SLO(s): {', '.join(unknown)}{why_no_data(source)}")
    if fail_on:
        levels = ("page",) if fail_on == "page" else ("page", "ticket")
        hit = [r.slo.name for r in results if r.status.level in levels]
        if hit:
            raise OpsctlError(f"{len(hit)} SLO(s) at {fail_on} or worse: {', '.join(hit)}")


def _export(results, exporters, period_seconds) -> None:
    from opsctl.slo.export import publish
    from opsctl.slo.generator import generator_reports
    from opsctl.slo.report import report_windows

    reports = {r.slo.name: generator_reports(r, report_windows(r.period_seconds)) for r in results}
    sent = publish(reports, exporters)
    names = ", ".join(e.name for e in exporters)
    click.echo(f"exported {sent} slo-generator reports ({len(reports)} SLOs x windows with data) to {names}", err=True)


def _aligned(source, when: float, at, cfg) -> tuple[float, str | None]:
    """An --at between two samples evaluates at the sample before it (see slo.report_source.align_at)."""
    from opsctl.slo.report_source import align_at

    return align_at(source, when, at is not None, scope=cfg.service_matcher)


@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=complete_slo)
@source_options
@click.option("--fail-on", type=choice(["page", "ticket"]), help="Exit 1 when an alert of this severity or worse fires.")
@output_option
@click.pass_obj
def alerts(app, paths, prometheus_url, source_kind, at, fail_on, output):
    """Burn-rate alerts firing at an instant, evaluated in-process with the generated rules' logic.

    Same windows, factors, minimum-traffic guard and `for:` as `opsctl slo rules`: what
    Prometheus would have firing with those rules on the same data. Exit 3 when an SLO has no data.

    \b
    Examples:
      opsctl slo alerts                                   # embedded store, at now (or its newest step before)
      opsctl slo alerts --at 2026-11-26T15:00:00Z -o json
      opsctl slo alerts --prometheus-url http://127.0.0.1:9090 --fail-on page
    """
    from opsctl.errors import NoDataError, OpsctlError
    from opsctl.slo.alerts import evaluate_plans
    from opsctl.slo.loading import load_slos
    from opsctl.slo.report_source import source_notes, why_no_data
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    cfg = app.config
    settings = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos(slo_paths(app, paths), cfg.backends, config=cfg), settings)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    when, aligned = _aligned(source, when, at, cfg)
    result = evaluate_plans(plans, source, when, settings)
    data = result.to_dict()
    data["periods"] = list(dict.fromkeys(p.period for p in plans))  # the header says them
    data["notes"] = ([aligned] if aligned else []) + source_notes(source) + result.notes()
    quality = _quality_alerts(cfg, source, when)
    if quality is not None:  # the live quality rules at the same instant (opsctl quality alerts)
        data["quality"] = quality.to_dict()
    emit(data, output, table=alerts_table)
    if result.unknown:
        raise NoDataError(f"no data for {len(result.unknown)} SLO(s): {', '.join(result.unknown)}{why_no_data(source)}")
    if fail_on:
        levels = ("page",) if fail_on == "page" else ("page", "ticket")
        hit = sorted({a.slo for a in [*result.firing, *result.absent, *(quality.firing if quality else [])]
                      if a.severity in levels})
        if hit:
            raise OpsctlError(f"{fail_on} alerts firing for {len(hit)} SLO(s): {', '.join(hit)}")


def _quality_alerts(cfg, source, when):
    from opsctl.quality.live import evaluate_quality
    from opsctl.quality.rules import plan_quality

    plan = plan_quality(cfg)
    return None if plan is None else evaluate_quality(plan, source, when)
