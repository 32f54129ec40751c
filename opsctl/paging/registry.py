"""Pager name -> factory. An unknown name is an error, never a fallback.

    from opsctl.paging.registry import open_pager
    pager = open_pager(cfg)                      # cfg.paging.provider: local | pagerduty
    result = pager.trigger(PageEvent(summary="vendor error rate 12%", source="opsctl"))
    pager.change_event(ChangeEvent(summary="traffic 80/20 -> 0/100", source="opsctl", timestamp=now))
    pager.get_incident(result.dedup_key).to_dict()["seconds_to_acknowledge"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.errors import ConfigError
from opsctl.paging.base import Pager

if TYPE_CHECKING:
    from opsctl.clock import Clock
    from opsctl.paging.local import LocalPager


def local_pager(cfg, *, dry_run: bool = False, clock: Clock | None = None) -> "LocalPager":
    """The local pager's ledger under the state dir, as the `local` provider opens it."""
    from opsctl.paging.local import LocalPager

    return LocalPager(cfg.state_path / "paging" / "ledger.json", service=cfg.service,
                      oncall=cfg.paging.local.oncall, clock=clock, dry_run=dry_run)


def _local(cfg, *, dry_run: bool, clock: Clock | None, on_retry) -> Pager:
    return local_pager(cfg, dry_run=dry_run, clock=clock)


def _pagerduty(cfg, *, dry_run: bool, clock: Clock | None, on_retry) -> Pager:
    from opsctl.paging.pagerduty import PagerDutyPager

    settings = cfg.paging.pagerduty
    ca_file = cfg.path(settings.ca_file) if settings.ca_file else None
    return PagerDutyPager(settings, service=cfg.service, ca_file=ca_file, dry_run=dry_run, clock=clock,
                          on_retry=on_retry)


PAGERS: dict[str, Callable[..., Pager]] = {"local": _local, "pagerduty": _pagerduty}


def open_pager(cfg, *, dry_run: bool = False, provider: str | None = None, clock: Clock | None = None,
               on_retry: Callable | None = None) -> Pager:
    """The configured pager (or `provider`), recording what it sends under the state dir."""
    from opsctl.paging.records import RecordedPager

    name = provider or cfg.paging.provider
    factory = PAGERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown pager {name!r} (known: {', '.join(sorted(PAGERS))})")
    pager = factory(cfg, dry_run=dry_run, clock=clock, on_retry=on_retry)
    return RecordedPager(pager, page_records(cfg))


def page_records(cfg):
    from opsctl.paging.records import PageRecords

    return PageRecords(cfg.state_path / "paging" / "pages.json")
