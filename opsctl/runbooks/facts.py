"""The figures and commands a runbook quotes, computed from the config and the alert plans. Pure.

Numbers are computed here rather than in templates so that a template cannot round differently
from the rules, and every command is quoted here, once, so a runbook never shows a command that the
shell or the CLI would read differently from what it says. Nothing here reads files, the clock or
the environment: the same config gives the same facts.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from opsctl.metrics import schema
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.slo.model import SloDefinition
    from opsctl.slo.rules import BurnAlert, SloRulePlan

# Shell variables a runbook's commands use; each runbook says how to set the ones it uses.
PLACEHOLDERS: dict[str, str] = {
    "INCIDENT": "the incident's id, e.g. the PagerDuty incident number or INC-123",
    "ACCEPTED_A": "sessions with a suggestion accepted before the vendor release (arm A)",
    "SESSIONS_A": "sessions before the vendor release (arm A)",
    "ACCEPTED_B": "sessions with a suggestion accepted since the vendor release (arm B)",
    "SESSIONS_B": "sessions since the vendor release (arm B)",
}
INCIDENT = "$INCIDENT"

# ---------------------------------------------------------------------------------------------
# Formatting


def pct(ratio: float) -> str:
    """0.9999 -> '99.99%', 0.001344 -> '0.1344%'."""
    return f"{ratio * 100:.4g}%"


def human_duration(seconds: float) -> str:
    """A duration as a person reads it: '4.84 s', '4 min 2 s', '50 hours', '5 days'."""
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.3g} hours"
    return f"{seconds / 86400:.3g} days"


def one_in(ratio: float) -> str:
    """0.001344 -> '1 in 744'."""
    return f"1 in {1 / ratio:,.0f}" if ratio > 0 else "none"


def seconds_text(seconds: float) -> str:
    """A latency threshold: 0.5 -> '500 ms', 1.0 -> '1 s'."""
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


# ---------------------------------------------------------------------------------------------
# Shell commands

_SAFE = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")
_VAR = re.compile(r"\$([A-Z][A-Z0-9_]*)")


class PlaceholderError(ValueError):
    """A `$NAME` in a runbook command that is none of PLACEHOLDERS: the caller names the file."""

    def __init__(self, name: str, word: str):
        self.name, self.word = name, word
        super().__init__(f"unknown placeholder ${name} in {word!r} (known: {', '.join('$' + p for p in PLACEHOLDERS)})")


def sh(word: str) -> str:
    """Quote one word for a POSIX shell; `$NAME` placeholders stay expandable (double quotes)."""
    word = str(word)
    if _SAFE.fullmatch(word):
        return word
    names = _VAR.findall(word)
    if names:
        unknown = sorted(set(names) - set(PLACEHOLDERS))
        if unknown:
            raise PlaceholderError(unknown[0], word)
        escaped = re.sub(r'([\\"`])', r"\\\1", word)
        escaped = re.sub(r"\$(?![A-Z][A-Z0-9_]*)", r"\\$", escaped)
        return f'"{escaped}"'
    return shlex.quote(word)


def command(*words: str) -> str:
    """`opsctl` and its words, each quoted for the shell."""
    return " ".join(["opsctl", *(sh(w) for w in words if w is not None)])


# ---------------------------------------------------------------------------------------------
# What an alert means, in numbers


@dataclass(frozen=True)
class Budget:
    """An SLO's objective and error budget over the period."""

    goal: float
    period: str  # "28d"
    period_seconds: int

    @property
    def ratio(self) -> float:
        return 1.0 - self.goal

    @property
    def objective(self) -> str:
        return pct(self.goal)

    @property
    def ratio_text(self) -> str:
        return pct(self.ratio)

    @property
    def minutes(self) -> float:
        return self.period_seconds / 60 * self.ratio

    @property
    def minutes_text(self) -> str:
        return f"{self.minutes:.4g} minutes"

    @property
    def duration_text(self) -> str:
        return human_duration(self.minutes * 60)

    @property
    def period_days(self) -> str:
        return f"{self.period_seconds / 86400:g}"


