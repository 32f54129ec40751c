"""`opsctl slo report|validate|rules|alerts|dashboard|convert`: each body parses, calls the core
(`opsctl.slo`) and renders (`slo_render.py`, or the document as JSON/YAML).

Over 400 lines for its six commands' --help: their docstrings with examples and the options'
help are about 140 of them (the help text is the command's documentation, kept beside it)."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option
from opsctl.cli.params import TIME, choice
from opsctl.cli.source_options import open_checked_source, source_options
from opsctl.cli.main import all_services_option
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


def _slo_paths(app, paths):
    """The files and directories given, an SLO name of the configured dir standing for its file
    (`opsctl slo report llm-inference-databricks-availability`); none: the configured dir."""
    if not paths:
        return [app.config.slo_dir]
    from pathlib import Path

    named = [p for p in paths if not Path(p).exists() and "/" not in p and not p.endswith((".yaml", ".yml"))]
    if not named:
        return list(paths)
    from opsctl.slo.loading import load_slos

    cfg = app.config
    files = {s.name: s.file for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)}
    return [files.get(p, p) for p in paths]


def _complete_slo(ctx, param, incomplete):
    from click.shell_completion import CompletionItem

    from opsctl.cli.complete import slo_names

    return [CompletionItem(n) for n in slo_names(ctx, param, incomplete)] + [CompletionItem(incomplete, type="file")]


@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=_complete_slo)
@click.option("--prometheus-url", envvar="OPSCTL_PROMETHEUS_URL", metavar="URL",
              help="Also ask this Prometheus how many series each SLO query answers (one is wanted).")
@click.option("--at", "at", type=TIME, help="With --prometheus-url: count the series at this instant (default: now).")
@output_option
@click.pass_obj
def validate(app, paths, prometheus_url, at, output):
    """Check SLO files; every problem is listed with its file and field (exit 2).

    With --prometheus-url, each query is also run over 5 minutes: one answering several series
    (e.g. per instance, without sum) is a problem, since no single number could be its SLI.

    \b
    Examples:
      opsctl slo validate slos/
      opsctl slo validate slos/ -o json | jq -r '.[].name'
      opsctl slo validate slos/ --prometheus-url http://localhost:9090
    """
    from opsctl.slo.loading import load_slos

    slos = load_slos(_slo_paths(app, paths), app.config.backends, config=app.config)
    if app.config.requires_service_matcher:
        from opsctl.slo.service_matcher import check_service_matchers

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
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=_complete_slo)
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
    slos = load_slos(_slo_paths(app, paths), cfg.backends, config=cfg)
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
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=_complete_slo)
@click.option("--format", "fmt", type=choice(["rules", "prometheusrule"]), default="rules", show_default=True,
              help="A Prometheus rule file, or a monitoring.coreos.com/v1 PrometheusRule manifest.")
@click.option("--out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write to FILE (atomically) instead of standard output.")
@click.pass_obj
def rules(app, paths, fmt, out):
    """Prometheus recording and burn-rate alerting rules generated from the SLOs.

    Per SLO, one rule group: its error ratio over 5m, 30m, 1h, 2h, 6h, 1d, 3d and the period
    (slo:sli_error:ratio_rate<window>), its objective, error budget and budget remaining; and
    the multi-window multi-burn-rate alerts SloBurnRatePage and SloBurnRateTicket with the
    `for:`, minimum-traffic guard, labels and runbook links from the config's `alerting:`.
    An SLO that cannot be expressed (a latency SLO without histogram buckets) is an error (exit 2).

    \b
    Examples:
      opsctl slo rules > slo-rules.yaml && promtool check rules slo-rules.yaml
      opsctl slo rules slos/ --format prometheusrule --out deploy/slo-prometheusrule.yaml
    """
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from opsctl.slo.rules import count_rules, header, render_yaml, rules_document, write_atomic

    cfg = app.config
    settings = RuleSettings.from_config(cfg)
    plans = plan_rules(load_slos(_slo_paths(app, paths), cfg.backends, config=cfg), settings)
    document = rules_document(plans, settings, fmt)
    from opsctl.quality.rules import add_quality_group  # the live quality rules ride along (quality.rules)

    add_quality_group(document, cfg)
    text = render_yaml(document, header(plans, settings))
    if out:
        write_atomic(out, text)
        groups, records, alerts = count_rules(document)
        click.echo(f"wrote {out}: {groups} groups, {records} recording rules, {alerts} alerting rules", err=True)
    else:
        click.echo(text, nl=False)


@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=_complete_slo)
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
      opsctl slo alerts                                   # embedded store, at its newest data
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
    plans = plan_rules(load_slos(_slo_paths(app, paths), cfg.backends, config=cfg), settings)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    when, aligned = _aligned(source, when, at, cfg)
    result = evaluate_plans(plans, source, when, settings)
    data = result.to_dict()
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



@slo.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=_complete_slo)
@click.option("--out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write to FILE (atomically) instead of standard output.")
@click.option("--out-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Write every board as DIR/<uid>.json (with --all-services: the overview and each service's).")
@click.option("--uid", default=None, help="The board's Grafana uid.  [default: opsctl-slo-<service>, opsctl-slo-fleet]")
@click.option("--all-services", is_flag=True,
              help="The fleet's overview of every service: the configs given with --service-config, else this one.")
@click.option("--service-config", "service_configs", multiple=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False),
              help="With --all-services: one service's config, with its own SLO dir (repeatable).")
@click.option("--drills-out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write the drills' windows as OpenMetrics (opsctl_drill_active), to backfill with promtool.")
@click.pass_obj
def dashboard(app, paths, out, out_dir, uid, all_services, service_configs, drills_out):
    """Grafana dashboards (JSON models, ready for file provisioning) over the recorded SLO series.

    One service's board: error budget left, burn rate per alert window against its threshold, SLI
    over time against the objective, and the traffic split between backends, for the SLOs picked
    by its `$slo` variable. With --all-services, the fleet's overview: every SLO sorted by budget
    left, budget left over time, burn per alert pair against its thresholds and each service's
    split, with `$service` and `$slo` variables. Every board is checked before it is written: it
    round-trips through Grafana's schema (grafana-foundation-sdk) and each query reads only series
    `opsctl slo rules` records, with a service matcher. Load those rules first. Drills are annotated
    from the windows --drills-out writes (backfill them into Prometheus with promtool).

    \b
    Examples:
      opsctl slo dashboard --out /etc/grafana/dashboards/opsctl-slo-llm-inference.json
      opsctl slo dashboard slos/ | jq '.panels[].title'
      opsctl slo dashboard --all-services --service-config a.yaml --service-config b.yaml --out-dir grafana/
    """
    import json
    from pathlib import Path

    from opsctl.errors import UsageError
    from opsctl.slo.dashboard import ServiceSlos
    from opsctl.slo.dashboard_check import checked_boards
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules
    from opsctl.slo.rules import write_atomic

    if out and out_dir:
        raise UsageError("--out and --out-dir exclude each other")
    if service_configs and not all_services:
        raise UsageError("--service-config needs --all-services")
    if all_services and paths:
        raise UsageError("--all-services reads each service's own SLO dir: drop the SLO paths")

    def entry(cfg, slo_paths):
        settings = RuleSettings.from_config(cfg)
        return ServiceSlos(settings, tuple(plan_rules(load_slos(slo_paths, cfg.backends, config=cfg), settings)))

    if all_services and service_configs:
        from opsctl.config.loading import load_config_file

        configs = [load_config_file(Path(p)) for p in service_configs]
        entries = [entry(cfg, [cfg.slo_dir]) for cfg in configs]
    else:  # --all-services without --service-config: the service catalog's (or the one config)
        configs = app.service_configs() if all_services else [app.config]
        entries = [entry(cfg, [cfg.slo_dir] if all_services else _slo_paths(app, paths)) for cfg in configs]
    boards = checked_boards(entries, fleet=all_services, uid=uid)
    if drills_out:
        from opsctl.drills.spend import drill_windows
        from opsctl.slo.dashboard_events import drill_openmetrics

        windows = [(cfg.service, drill_windows(cfg)) for cfg in configs]
        write_atomic(drills_out, drill_openmetrics(windows))
        click.echo(f"wrote {drills_out}: {sum(len(w) for _, w in windows)} drill window(s)"
                   f" (promtool tsdb create-blocks-from openmetrics {drills_out} DATA_DIR)", err=True)
    slos = sum(len(e.plans) for e in entries)
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        for name, doc in boards.items():
            write_atomic(Path(out_dir) / name, json.dumps(doc, indent=2) + "\n")
        click.echo(f"wrote {len(boards)} Grafana dashboard(s) to {out_dir}: {', '.join(boards)}"
                   f" over {slos} SLOs of {len(entries)} service(s)", err=True)
        return
    doc = next(iter(boards.values()))  # the overview, or the one service's board
    text = json.dumps(doc, indent=2) + "\n"
    if out:
        write_atomic(out, text)
        click.echo(f"wrote {out}: Grafana dashboard {doc['uid']!r} over {slos} SLOs", err=True)
    else:
        click.echo(text, nl=False)


@slo.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--to", "to", required=True, type=choice(["openslo", "slo-generator", "sloth", "pyrra"]),
              help="The format to write.")
@click.option("--out-dir", "out", default="-", show_default=True, metavar="DIR|-",
              help="A directory to write one <slo-name>.yaml per SLO into, or - for standard output.")
@click.option("--force", is_flag=True, help="Overwrite files that already exist in DIR.")
@click.pass_obj
def convert(app, files, to, out, force):
    """Rewrite SLO files as OpenSLO v1, slo-generator v2, Sloth or Pyrra, keeping their meaning.

    Reads slo-generator and OpenSLO files alike (OpenSLO references resolve across the files and
    directories given). What is written loads back to the same SLO: selectors, goal, backend,
    service, method. OpenSLO files get one rolling time window, the config's slos.period, and
    Occurrences budgeting. What has no counterpart in the other format (slo-generator's
    filter_bad or non-default operators, to OpenSLO; anything but a latency SLO over selectors, to
    Pyrra; a grouping, to any format but Pyrra) is refused with its file and key (exit 2).

    \b
    Examples:
      opsctl slo convert slos/databricks-availability.yaml --to openslo
      opsctl slo convert slos/ --to openslo --out-dir slos-openslo/
      opsctl slo convert slos/examples/openslo/ --to slo-generator --out-dir converted/ && opsctl slo validate converted/
    """
    from pathlib import Path

    from opsctl.errors import UsageError
    from opsctl.slo.convert import OPENSLO_DROPPED, convert as run, render
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rules import write_atomic

    cfg = app.config
    converted = run(load_slos(list(files), cfg.backends, config=cfg), to, cfg.slos.period_seconds)
    if to == "slo-generator" and any(slo.source_format == "openslo" for slo, _ in converted):
        click.echo("note: not carried into slo-generator's format: " + "; ".join(OPENSLO_DROPPED), err=True)
    if out == "-":
        click.echo(render(doc for _, doc in converted), nl=False)
        return
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{out}: not a directory", hint="give a directory, or - for standard output")
    targets = [(directory / f"{slo.name}.yaml", doc) for slo, doc in converted]
    existing = [str(p) for p, _ in targets if p.exists()]
    if existing and not force:
        raise UsageError(f"would overwrite {len(existing)} file(s): {', '.join(existing)}",
                         hint="pass --force to overwrite, or write to another directory")
    directory.mkdir(parents=True, exist_ok=True)
    for path, doc in targets:
        write_atomic(str(path), render([doc]))
    click.echo(f"wrote {len(targets)} {to} SLO file(s) to {directory}", err=True)
