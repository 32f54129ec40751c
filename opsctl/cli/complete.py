"""Shell completion of values (Click's `shell_complete` callbacks): backends, `BACKEND=PCT`,
drill scenarios, SLO names, incident ids. Each reads the config the command line names
(--config, $OPSCTL_CONFIG, ./opsctl.yaml, the built-in default) and answers nothing rather than
fail: a completion never prints an error into the user's prompt.

    eval "$(_OPSCTL_COMPLETE=bash_source opsctl)"     # bash (zsh: zsh_source; fish: fish_source, see fish_complete.py)

An argument taking a name or a file (a scenario, an SLO) answers the names that match, or a file
entry when none does or what is typed looks like a path (`names_or_files`): Click's bash script
empties its list on a file entry, so names and a file entry together would complete nothing but files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from opsctl.config import Config


def _config(ctx):
    from opsctl.config.catalog import load_service_config

    root = ctx.find_root()
    return load_service_config(root.params.get("config_path"), root.params.get("catalog_dir"),
                               root.params.get("service"))


def _safe(values: Callable[["Config"], list[str]]):
    def complete(ctx, param, incomplete):
        try:
            names = values(_config(ctx))
        except Exception:  # a completion answers nothing rather than break the prompt
            return []
        return [n for n in names if n.startswith(incomplete)]

    return complete


backends = _safe(lambda cfg: list(cfg.backends))


def names_or_files(names: list[str], incomplete: str) -> list:
    """The names (already matched to `incomplete`), or Click's file entry when there is none or
    `incomplete` looks like a path (a `/`, a leading `.` or `~`, a .yaml/.yml/.json end)."""
    from click.shell_completion import CompletionItem

    path_like = "/" in incomplete or incomplete.startswith((".", "~")) or incomplete.endswith((".yaml", ".yml", ".json"))
    if names and not path_like:
        return [CompletionItem(n) for n in names]
    return [CompletionItem(incomplete, type="file")]


def assignments(ctx, param, incomplete):
    """`BACKEND=` for each backend not yet given on the line; after the `=`, nothing to guess."""
    if "=" in incomplete:
        return []
    given = {str(v).split("=", 1)[0] for v in (ctx.params.get(param.name) or ())}
    return [f"{b}=" for b in backends(ctx, param, incomplete) if b not in given]


def _scenarios(cfg) -> list[str]:
    from opsctl.drills.catalog import catalog

    return [name for name, _, _ in catalog(cfg)]


scenarios = _safe(_scenarios)


def _slo_names(cfg) -> list[str]:
    from opsctl.slo.loading import load_slos

    return [s.name for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)]


slo_names = _safe(_slo_names)


def _incidents(cfg) -> list[str]:
    """The incidents of open failovers first (what `restore` takes), then any in the change record."""
    from opsctl.traffic.service import TrafficService

    service = TrafficService(cfg, hooks=[])
    record = service.read().record
    found = list(record.failovers) if record is not None else []
    for entry in service.history(incident=None, limit=None):
        if entry.incident and entry.incident not in found:
            found.append(entry.incident)
    return found


incidents = _safe(_incidents)


def _open_failovers(cfg) -> list[str]:
    from opsctl.traffic.service import TrafficService

    record = TrafficService(cfg, hooks=[]).read().record
    return list(record.failovers) if record is not None else []


open_failovers = _safe(_open_failovers)


def _pages(cfg) -> list[str]:
    """Incident ids of the local pager's ledger, open ones first. A remote pager (PagerDuty) is not
    asked: a completion must answer at once, never wait on the network."""
    if cfg.paging.provider != "local":
        return []
    from opsctl.paging.registry import local_pager

    listed = local_pager(cfg, dry_run=True).incidents()
    return [i.id for i in sorted(listed, key=lambda i: i.status == "resolved")]


pages = _safe(_pages)


def _automation_incidents(cfg) -> list[str]:
    """Incident ids of the automation's file store, open ones first. A Kubernetes state backend is
    not asked: a completion must answer at once, never wait on the network."""
    if cfg.state.backend != "local":
        return []
    from opsctl.automation.engine_factory import incident_store

    listed = sorted(incident_store(cfg).incidents(), key=lambda i: (not i.is_open, -i.opened_at))
    return [i.id for i in listed]


automation_incidents = _safe(_automation_incidents)