@dataclass(frozen=True)
class Pair:
    """One multi-window burn-rate condition of an alert, with what its threshold means."""

    severity: str
    long: str
    short: str
    factor: float
    for_text: str  # "2m", or "0s" when the alert fires at once
    min_request_rate: float
    budget: Budget
    long_seconds: int

    @property
    def factor_text(self) -> str:
        from opsctl.slo.conventions import format_factor

        return format_factor(self.factor)

    @property
    def error_ratio(self) -> float:
        return self.factor * self.budget.ratio

    @property
    def error_ratio_text(self) -> str:
        return pct(self.error_ratio)

    @property
    def one_in(self) -> str:
        return one_in(self.error_ratio)

    @property
    def budget_share(self) -> float:
        """Share of the period's budget spent over the long window at exactly the threshold."""
        return self.factor * self.long_seconds / self.budget.period_seconds

    @property
    def budget_share_text(self) -> str:
        return pct(self.budget_share)

    @property
    def spent_text(self) -> str:
        """That share as minutes of full outage."""
        return human_duration(self.budget_share * self.budget.minutes * 60)

    @property
    def exhausted_in(self) -> str:
        """How long the whole budget lasts at the threshold burn rate."""
        return human_duration(self.budget.period_seconds / self.factor)

    def bad_per_second_at(self, rps: float | None) -> str | None:
        if rps is None:
            return None
        return f"{rps * self.error_ratio:.3g}"


def budget_of(slo: "SloDefinition", period_seconds: int) -> Budget:
    return Budget(slo.goal, cv.window_label(period_seconds), period_seconds)


def pairs_of(alerts: Sequence["BurnAlert"], budget: Budget) -> list[Pair]:
    from opsctl.clock import format_duration

    return [
        Pair(a.severity, a.long, a.short, a.factor, format_duration(a.for_seconds) if a.for_seconds else "0s",
             a.min_request_rate, budget, a.long_seconds)
        for a in alerts
    ]


def bad_events(slo: "SloDefinition") -> str:
    """What the SLO counts as bad, in words."""
    if slo.kind == "latency" and slo.threshold_seconds is not None:
        return f"requests slower than {seconds_text(slo.threshold_seconds)}"
    return "failed requests (" + ", ".join(schema.BAD_OUTCOMES) + ")"


# ---------------------------------------------------------------------------------------------
# PromQL


@dataclass(frozen=True)
class Query:
    title: str
    expr: str


def slo_queries(plan: "SloRulePlan", severity: str) -> list[Query]:
    """The recording rules of one SLO's alert, and the same figures from the raw selectors."""
    from opsctl.slo.rules import error_ratio_expr, number, own_matchers

    slo = plan.slo
    own = own_matchers(plan)  # slo and service: SLO names may repeat across services
    budget = f"(1 - {number(slo.goal)})"
    alerts = [a for a in plan.alerts if a.severity == severity and not a.fast]  # the fast tier reads raw windows
    queries = []
    for window in dict.fromkeys(w for a in alerts for w in (a.long, a.short)):
        queries.append(Query(f"burn rate over {window} (recording rule)",
                             f"{cv.record_error_ratio(window)}{own} / {budget}"))
    if plan.causes:
        short = min(alerts, key=lambda a: a.short_seconds).short
        queries.append(Query(f"share of requests failing by cause over {short} (recording rule; the page's `cause`)",
                             f"{cv.record_cause_ratio(short)}{own}"))
    queries.append(Query(f"error budget left over {plan.period} (1 = untouched, 0 = spent)",
                         f"{cv.RECORD_BUDGET_REMAINING}{own}"))
    short = min(alerts, key=lambda a: a.short_seconds).short
    queries.append(Query(f"error ratio over {short} from the SLO's raw selectors (no recording rules needed)",
                         error_ratio_expr(plan, short)))
    names = "|".join([cv.alert_name(severity)] + ([cv.FAST_ALERT_NAME] if any(
        a.fast for a in plan.alerts if a.severity == severity) else []))
    matcher = f'alertname="{names}"' if "|" not in names else f'alertname=~"{names}"'
    queries.append(Query("is the alert firing (and for which window pair)",
                         f'ALERTS{{{matcher},{own_matchers(plan)[1:]}'))
    return queries


