"""`opsctl slo rules|dashboard|convert|routes`: the SLOs written as other tools' files (Prometheus rules,
Grafana boards, another SLO format, the Alertmanager routing); none reads a metric source. Each body parses, calls the core
(`opsctl.slo`) and writes; slo_cmd.py adds them to the `slo` group."""

from __future__ import annotations

import click

from opsctl.cli.params import choice
from opsctl.cli.slo_paths import complete_slo, slo_paths
from opsctl.slo.routing import RouteTargets


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=complete_slo)
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
    plans = plan_rules(load_slos(slo_paths(app, paths), cfg.backends, config=cfg), settings)
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


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(), shell_complete=complete_slo)
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
        entries = [entry(cfg, [cfg.slo_dir] if all_services else slo_paths(app, paths)) for cfg in configs]
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


@click.command()
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


@click.command()
@click.option("--out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write to FILE (atomically) instead of standard output.")
@click.option("--check", "check_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write nothing; exit 1 when FILE differs from what the config generates (CI).")
@click.option("--serve-url", default=RouteTargets.serve_url, show_default=True, metavar="URL",
              help="Where Alertmanager reaches opsctl serve (the webhook path /v1/alertmanager is added).")
@click.option("--ticket-url", default=RouteTargets.ticket_url, show_default=True, metavar="URL",
              help="The ticket-queue bridge's webhook.")
@click.option("--secrets-dir", default=RouteTargets.secrets_dir, show_default=True, metavar="DIR",
              help="Where the secret files are mounted in Alertmanager: pagerduty/routing-key, tickets/token, opsctl/token.")
@click.option("--part", type=choice(["all", "automation"]), default="all", show_default=True,
              help="all: the whole configuration; automation: the paging route and serve's routes with their"
                   " receivers, for an Alertmanager that has a config already.")
@click.option("-o", "--output", "output", type=choice(["yaml", "json"]), default="yaml", show_default=True,
              help="The document as Alertmanager's YAML (with its header) or as JSON.")
@click.pass_obj
def routes(app, out, check_file, serve_url, ticket_url, secrets_dir, part, output):
    """The Alertmanager configuration generated from automation.policies.

    Pages go to one route grouped by service whose receiver holds PagerDuty and the opsctl serve
    webhook, so Alertmanager's page and the automation's share one PagerDuty incident (its dedup
    key is the group key's sha256); alerts a policy acts on outside it go to serve; tickets and
    anything else to the ticket queue. Secrets are referenced by file, never inlined.

    \b
    Examples:
      opsctl slo routes --out deploy/alertmanager.yml && amtool check-config deploy/alertmanager.yml
      opsctl slo routes --check deploy/alertmanager.yml
      opsctl slo routes --part automation --out deploy/alertmanager-opsctl-receiver.yml
      opsctl slo routes --serve-url http://127.0.0.1:9095 -o json
    """
    import json
    from pathlib import Path

    from opsctl.errors import OpsctlError, UsageError
    from opsctl.slo.routing import automation_document, render, routing_document
    from opsctl.slo.rules import write_atomic

    targets = RouteTargets(serve_url=serve_url, ticket_url=ticket_url, secrets_dir=secrets_dir)
    build = automation_document if part == "automation" else routing_document
    text = (json.dumps(build(app.config, targets), indent=2) + "\n" if output == "json"
            else render(app.config, targets, part=part))
    if check_file:
        path = Path(check_file)
        if not path.is_file():
            raise UsageError(f"--check: {path}: no such file", hint=f"run `opsctl slo routes --out {path}`")
        if path.read_text(encoding="utf-8") != text:
            raise OpsctlError(f"{path} differs from what the config generates",
                              hint=f"run `opsctl slo routes --out {path}` and commit the result")
        click.echo(f"{path}: current", err=True)
    elif out:
        write_atomic(out, text)
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=False)
