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
    """
    from opsctl.automation.server import serve as run

    cfg = app.config
    if not cfg.automation.policies:
        click.echo("warning: automation.policies is empty: deliveries are recorded, nothing is done", err=True)
    run(cfg, bind=bind, token_file=token_file, dry_run=dry_run, log_level=log_level)