def _sel(scope: str, *matchers: str) -> str:
    """A selector's braces: the service matcher `scope` (Config.service_matcher) first, then the rest."""
    body = ",".join(m for m in (scope, *matchers) if m)
    return f"{{{body}}}" if body else ""


def backend_queries(backend: str | None, rate_window: str = "5m", scope: str = "") -> list[Query]:
    """Where errors and latency come from, for one backend or (None) by backend. `scope`: the
    service matcher every generated selector carries (Config.service_matcher; "" when off)."""
    sel = _sel(scope, f'{cv.LABEL_BACKEND}="{backend}"' if backend else "")
    by = "outcome" if backend else "backend, outcome"
    by_le = "le" if backend else "backend, le"
    return [
        Query("requests per second by outcome" + ("" if backend else " and backend"),
              f"sum by ({by}) (rate({schema.REQUESTS}{sel}[{rate_window}]))"),
        Query("p99 latency" + ("" if backend else " by backend"),
              f"histogram_quantile(0.99, sum by ({by_le}) (rate({schema.DURATION_BUCKET}{sel}[{rate_window}])))"),
    ]


def outcome_query(outcome: str, rate_window: str = "5m", scope: str = "") -> Query:
    sel = _sel(scope, f'outcome="{outcome}"')
    return Query(f"{outcome} requests per second by backend",
                 f"sum by (backend) (rate({schema.REQUESTS}{sel}[{rate_window}]))")


def tokens_query(rate_window: str = "1h", scope: str = "") -> Query:
    """Prompt tokens per answered request, by backend: a dropped or doubled beginning-of-text token
    shows as a difference of one between backends serving the same prompts."""
    ok = _sel(scope, 'outcome="ok"')
    return Query("prompt tokens per answered request, by backend",
                 f"sum by (backend) (rate({schema.PROMPT_TOKENS}{_sel(scope)}[{rate_window}]))"
                 f" / sum by (backend) (rate({schema.REQUESTS}{ok}[{rate_window}]))")


def peak_query(days: int = 7, scope: str = "") -> Query:
    return Query(f"peak request rate of the whole service over the last {days} days",
                 f"max_over_time(sum(rate({schema.REQUESTS}{_sel(scope)}[5m]))[{days}d:5m])")


# ---------------------------------------------------------------------------------------------
# Traffic and capacity


@dataclass(frozen=True)
class CapacityNeed:
    """What the internal backend must carry after a move, at the configured peak request rate."""

    backend: str
    where: str  # "Deployment llm/vllm" or "static replicas"
    source: str  # kubernetes | static
    own_share: int  # its share before
    moved_share: int  # what it receives
    share_after: int
    peak_rps: float | None
    rps_per_replica: float
    headroom: float
    replicas: int | None  # configured (static); None: read live from the Deployment
    max_replicas: int
    needed: int | None  # replicas to carry share_after at peak, with headroom
    needed_for_moved: int | None  # replicas for the moved share alone
    fits_at_max: int | None  # share of peak traffic the most replicas opsctl can have ready carry

    @property
    def available(self) -> int:
        """The most replicas there can be: static capacity is what is configured (opsctl cannot scale
        it); a Deployment is scaled up to max_replicas."""
        return self.replicas if self.replicas is not None else self.max_replicas

    @property
    def available_key(self) -> str:
        return "capacity.replicas" if self.replicas is not None else "capacity.max_replicas"

    @property
    def enough(self) -> bool | None:
        if self.needed is None:
            return None
        return self.needed <= self.available

    @property
    def headroom_text(self) -> str:
        return pct(self.headroom)

    @property
    def peak_text(self) -> str:
        return "unknown" if self.peak_rps is None else f"{self.peak_rps:g}"

    def formula(self, share: int) -> str:
        """The sum behind a replica count, with its inputs."""
        peak = "PEAK" if self.peak_rps is None else f"{self.peak_rps:g} requests/s"
        return (f"ceil({peak} x {share}% x (1 + {self.headroom:g}) / {self.rps_per_replica:g} requests/s per replica)")

    @property
    def carries_at_peak(self) -> int | None:
        """The share the backend ends with at peak on max_replicas (a failover moves only what fits)."""
        if self.fits_at_max is None:
            return None
        return min(self.share_after, max(self.fits_at_max, self.own_share))

    @property
    def left_at_peak(self) -> int | None:
        """Points of the moved share that stay on the failing backend at peak."""
        carried = self.carries_at_peak
        return None if carried is None else self.share_after - carried

    @property
    def short_by(self) -> int | None:
        return None if self.needed is None else max(self.needed - self.available, 0)


