"""The `opsctl` entry point: global options, lazy command groups, and error -> exit code mapping."""

from __future__ import annotations

import importlib
import os
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
    "incident": ("opsctl.cli.incident_cmd:incident", "The automation's incidents: list, show, take over."),
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

    def __init__(self, config_path: str | None, service: str | None = None, catalog_dir: str | None = None):
        self.config_path = config_path
        self.service = service
        self.catalog_dir = catalog_dir
        self.prometheus_url: str | None = None  # a traffic command's --prometheus-url ($OPSCTL_PROMETHEUS_URL)
        self.fleet: dict | None = None  # under --all-services: what the services' bodies share (one dict per run)
        self._config = None

    def for_config(self, cfg) -> "AppContext":
        """The context of one service's config (what --all-services runs each command body with)."""
        child = AppContext(self.config_path, cfg.service, self.catalog_dir)
        child.prometheus_url = self.prometheus_url
        if self.prometheus_url:
            from opsctl.cli.source_options import with_prometheus_url

            cfg = with_prometheus_url(cfg, self.prometheus_url)
        child._config = cfg
        return child

    def service_configs(self) -> list:
        """Every service's config for --all-services: the catalog's, in name order, or the single one."""
        from opsctl.config.catalog import find_catalog

        catalog = find_catalog(self.config_path, self.catalog_dir)
        if catalog is None:
            return [self.config]
        if self.service:
            from opsctl.errors import UsageError

            raise UsageError(f"--all-services and --service {self.service} name different things",
                             hint="drop one of them (unset $OPSCTL_SERVICE for --all-services)")
        return catalog.load_all()

    @property
    def config(self):
        if self._config is None:
            from opsctl.config.catalog import load_service_config

            cfg = load_service_config(self.config_path, self.catalog_dir, self.service)
            if self.prometheus_url:
                from opsctl.cli.source_options import with_prometheus_url

                cfg = with_prometheus_url(cfg, self.prometheus_url)
            self._config = cfg
            from opsctl.cli import startup

            startup.settled()
        return self._config


def all_services_option(command):
    """`--all-services` on a read command: its body runs once per service of the catalog (stdout
    taken per service), then the results are shown together: `-o json|yaml` a list whose items carry
    a `service` key (a command answering a mapping gives one item per service), the table grouped
    under one `== <service> ==` heading per service. A service that fails is reported on stderr
    (`service NAME: ...`) without stopping the others; the exit code is then the highest of theirs.

    Put it between `@click.pass_obj` and the function; the body reads `app.config` as usual."""
    import functools

    @click.option("--all-services", "all_services", is_flag=True,
                  help="Run for every service of the catalog (table grouped by service; JSON a list with `service`).")
    @functools.wraps(command)
    def wrapper(app, *args, all_services=False, **kwargs):
        if not all_services:
            return command(app, *args, **kwargs)
        return _run_all_services(app, command, args, kwargs)

    return wrapper


def _run_all_services(app, command, args, kwargs):
    import contextlib
    import io
    import json

    from opsctl.errors import OpsctlError

    output = kwargs.get("output", "table")
    combined: list = []
    sections: list[str] = []
    failed: list[tuple[str, OpsctlError]] = []
    shared: dict = {}
    for cfg in app.service_configs():
        buffer = io.StringIO()
        run_kwargs = dict(kwargs, output="table" if output == "table" else "json") if "output" in kwargs else kwargs
        try:
            with contextlib.redirect_stdout(buffer):
                child = app.for_config(cfg)
                child.fleet = shared
                command(child, *args, **run_kwargs)
        except OpsctlError as exc:
            failed.append((cfg.service, exc))
            click.echo(f"error: service {cfg.service}: {exc}", err=True)
        text = buffer.getvalue()
        if output == "table":
            empty = f"(failed, exit {failed[-1][1].exit_code}: the error is above)" if (
                failed and failed[-1][0] == cfg.service) else "(nothing shown)"
            sections.append(f"== {cfg.service} ==\n" + (text.rstrip("\n") or empty))
        elif text.strip():
            data = json.loads(text)
            items = data if isinstance(data, list) else [data]
            combined.extend({"service": cfg.service, **item} if isinstance(item, dict)
                            else {"service": cfg.service, "value": item} for item in items)
    if output == "table":
        click.echo("\n\n".join(sections))
    else:
        from opsctl.cli.output import emit

        emit(combined, output)
    if failed:
        worst = max(failed, key=lambda f: f[1].exit_code)[1]
        error = OpsctlError(f"{len(failed)} of the services failed: "
                            + ", ".join(f"{name} (exit {exc.exit_code})" for name, exc in failed))
        error.exit_code = worst.exit_code
        raise error


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", "config_path", metavar="PATH", envvar="OPSCTL_CONFIG",
              help="Config file (default: $OPSCTL_CONFIG, ./opsctl.yaml, else the built-in embedded default).")
@click.option("--catalog", "catalog_dir", metavar="DIR", envvar="OPSCTL_CATALOG",
              help="Service catalog: DIR/<service>.yaml, DIR/_defaults.yaml under each (default:"
                   " $OPSCTL_CATALOG, else ./services/ when no config file is found).")
@click.option("--service", "service", metavar="NAME", envvar="OPSCTL_SERVICE",
              help="The service to act on ($OPSCTL_SERVICE): one of the catalog's, or the config's `service:`.")
@click.version_option(__version__, prog_name="opsctl")
@click.pass_context
def cli(ctx, config_path, catalog_dir, service):
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
    ctx.obj = AppContext(config_path, service, catalog_dir)


def run() -> None:
    """The process's entry (`python -m opsctl`; the console script once pyproject names it): `main()`
    with the collector held off while the CLI starts (opsctl/cli/startup.py)."""
    from opsctl.cli import startup

    startup.pause()
    main()


def main(argv: list[str] | None = None) -> None:
    if os.environ.get("_OPSCTL_COMPLETE", "").startswith("fish"):  # Click's fish script fails on fish 3.6
        from opsctl.cli.fish_complete import register

        register()
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
