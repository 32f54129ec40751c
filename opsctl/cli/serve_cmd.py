"""`opsctl serve`: the webhook receiver that acts on alerts by policy (starlette and uvicorn load here only)."""

from __future__ import annotations

import click

from opsctl.cli.params import choice


@click.command()
@click.option("--bind", metavar="HOST:PORT", help="Listen address (default: automation.bind, 127.0.0.1:9095).")
@click.option("--token-file", metavar="FILE", type=click.Path(dir_okay=False),
              help="File holding the webhook token (default: automation.token, else $OPSCTL_WEBHOOK_TOKEN).")
@click.option("--dry-run", is_flag=True, help="Decide and record every action, change nothing.")
@click.option("--log-level", type=choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
@click.pass_obj
def serve(app, bind, token_file, dry_run, log_level):
    """Receive Alertmanager and PagerDuty webhooks and act by the automation policies.

    \b
    Endpoints:
      POST /v1/alertmanager   Alertmanager webhook (bearer token or basic auth)
      POST /v1/pagerduty      PagerDuty webhooks v3 (X-PagerDuty-Signature, automation.pagerduty_secrets)
      GET  /healthz /readyz /metrics

    \b
    Examples:
      OPSCTL_WEBHOOK_TOKEN=$(cat /run/secrets/token) opsctl serve
      opsctl serve --bind 0.0.0.0:9095 --token-file /var/run/secrets/opsctl/token
      opsctl serve --dry-run          # see what the policies would do, change nothing
      opsctl --catalog services serve # every service of the catalog, routed by its service label

    \b
    With a catalog (--catalog DIR, $OPSCTL_CATALOG) and no --service, one serve acts for every
    service: each alert goes to the service its `service` label (metrics.service_label) names, by
    that service's policies, split and state, with its own workers and Lease; an alert naming no
    service of the catalog is counted and logged, never acted on. --service NAME serves one.
    """
    fleet = _fleet_configs(app)
    if fleet is not None:
        from opsctl.automation.fleet import check_fleet, serve_fleet

        check_fleet(fleet)  # refused before anything starts when the services disagree on the server's settings
        idle = [c.service for c in fleet if not c.automation.policies]
        if idle:
            click.echo(f"warning: automation.policies is empty for {', '.join(idle)}: their deliveries are"
                       " recorded, nothing is done", err=True)
        serve_fleet(fleet, bind=bind, token_file=token_file, dry_run=dry_run, log_level=log_level)
        return
    from opsctl.automation.server import serve as run

    cfg = app.config
    if not cfg.automation.policies:
        click.echo("warning: automation.policies is empty: deliveries are recorded, nothing is done", err=True)
    run(cfg, bind=bind, token_file=token_file, dry_run=dry_run, log_level=log_level)


def _fleet_configs(app):
    """Every service's config when serve runs for a catalog without --service / $OPSCTL_SERVICE,
    else None (one service, as before)."""
    from opsctl.config.catalog import find_catalog

    if app.service:
        return None
    catalog = find_catalog(app.config_path, app.catalog_dir)
    if catalog is None:
        return None
    return catalog.load_all()