@dataclass(frozen=True)
class Move:
    """A failover from one backend, planned on the normal split as `opsctl traffic failover` plans it."""

    source: str
    receivers: tuple[str, ...]
    before: dict[str, int] | None  # the normal split (traffic.default_split); None when not configured
    after: dict[str, int] | None
    capacity: CapacityNeed | None  # when the internal (capacity) backend receives traffic
    unmodelled: tuple[str, ...]  # receivers whose capacity opsctl does not model (vendors)

    def describe(self, which: str) -> str:
        split = self.before if which == "before" else self.after
        if split is None:
            return "unknown"
        return " / ".join(f"{b} {w}" for b, w in split.items())


def normal_split(cfg: "Config") -> dict[str, int] | None:
    split = cfg.traffic.default_split
    if not split:
        return None
    return {b: split.get(b, 0) for b in cfg.backends}


def plan_move(cfg: "Config", source: str) -> Move | None:
    """The failover from `source` on the normal split, and what the receiving capacity needs."""
    from opsctl.traffic.failover import failover_plan
    from opsctl.traffic.split import Split

    # As `traffic failover` picks them: the degradation backend only takes what capacity leaves over.
    receivers = tuple(b for b in cfg.backends if b != source and b != cfg.traffic.degradation)
    if not receivers:
        return None
    before = normal_split(cfg)
    after = None
    if before is not None:
        planned = failover_plan(source, receivers)(Split.of(before))
        after = {b: planned.weight(b) for b in cfg.backends}
    capacity = None
    cap = cfg.capacity
    if cap is not None and cap.backend in receivers:
        own = before.get(cap.backend, 0) if before else 0
        share_after = after.get(cap.backend, 0) if after else 100
        capacity = capacity_need(cfg, own, share_after)
    unmodelled = tuple(b for b in receivers if cap is None or (b != cap.backend and b not in cap.vendors))
    return Move(source, receivers, before, after, capacity, unmodelled)


def vendor_throughput_text(vendor) -> str:
    """A vendor's provisioned throughput as the capacity guard checks it."""
    if vendor.requests_per_second is not None:
        figure = f"{vendor.requests_per_second:g} requests/s"
    elif vendor.tokens_per_second is not None:
        figure = f"{vendor.tokens_per_second:g} tokens/s"
    else:
        figure = f"`{vendor.query}` ({vendor.unit}/s)"
    return f"{figure} with {pct(vendor.headroom)} headroom"


def capacity_need(cfg: "Config", own_share: int, share_after: int) -> CapacityNeed:
    """Replicas the capacity backend needs to carry `share_after`% of peak traffic, with the
    same arithmetic as the capacity guard (opsctl/traffic/capacity.py)."""
    from opsctl.traffic.capacity import CapacityReading

    cap = cfg.capacity
    peak = cfg.runbooks.peak_rps
    namespace = cap.namespace or cfg.traffic.kubernetes.namespace
    where = f"Deployment {namespace}/{cap.deployment}" if cap.source == "kubernetes" else "static replicas"
    configured = cap.replicas if cap.source == "static" else None
    reading = CapacityReading(cap.backend, configured or 0, configured or 0, cap.max_replicas, cap.rps_per_replica,
                              cap.headroom, peak, None, where)
    moved = max(share_after - own_share, 0)
    return CapacityNeed(
        backend=cap.backend, where=where, source=cap.source, own_share=own_share, moved_share=moved,
        share_after=share_after, peak_rps=peak, rps_per_replica=cap.rps_per_replica, headroom=cap.headroom,
        replicas=configured, max_replicas=cap.max_replicas,
        needed=reading.replicas_for(share_after), needed_for_moved=reading.replicas_for(moved),
        fits_at_max=reading.max_share(configured if configured is not None else cap.max_replicas),
    )


