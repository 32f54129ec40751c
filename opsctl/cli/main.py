"""The `opsctl` entry point: global options, lazy command groups, and error -> exit code mapping."""

from __future__ import annotations

import importlib
import sys

import click

from opsctl import __version__
from opsctl.errors import OpsctlError

# name -> "module:attribute". Modules load only when their command runs, so `opsctl --help`
# and the fast paths never import kubernetes, pagerduty or slo-generator.
COMMANDS: dict[str, tuple[str, str]] = {
    "config": ("opsctl.cli.config_cmd:config", "Validate and show the configuration."),
    "init": ("opsctl.cli.init_cmd:init", "Write a commented config, SLOs and drill scenarios that run as they are."),
    "slo": ("opsctl.cli.slo_cmd:slo", "SLO reports, error budgets and burn rates."),
    "metrics": ("opsctl.cli.metrics_cmd:metrics", "Load client-side metrics into the embedded store."),
    "sim": ("opsctl.cli.sim_cmd:sim", "Simulate client-side traffic into the embedded store."),
    "serve": ("opsctl.cli.serve_cmd:serve", "Receive Alertmanager/PagerDuty webhooks and act by policy."),
    "page": ("opsctl.cli.page_cmd:page", "Page on-call, follow incidents, on-call and maintenance windows."),
    "ticket": ("opsctl.cli.ticket_cmd:ticket", "File vendor support tickets and read them back."),
    "probe": ("opsctl.cli.probe_cmd:probe", "Golden-set consistency probe of the backends' APIs."),
    "quality": ("opsctl.cli.quality_cmd:quality", "Live quality rules on the proxy's counters: rules, alerts."),
    "shadow": ("opsctl.cli.shadow_cmd:shadow", "Shadow traffic: is a backend ready for real traffic?"),
    "ab": ("opsctl.cli.ab_cmd:ab", "A/B equivalence (TOST) of a business metric for a migration."),
    "cost": ("opsctl.cli.cost_cmd:cost", "Cost per million tokens per backend."),
    "traffic": ("opsctl.cli.traffic_cmd:traffic", "Traffic split: status, set, ramp, failover, restore, history."),
    "freeze": ("opsctl.cli.freeze_cmd:freeze", "Change freezes: status and list."),
    "rollout": ("opsctl.cli.rollout_cmd:rollout", "Rollout plans: shadow, A/B, ramp and cost between the freezes."),
    "drill": ("opsctl.cli.drill_cmd:drill", "Game-day drills: mock outages, measured response, reports."),
    "runbook": ("opsctl.cli.runbook_cmd:runbook", "Runbooks generated from the config: generate, check, list."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module_name, attr = entry[0].split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class AppContext:
    """Carried in click's ctx.obj; loads the config once, on first use."""

    def __init__(self, config_path: str | None, service: str | None = None):
        self.config_path = config_path
        self.service = service
        self.prometheus_url: str | None = None  # a traffic command's --prometheus-url ($OPSCTL_PROMETHEUS_URL)
        self._config = None

    @property
    def config(self):
        if self._config is None:
            from opsctl.config import load_config

            cfg = load_config(self.config_path)
            if self.service and self.service != cfg.service:
                from opsctl.errors import UsageError

                raise UsageError(f"--service {self.service}: {cfg.source_path} describes service {cfg.service!r}",
                                 hint="pick that config with --config PATH (or $OPSCTL_CONFIG), or drop --service"
                                      " / unset $OPSCTL_SERVICE")
            if self.prometheus_url:
                from opsctl.cli.source_options import with_prometheus_url

                cfg = with_prometheus_url(cfg, self.prometheus_url)
            self._config = cfg
        return self._config


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", "config_path", metavar="PATH", envvar="OPSCTL_CONFIG",
              help="Config file (default: $OPSCTL_CONFIG, ./opsctl.yaml, else the built-in embedded default).")
@click.option("--service", "service", metavar="NAME", envvar="OPSCTL_SERVICE",
              help="The service to act on ($OPSCTL_SERVICE); must be the config's `service:`.")
@click.version_option(__version__, prog_name="opsctl")
@click.pass_context
def cli(ctx, config_path, service):
    """opsctl keeps an LLM inference service at four nines.

    \b
    Examples:
      opsctl drill run chaos/vendor-outage.yaml   # a whole game-day drill on the embedded default
      opsctl slo report                           # SLOs, error budget left, burn rates
      opsctl slo alerts --prometheus-url http://prometheus:9090
      opsctl traffic failover --from databricks --incident INC-123 --dry-run
      opsctl traffic ramp databricks=80 internal=20 --step 10 --reason rollout --yes
      opsctl page trigger -s "databricks 5xx at 12%" --component databricks
      opsctl ticket file --vendor databricks --category inference --severity Sev2 --subject "..."
      opsctl runbook list                         # the runbook for every alert and scenario

    Exit codes: 0 ok, 1 failed, 2 invalid input, 3 no data, 4 refused by a guard, 5 conflict.
    """
    ctx.obj = AppContext(config_path, service)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="opsctl", standalone_mode=False)
    except OpsctlError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()  # a group without a command: its help is the answer
        sys.exit(2)
    except click.UsageError as exc:
        # One line, like every other error: what is wrong and where to look next.
        where = exc.ctx.command_path if exc.ctx is not None else "opsctl"
        click.echo(f"error: {_usage_text(exc.format_message(), where)} (see `{where} --help`)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"error: {_one_line(exc.format_message())}", err=True)
        sys.exit(2 if exc.exit_code == 2 else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _usage_text(message: str, where: str) -> str:
    """Click's usage message in opsctl's words: "Got unexpected extra argument(s) (x y)" says
    neither which command nor what it takes."""
    import re

    text = _one_line(message)
    extra = re.fullmatch(r"Got unexpected extra arguments? \((.*)\)", text)
    if extra is None:
        return text
    words = extra.group(1)
    if "=" in words and where.startswith("opsctl traffic"):
        return (f"`{where}` takes no BACKEND=PCT here ({words}); the split is written BACKEND=PCT on"
                " `traffic set` and `traffic ramp` only")
    return f"`{where}` takes no argument {words!r} (an option's value with spaces needs quotes)"


if __name__ == "__main__":
    main()
