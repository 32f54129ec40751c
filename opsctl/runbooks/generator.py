"""Config + SLO alert plans -> {runbook file name: Markdown}. Pure and deterministic.

One runbook per alert (each SLO's page and ticket alerts, named by `conventions.runbook_name`, the
name the alert's runbook_url annotation links to), one per incident scenario that applies to the
configured backends, and an index (README.md). `plan_runbooks` decides which runbooks exist and
what each one knows (its context); `runbooks.render` runs the Jinja2 templates over them (shipped
in opsctl/runbooks/templates, overridable file by file from the config's `runbooks.templates`).
Nothing here reads the clock, the environment or absolute paths, so the same config gives the same
bytes on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from opsctl.clock import format_duration
from opsctl.errors import ConfigError, UsageError
from opsctl.runbooks import facts as f
from opsctl.runbooks.render import PLACEHOLDER_HINT, Runbook, render, template_environment, value_home
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.slo.rule_plan import SloRulePlan

INDEX_FILE = "README.md"


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    needs: str  # vendor | internal | any: which backends the scenario is about
    summary: str

    @property
    def file(self) -> str:
        return f"scenario-{self.name}.md"

    @property
    def template(self) -> str:
        return f"scenario-{self.name}.md.j2"


# The drills in chaos/ use the same names, so a drill report can link to its runbook.
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("vendor-outage", "Vendor outage", "vendor",
             "the vendor's endpoint fails most requests (5xx, timeouts): fail over to the internal pods"),
    Scenario("vendor-latency", "Vendor latency", "vendor",
             "the vendor answers, but slowly: move part of its share, then all of it if the page burn goes on"),
    Scenario("auth-throttling", "Auth-layer throttling", "vendor",
             "the vendor's auth layer answers 429: fewer requests per second, credentials, a platform ticket"),
    Scenario("oauth-token-failure", "OAuth token endpoint failing", "vendor",
             "the proxy cannot refresh its OAuth token for the vendor (auth errors): fail over, a platform ticket"),
    Scenario("vendor-throttling", "Vendor throttling: provisioned throughput exhausted", "vendor",
             "the vendor answers 503/429 with Retry-After (cause capacity): fail over what the pods carry, a capacity ticket"),
    Scenario("internal-capacity-loss", "Loss of internal GPU capacity", "internal",
             "internal GPU pods are lost: move their share to the vendor, restore when the pods are back"),
    Scenario("quality-regression", "Quality regression after a vendor release", "vendor",
             "the vendor's answers changed (e.g. a dropped beginning-of-text token): probe, shadow, A/B, move"),
    Scenario("freeze-incident", "Incident during a change freeze", "any",
             "a change freeze is in force: what an emergency override allows and how it is recorded"),
)


# ---------------------------------------------------------------------------------------------
# Planning: which runbooks, and what each knows


def plan_runbooks(cfg: "Config", plans: Sequence["SloRulePlan"]) -> list[Runbook]:
    """Every runbook the config calls for, in a stable order: index, alerts (by SLO), scenarios."""
    if not plans:
        raise UsageError("no SLOs to write runbooks for", hint="set slos.dir to a directory of SLO files")
    _check_ticket_routes(cfg)
    site = _site(cfg)
    scenarios = [s for s in SCENARIOS if _applies(cfg, s)]
    scenario_files = {s.name: s.file for s in scenarios}
    site["scenarios"] = [{"name": s.name, "title": s.title, "file": s.file, "summary": s.summary} for s in scenarios]
    site["scenario_files"] = scenario_files

    alerts: list[Runbook] = []
    for plan in sorted(plans, key=lambda p: p.name):
        for severity in cv.SEVERITIES:
            if any(a.severity == severity for a in plan.alerts):  # none when the SLO's file turns them off
                alerts.append(_alert_runbook(cfg, site, plan, severity, plans, scenario_files))
    site["alert_runbooks"] = [
        {"file": r.file, "slo": r.slo, "severity": r.severity, "backend": r.backend, "alert": r.alert,
         "title": r.title, "objective": r.context["budget"].objective, "kind": r.context["slo"].kind}
        for r in alerts
    ]
    runbooks = [Runbook(INDEX_FILE, "index", f"Runbooks for {cfg.service}", "index.md.j2", {"site": site})]
    runbooks += alerts
    for s in scenarios:
        runbooks.append(Runbook(s.file, "scenario", s.title, s.template, _scenario_context(cfg, site, s, plans),
                                scenario=s.name))
    names = [r.file for r in runbooks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"two runbooks would have the same file name: {', '.join(duplicates)}"
                          " (rename an SLO: metadata.name)")
    for r in runbooks:
        r.url = f"{cfg.runbook_base_url}/{r.file}"
    return runbooks


def _applies(cfg: "Config", scenario: Scenario) -> bool:
    kinds = {b.kind for b in cfg.backends.values()}
    return scenario.needs == "any" or scenario.needs in kinds


def _check_ticket_routes(cfg: "Config") -> None:
    """A configured vendor route must know the categories the runbooks file in."""
    problems = []
    for name, backend in cfg.backends.items():
        if backend.kind != "vendor":
            continue
        for auth, capacity in ((False, False), (True, False), (False, True)):
            route = f.ticket_route(cfg, name, auth=auth, capacity=capacity)
            if route.channel is not None and route.problem and route.problem not in problems:
                problems.append(route.problem)
    if problems:
        raise ConfigError(f"{cfg.source_path}: runbooks cannot name the vendor ticket category",
                          problems=[f"{cfg.source_path}: {p}" for p in problems])


def _site(cfg: "Config") -> dict:
    """What every runbook knows: the service, backends, traffic, capacity, escalation, freezes."""
    backends = [{"name": n, "kind": b.kind, "vendor": b.vendor, "description": b.description}
                for n, b in cfg.backends.items()]
    vendors = [n for n, b in cfg.backends.items() if b.kind == "vendor"]
    internals = [n for n, b in cfg.backends.items() if b.kind == "internal"]
    split = f.normal_split(cfg)
    t = cfg.traffic
    cap = cfg.capacity
    return {
        "service": cfg.service,
        "config_name": Path(cfg.source_path).name if cfg.source_path != "<built-in>" else "the built-in default config",
        "builtin_config": cfg.source_path == "<built-in>",
        "period": cv.window_label(cfg.slos.period_seconds),
        "base_url": cfg.runbook_base_url,
        "dashboards": [{"title": k, "url": v} for k, v in cfg.runbooks.dashboards.items()],
        "backends": backends,
        "vendors": vendors,
        "internals": internals,
        "normal_split": split,
        "normal_split_text": " / ".join(f"{b} {w}" for b, w in split.items()) if split else None,
        "traffic": {
            "actuator": t.actuator,
            "target": f.traffic_target(cfg),
            "ramp_step": t.ramp.step,
            "ramp_interval": t.ramp.interval,
            "rate_limit": f"{t.rate_limit.max_changes} changes per {t.rate_limit.window}",
        },
        "capacity": None if cap is None else {
            "backend": cap.backend, "source": cap.source, "rps_per_replica": f"{cap.rps_per_replica:g}",
            "headroom": f.pct(cap.headroom), "max_replicas": cap.max_replicas, "replicas": cap.replicas,
            "namespace": cap.namespace or t.kubernetes.namespace, "deployment": cap.deployment,
            "ready_timeout": cap.ready_timeout, "rate_window": cap.rate_window, "autoscaler": cap.autoscaler,
            "vendors": {b: f.vendor_throughput_text(v) for b, v in cap.vendors.items()},
        },
        "degradation": t.degradation,
        "peak_rps": None if cfg.runbooks.peak_rps is None else f"{cfg.runbooks.peak_rps:g}",
        # what the capacity backend needs for its own normal share at peak
        "own_need": None if cap is None else f.capacity_need(cfg, (split or {}).get(cap.backend, 0),
                                                              (split or {}).get(cap.backend, 0)),
        "peak_query": f.peak_query(scope=cfg.service_matcher),
        "paging": f.paging(cfg),
        "freezes": [{"name": w.name, "schedule": f"cron `{w.cron}` for {w.duration}" if w.cron
                     else f"{w.start} to {w.end}", "timezone": w.timezone, "reason": w.reason}
                    for w in cfg.freezes],
        "moves": {b: f.plan_move(cfg, b) for b in cfg.backends},
        "ramps": {b: f.ramp_target(cfg, b) for b in cfg.backends},
        "routes": {b: f.ticket_route(cfg, b) for b in vendors},
        "auth_routes": {b: f.ticket_route(cfg, b, auth=True) for b in vendors},
        "capacity_routes": {b: f.ticket_route(cfg, b, capacity=True) for b in vendors},
        "endpoints": {b: {"base_url": e.base_url, "model": e.model, "auth": e.auth.method,
                          "token_url": e.auth.databricks_oauth.endpoint if e.auth.databricks_oauth else None}
                      for b, e in cfg.endpoints.items()},
        "golden": cfg.runbooks.golden,
        "alert_names": dict(cv.ALERT_NAMES),
        "placeholders": f.PLACEHOLDERS,
        "cmd": f.Commands(cfg),
        "backend_queries": {b: f.backend_queries(b, scope=cfg.service_matcher) for b in cfg.backends},
        "all_queries": f.backend_queries(None, scope=cfg.service_matcher),
        "throttled_query": f.outcome_query("throttled", scope=cfg.service_matcher),
        "auth_error_query": f.outcome_query("auth_error", scope=cfg.service_matcher),
        "quality": {"min_exact_match_between": f.pct(cfg.quality.probe.min_exact_match_between),
                    "shadow_window": cfg.quality.shadow.window, "rules": _quality_rules(cfg)},
    }


def _quality_rules(cfg: "Config") -> dict | None:
    """The live quality rules as the runbook shows them (None when disabled)."""
    from opsctl.quality import rules as q

    plan = q.plan_quality(cfg)
    if plan is None:
        return None
    alerts = [{"name": a.alertname, "backend": a.backend, "reference": a.reference, "signal": a.signal,
               "threshold": f"{a.threshold:g}", "severity": a.severity, "for": cfg_duration(a.for_seconds),
               "needs": f"{a.needs_per_side():,.0f}"}
              for a in plan.alerts]
    queries = [{"title": r["record"], "expr": r["expr"]} for r in q.recording_rules(plan)]
    return {"window": plan.window, "offset": plan.offset, "min_request_rate": f"{plan.min_request_rate:g}",
            "sigmas": f"{cfg.quality.rules.noise_sigmas:g}",
            "alerts": alerts, "queries": queries, "runbook_url": plan.runbook_url}


def cfg_duration(seconds: int) -> str:
    from opsctl.clock import format_duration

    return format_duration(seconds)


def _alert_runbook(cfg: "Config", site: dict, plan: "SloRulePlan", severity: str,
                   plans: Sequence["SloRulePlan"], scenario_files: dict[str, str]) -> Runbook:
    slo = plan.slo
    budget = f.budget_of(slo, cfg.slos.period_seconds)
    alerts = [a for a in plan.alerts if a.severity == severity]
    pairs = f.pairs_of(alerts, budget)
    backend = slo.backend
    kind = cfg.backends[backend].kind if backend in cfg.backends else "all"
    if kind == "vendor":
        wanted = (["vendor-outage", "vendor-throttling", "auth-throttling", "oauth-token-failure"] if slo.kind == "availability"
                  else ["vendor-latency"])
        wanted.append("quality-regression")
    elif kind == "internal":
        wanted = ["internal-capacity-loss"]
    else:
        wanted = [s.name for s in SCENARIOS if s.name != "freeze-incident"]
    wanted.append("freeze-incident")
    related_scenarios = [{"file": scenario_files[n], "title": _scenario(n).title} for n in wanted if n in scenario_files]
    siblings = [
        {"file": cv.runbook_name(p.name, severity), "slo": p.name, "backend": p.slo.backend}
        for p in sorted(plans, key=lambda p: p.name)
        if p.name != slo.name and p.slo.kind == slo.kind and p.slo.threshold_seconds == slo.threshold_seconds
        and (backend == cv.ALL_BACKENDS) != (p.slo.backend == cv.ALL_BACKENDS)
        and any(a.severity == severity for a in p.alerts)
    ]
    alertname = cv.alert_name(severity)
    file = cv.runbook_name(slo.name, severity)
    peak, split = cfg.runbooks.peak_rps, f.normal_split(cfg)
    traffic_at_peak: float | None = None
    traffic_text: str | None = None
    if peak is not None and kind == "all":
        traffic_at_peak, traffic_text = peak, f"the peak of {peak:g} requests/s"
    elif peak is not None and split is not None and backend is not None:  # kind is not "all": backend is set
        traffic_at_peak = peak * split.get(backend, 0) / 100
        traffic_text = (f"{backend}'s {split.get(backend, 0)}% of the {peak:g} requests/s peak"
                        f" ({traffic_at_peak:g} requests/s)")
    context = {
        "site": site,
        "alertname": alertname,
        "severity": severity,
        "situation": severity,  # the ticket severity key: page -> Sev2, ticket -> Sev3 by default
        "slo": slo,
        "slo_file": _relative(cfg, slo.file),
        "budget": budget,
        "pairs": pairs,
        "bad_events": f.bad_events(slo),
        "traffic_at_peak": traffic_at_peak,
        "traffic_text": traffic_text,
        "threshold": None if slo.threshold_seconds is None else f.seconds_text(slo.threshold_seconds),
        "backend": backend,
        "backend_kind": kind,
        "queries": f.slo_queries(plan, severity),
        "breakdown": f.backend_queries(None if kind == "all" else backend, scope=cfg.service_matcher),
        "runbook_url": cv.runbook_url(cfg.runbook_base_url, slo.name, severity),
        "rule_group": cv.rule_group_name(cfg.alerting.rule_group_prefix, slo.name),
        "related_scenarios": related_scenarios,
        "siblings": siblings,
        "other_severity_file": cv.runbook_name(slo.name, "ticket" if severity == "page" else "page"),
        "labels": {cv.LABEL_SLO: slo.name, cv.LABEL_BACKEND: backend, cv.LABEL_SERVICE: plan.label_dict[cv.LABEL_SERVICE],
                   cv.LABEL_SEVERITY: severity, cv.LABEL_CATEGORY: plan.category, **cfg.alerting.labels},
        "fast_pair": next((f"{a.long} / {a.short}" for a in alerts if a.fast), None),
        "fast_keep": next((format_duration(a.keep_firing_seconds) for a in alerts if a.fast and a.keep_firing_seconds),
                          None),
        "absent_for": format_duration(plan.absent_for) if plan.absent else None,
        "cause_text": ", ".join(f"`{c}`: {cv.cause_text(c)}" for c, _ in plan.causes) if plan.causes else None,
    }
    title = f"{alertname}: {slo.name}"
    return Runbook(file, "alert", title, "alert.md.j2", context, alert=alertname, slo=slo.name,
                   severity=severity, backend=backend)


def _scenario(name: str) -> Scenario:
    return next(s for s in SCENARIOS if s.name == name)


def _scenario_context(cfg: "Config", site: dict, scenario: Scenario, plans: Sequence["SloRulePlan"]) -> dict:
    subjects = {"vendor": site["vendors"], "internal": site["internals"], "any": list(cfg.backends)}[scenario.needs]
    kinds = {"vendor-latency": ("latency",), "quality-regression": (), "freeze-incident": ()}.get(
        scenario.name, ("availability",))
    period = cfg.slos.period_seconds
    service = sorted((p.slo for p in plans if p.slo.backend == cv.ALL_BACKENDS), key=lambda s: s.name)
    service_slos = [
        {"name": s.name, "kind": s.kind, "objective": f.budget_of(s, period).objective,
         "threshold": None if s.threshold_seconds is None else f.seconds_text(s.threshold_seconds),
         "budget": f.budget_of(s, period), "page_file": cv.runbook_name(s.name, "page")}
        for s in service
    ]
    availability = next((s for s in service_slos if s["kind"] == "availability"), None)
    first = next((s for s in service if s.kind == "availability"), None)  # the same SLO, typed
    budget = None if first is None else f.budget_of(first, period)
    split = site["normal_split"] or {}
    impact = []
    for b in subjects:
        share = split.get(b)
        gone = None
        if budget is not None and share:
            gone = f.human_duration(budget.minutes * 60 / (share / 100))
        impact.append({"backend": b, "share": share, "budget_gone_in": gone})
    return {
        "site": site,
        "scenario": {"name": scenario.name, "title": scenario.title, "summary": scenario.summary},
        "subjects": subjects,
        "alert_runbooks": [r for r in site["alert_runbooks"] if r["backend"] in subjects and r["kind"] in kinds],
        "service_slos": service_slos,
        "service_availability": availability,
        "impact": impact,
        "tokens_query": f.tokens_query(scope=cfg.service_matcher),
    }


def _relative(cfg: "Config", path: str) -> str:
    """An SLO file's path relative to the config's directory when it lies below it (stable across machines)."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path(cfg.base_dir).resolve()).as_posix()
    except ValueError:
        return p.name


def generate(cfg: "Config", plans: Sequence["SloRulePlan"], *, templates_dir: Path | None = None) -> dict[str, str]:
    """{file name: Markdown} for the config and its SLO alert plans. Same input, same bytes."""
    try:
        runbooks = plan_runbooks(cfg, plans)
    except f.PlaceholderError as exc:
        raise ConfigError(f"{value_home(cfg, exc.name) or cfg.source_path}: {exc}", hint=PLACEHOLDER_HINT) from None
    source = Path(cfg.source_path).name if cfg.source_path != "<built-in>" else "the built-in default config"
    files = render(runbooks, template_environment(templates_dir), source, cfg)
    return dict(sorted(files.items()))


def load_plans(cfg: "Config") -> list["SloRulePlan"]:
    """The SLOs of the config and their alert plans, exactly as `opsctl slo rules` plans them."""
    from opsctl.slo.loading import load_slos
    from opsctl.slo.rule_plan import RuleSettings, plan_rules

    return plan_rules(load_slos([cfg.slo_dir], cfg.backends, config=cfg), RuleSettings.from_config(cfg))