@dataclass(frozen=True)
class Ramp:
    """A partial move off a degraded (not down) backend, and why these weights."""

    weights: dict[str, int]
    why: str


def ramp_target(cfg: "Config", source: str) -> Ramp | None:
    """Half the source's normal share, capped by what the capacity backend carries at peak on
    max_replicas. None when nothing sensible can move."""
    before = normal_split(cfg)
    if before is None or before.get(source, 0) == 0:
        return None
    receivers = [b for b in cfg.backends if b != source]
    if not receivers:
        return None
    half = before[source] // 2 or before[source]
    move = half
    why = f"half of {source}'s {before[source]}%"
    cap = cfg.capacity
    target = dict(before)
    if cap is not None and cap.backend in receivers:
        own = before.get(cap.backend, 0)
        need = capacity_need(cfg, own, own + half)
        if need.fits_at_max is not None and need.fits_at_max - own < half:
            move = max(0, need.fits_at_max - own)
            why = (f"{cap.backend} up to the {need.fits_at_max}% it carries at the {need.peak_text} requests/s peak"
                   f" on {need.available} replicas; half of {source}'s {before[source]}% would not fit")
        if move == 0:
            return None
        target[cap.backend] += move
    else:
        target[receivers[0]] += move
    target[source] -= move
    return Ramp(target, why)


def traffic_target(cfg: "Config") -> str:
    """Where the split lives, in words (no state-dir path: it differs between machines)."""
    t = cfg.traffic
    ns = t.kubernetes.namespace
    if t.actuator == "file":
        return f"the file {t.file.path} under the state dir"
    if t.actuator == "configmap":
        return f"ConfigMap {t.configmap.namespace or ns}/{t.configmap.name}, key {t.configmap.key}"
    if t.actuator == "istio":
        route = f", route {t.istio.route}" if t.istio.route else ", first HTTP route"
        return f"Istio VirtualService {t.istio.namespace or ns}/{t.istio.name}{route}"
    return f"Gateway API HTTPRoute {t.gateway_api.namespace or ns}/{t.gateway_api.name}, rule {t.gateway_api.rule}"


# ---------------------------------------------------------------------------------------------
# Escalation


@dataclass(frozen=True)
class TicketRoute:
    """How a vendor backend's support ticket is filed: the opsctl names and what the vendor sees."""

    backend: str
    vendor: str
    channel: str | None  # local, zendesk, jira, email, webhook; None: no route configured
    category: str
    category_value: str | None
    severities: dict[str, tuple[str, str | None]]  # situation -> (Sev, the vendor's value)
    problem: str | None  # why no ticket can be filed as configured

    def sev(self, situation: str) -> str:
        return self.severities[situation][0]

    def sev_value(self, situation: str) -> str | None:
        return self.severities[situation][1]


def ticket_route(cfg: "Config", backend: str, *, auth: bool = False) -> TicketRoute:
    b = cfg.backends[backend]
    vendor = b.vendor or backend
    settings = cfg.runbooks.tickets
    category = (settings.auth_category or settings.category) if auth else settings.category
    key = "runbooks.tickets.auth_category" if auth and settings.auth_category else "runbooks.tickets.category"
    situations = {s: getattr(settings.severity, s) for s in ("outage", "page", "ticket")}
    route = cfg.tickets.vendors.get(vendor)
    if route is None:
        known = ", ".join(sorted(cfg.tickets.vendors)) or "none"
        return TicketRoute(backend, vendor, None, category, None, {s: (v, None) for s, v in situations.items()},
                           f"no ticket route for vendor {vendor!r}: add tickets.vendors.{vendor} (configured: {known})")
    problem = None
    if category not in route.categories:
        problem = (f"{key} {category!r} is not a category of tickets.vendors.{vendor}"
                   f" (known: {', '.join(route.categories)})")
    return TicketRoute(
        backend, vendor, route.provider or cfg.tickets.provider, category, route.categories.get(category),
        {s: (v, route.severities.get(v)) for s, v in situations.items()}, problem,
    )


