"""Whether the SLOs are the config's service's: none names another service (`other_service_problems`:
`slo validate` and `config validate` always), and every selector carries the service matcher
(`slo validate` when `Config.requires_service_matcher`: a catalog, or `slos.require_service_matcher`).

The service of an SLO is its config's `service:` (a catalog entry's name): the rules, reports,
dashboards and alerts take it from there, never from a copy in the SLO file. A file that still
names a service (`metadata.labels.service_name`, OpenSLO's `spec.service`, Sloth's `service`)
must name that one; a file copied from another service's SLOs names the other and is refused."""

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


# Where each format names its service (SloDefinition.service_name), for the messages.
_SERVICE_KEY = {"slo-generator": "metadata.labels.service_name", "openslo": "spec.service", "sloth": "service",
                "pyrra": "metadata.labels.service_name"}


def other_service_problems(slos: Sequence[SloDefinition], cfg: Config) -> list[str]:
    """Per SLO: its file naming a service other than the config's, and every selector whose
    `<metrics.service_label>` matcher does not match the config's service (Prometheus' matching,
    RE2), so it would measure another service's requests."""
    from opsctl.metrics.promql import format_selector, selectors_in

    label, service = cfg.service_label, cfg.service
    problems: list[str] = []
    for slo in slos:
        if slo.service_name is not None and slo.service_name != service:
            key = _SERVICE_KEY.get(slo.source_format, "metadata.labels.service_name")
            problems.append(f"{slo.file}: {slo.name}: {key}: names the service {slo.service_name!r};"
                            f" the config {cfg.source_path} is the service {service!r}")
        for role in ("filter_good", "filter_valid", "filter_bad", "expression"):
            text = getattr(slo, role, None)
            for selector in selectors_in(text) if text else ():
                for m in selector.matchers:
                    if m.label == label and not m.matches(service):
                        problems.append(f"{slo.file}: {slo.name}: {role}: {format_selector(selector)} selects"
                                        f' {label}{m.op}"{m.value}", not {label}="{service}"')
    return problems


def check_other_service(slos: Sequence[SloDefinition], cfg: Config) -> None:
    """ConfigError listing every SLO that names another service (`other_service_problems`)."""
    problems = other_service_problems(slos, cfg)
    if problems:
        raise ConfigError(f"{len(problems)} SLO problem(s): the SLO files name another service than {cfg.service!r}",
                          problems=problems,
                          hint=f"the service comes from the config's service: ({cfg.service}): drop the SLO file's"
                               f' service name and make its selectors say {cfg.service_label}="{cfg.service}",'
                               " or move a file copied from another service's SLOs back there")


def check_service_matchers(slos: Sequence[SloDefinition], cfg: Config) -> None:
    """ConfigError listing every selector without the service matcher (`service_matcher_problems`)."""
    problems = service_matcher_problems(slos, cfg)
    if problems:
        why = "a catalog's service" if cfg.catalog else "slos.require_service_matcher"
        raise ConfigError(f"{len(problems)} SLO selector(s) lack the service matcher ({why})", problems=problems,
                          hint=f'add {cfg.service_label}="{cfg.service}" to every selector (the proxy'
                               " labels its series with the service), or set slos.require_service_matcher: false")
