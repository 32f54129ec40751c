"""Whether every selector of the SLOs carries the service matcher (`slo validate` when
`Config.requires_service_matcher`: a catalog, or `slos.require_service_matcher`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from opsctl.errors import ConfigError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.slo.model import SloDefinition


def service_matcher_problems(slos: Sequence[SloDefinition], cfg: Config) -> list[str]:
    """Per SLO and role (filter_good, filter_valid, filter_bad, expression), every selector that
    lacks `<metrics.service_label>="<service>"` (opsctl sends user PromQL as written, so a selector
    without it sums every service's series in a shared Prometheus)."""
    from opsctl.metrics.promql import format_selector, selectors_in

    label, service = cfg.service_label, cfg.service
    problems: list[str] = []
    for slo in slos:
        for role in ("filter_good", "filter_valid", "filter_bad", "expression"):
            text = getattr(slo, role, None)
            if not text:
                continue
            for selector in selectors_in(text):
                if not any(m.label == label and m.op == "=" and m.value == service for m in selector.matchers):
                    problems.append(f"{slo.file}: {slo.name}: {role}: {format_selector(selector)} lacks"
                                    f' {label}="{service}"')
    return problems


def check_service_matchers(slos: Sequence[SloDefinition], cfg: Config) -> None:
    """ConfigError listing every selector without the service matcher (`service_matcher_problems`)."""
    problems = service_matcher_problems(slos, cfg)
    if problems:
        why = "a catalog's service" if cfg.catalog else "slos.require_service_matcher"
        raise ConfigError(f"{len(problems)} SLO selector(s) lack the service matcher ({why})", problems=problems,
                          hint=f'add {cfg.service_label}="{cfg.service}" to every selector (the proxy'
                               " labels its series with the service), or set slos.require_service_matcher: false")