@dataclass(frozen=True)
class Paging:
    provider: str
    service_id: str | None
    escalation_policy_id: str | None
    oncall: tuple[str, ...]  # local provider: who the ledger reports, by level


def paging(cfg: "Config") -> Paging:
    p = cfg.paging
    if p.provider == "pagerduty":
        return Paging("pagerduty", p.pagerduty.service_id, p.pagerduty.escalation_policy_id, ())
    return Paging(p.provider, None, None, tuple(p.local.oncall))


# ---------------------------------------------------------------------------------------------
# Commands with this config's names


class Commands:
    """The opsctl commands a runbook quotes, built from the config's backend and vendor names."""

    def __init__(self, cfg: "Config"):
        self.cfg = cfg

    def failover(self, source: str, *, reason: str = "", dry_run: bool = False) -> str:
        return command("traffic", "failover", "--from", source, "--incident", INCIDENT,
                       *(("--reason", reason) if reason else ()), *(("--dry-run",) if dry_run else ()))

    def ramp(self, weights: Mapping[str, int], *, reason: str = "", emergency: bool = False,
             dry_run: bool = False) -> str:
        to = [f"{b}={pct_}" for b, pct_ in weights.items()]
        return command("traffic", "ramp", *to, "--incident", INCIDENT, *(("--reason", reason) if reason else ()),
                       *(("--emergency",) if emergency else ()), *(("--dry-run",) if dry_run else ()))

    def set(self, weights: Mapping[str, int], *, shadow: Mapping[str, int] | None = None, reason: str = "",
            emergency: bool = False, dry_run: bool = False) -> str:
        words = [f"{b}={w}" for b, w in weights.items()]
        for b, w in (shadow or {}).items():
            words += ["--shadow", f"{b}={w}"]
        return command("traffic", "set", *words, "--incident", INCIDENT, *(("--reason", reason) if reason else ()),
                       *(("--emergency",) if emergency else ()), *(("--dry-run",) if dry_run else ()))

    def restore(self, *, emergency: bool = False, dry_run: bool = False) -> str:
        return command("traffic", "restore", "--incident", INCIDENT, *(("--emergency",) if emergency else ()),
                       *(("--dry-run",) if dry_run else ()))

    def abort_ramp(self, reason: str) -> str:
        return command("traffic", "ramp", "--abort", "--reason", reason)

    def history(self) -> str:
        return command("traffic", "history", "--incident", INCIDENT)

    def ticket(self, route: TicketRoute, situation: str, subject: str, body: str, *, dry_run: bool = False) -> str:
        return command("ticket", "file", "--vendor", route.vendor, "--category", route.category,
                       "--severity", route.sev(situation), "--subject", subject, "--body", body,
                       *(("--dry-run",) if dry_run else ()))

    def page(self, summary: str, component: str | None = None) -> str:
        return command("page", "trigger", "-s", summary, *(("--component", component) if component else ()),
                       "--detail", f"incident={INCIDENT}")

    def probe(self, backends: Sequence[str]) -> str:
        words = [w for b in backends for w in ("--backend", b)]
        return command("probe", "consistency", "--golden", self.cfg.runbooks.golden, *words)

    def probe_repeat(self, backends: Sequence[str], repeat: int) -> str:
        words = [w for b in backends for w in ("--backend", b)]
        return command("probe", "consistency", "--golden", self.cfg.runbooks.golden, *words, "--repeat", str(repeat))

    def shadow_report(self, backend: str, primary: Sequence[str], share: float | None = None) -> str:
        words = [w for b in primary for w in ("--primary", b)]
        return command("shadow", "report", "--backend", backend, *words,
                       *(("--share", f"{share:g}") if share is not None else ()))

    def ab(self, margin: float) -> str:
        return command("ab", "equivalence", "--successes-a", "$ACCEPTED_A", "--trials-a", "$SESSIONS_A",
                       "--successes-b", "$ACCEPTED_B", "--trials-b", "$SESSIONS_B", "--margin", f"{margin:g}")

    def plain(self, *words: str) -> str:
        return command(*words)
