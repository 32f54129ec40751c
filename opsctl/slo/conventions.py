"""One home for SLO names: windows, alert pairs, recording-rule names and label names."""

from __future__ import annotations

from opsctl.model import Model

# Burn-rate windows, shortest first, in seconds.
WINDOWS: dict[str, int] = {
    "5m": 300,
    "30m": 1800,
    "1h": 3600,
    "2h": 7200,
    "6h": 21600,
    "1d": 86400,
    "3d": 259200,
}


# The table above (and ALERT_PAIRS below) is written for a 28-30-day period. Any other period keeps
# the factors of the 28-day table and scales every window, and each pair's `for:`, by
# period / 28 days, rounded to the minute (never under 1m), as Pyrra does (its Windows(): 7d gives
# 1m/15m, 8m/1h30m... with 14/7/2/1): a 7-day SLO's ticket then fires at a burn that would spend
# its budget, not at a quarter of it. docs/decisions/0014-windows-scale-with-the-period.md.
REFERENCE_PERIOD = 28 * 86400
TABLE_PERIODS = (28 * 86400, 30 * 86400)  # periods the table's windows are used as written for


def window_scale(period_seconds: int) -> float:
    """1 for a period the table was written for (28-30 days), else period / 28 days."""
    lo, hi = TABLE_PERIODS
    return 1.0 if lo <= period_seconds <= hi else period_seconds / REFERENCE_PERIOD


def _round_minute(seconds: float) -> int:
    """To the nearest minute, halves away from zero (Go's time.Duration.Round, which Pyrra uses)."""
    return int(seconds / 60 + 0.5) * 60


def scaled_seconds(seconds: int, period_seconds: int) -> int:
    """A table window's length for a period: as written at 28-30 days, else scaled, whole minutes, >= 1m."""
    scale = window_scale(period_seconds)
    return seconds if scale == 1.0 else max(60, _round_minute(seconds * scale))


def scaled_for(seconds: int, period_seconds: int) -> int:
    """A pair's `for:` for a period: scaled like its windows (0 stays 0; never under min(for, 1m))."""
    scale = window_scale(period_seconds)
    if scale == 1.0 or seconds == 0:
        return seconds
    return max(min(seconds, 60), _round_minute(seconds * scale))


def duration_label(seconds: int) -> str:
    """A window as Prometheus and Pyrra write compound durations: 5400 -> '1h30m', 300 -> '5m'."""
    if seconds % 86400 == 0 or seconds < 60 or seconds % 60:
        return window_label(seconds)
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out


def scaled_label(table_window: str, period_seconds: int) -> str:
    """The label of a table window ('1h') for a period: '1h' at 28-30 days, '15m' at 7 days."""
    return duration_label(scaled_seconds(WINDOWS[table_window], period_seconds))


def period_windows(period_seconds: int) -> dict[str, int]:
    """The burn-rate windows of a period, shortest first: label -> seconds (WINDOWS at 28-30 days).
    Two table windows that scale to one length (very short periods) are one window."""
    out: dict[str, int] = {}
    for name, seconds in WINDOWS.items():
        scaled = scaled_seconds(seconds, period_seconds)
        out.setdefault(duration_label(scaled), scaled)
    return out


class AlertPair(Model):
    """Google's multi-window multi-burn-rate pair: fire when both windows burn above the factor.

    `budget_share` is the share of the period's budget spent over `long` at the threshold rate.
    `long` and `short` name the 28-30-day table's windows; `windows(period)` gives the period's
    own. At 28-30 days the factor is derived from the share and the period (30 days: 14.4x); any
    other period keeps the 28-day factor (13.44x) over windows scaled by period / 28 days.
    """

    severity: str  # page | ticket
    long: str
    short: str
    budget_share: float

    def factor(self, period_seconds: int) -> float:
        reference = period_seconds / window_scale(period_seconds)  # the period itself, or 28 days
        return self.budget_share * reference / WINDOWS[self.long]

    def windows(self, period_seconds: int) -> tuple[str, int, str, int]:
        """(long label, long seconds, short label, short seconds) of this pair for a period."""
        long, short = scaled_seconds(WINDOWS[self.long], period_seconds), scaled_seconds(WINDOWS[self.short], period_seconds)
        return duration_label(long), long, duration_label(short), short


ALERT_PAIRS: tuple[AlertPair, ...] = (
    AlertPair("page", "1h", "5m", 0.02),     # 14.4x on a 30-day period
    AlertPair("page", "6h", "30m", 0.05),    # 6x
    AlertPair("ticket", "1d", "2h", 0.10),   # 3x
    AlertPair("ticket", "3d", "6h", 0.10),   # 1x
)

SEVERITIES = ("page", "ticket")


def format_factor(factor: float) -> str:
    """A burn-rate threshold as every output prints it: 4 significant digits, no `x` (13.44, 0.9333)."""
    return f"{factor:.4g}"
STATUS_ORDER = {"ok": 0, "ticket": 1, "page": 2, "unknown": 3}

# Label names carried by generated rules and reports.
LABEL_SLO = "slo"
LABEL_BACKEND = "backend"
LABEL_SERVICE = "service"
LABEL_SEVERITY = "severity"

ALL_BACKENDS = "all"  # the `backend` label value of an SLO over the whole service
LABEL_LONG_WINDOW = "long_window"
LABEL_SHORT_WINDOW = "short_window"

LABEL_CATEGORY = "category"  # fixed per alert rule: what Alertmanager routes on (CATEGORIES)
LABEL_TIER = "tier"  # burn-rate alerts: "fast" for the fast-burn tier, absent otherwise
LABEL_CAUSE = "cause"  # on the recorded per-cause ratios only; an alert carries its cause in annotations

# Sloth's labels (slok/sloth internal/prometheus/conventions.go), added to the recording series
# when `slos.sloth_labels` is on, so Sloth's dashboards read opsctl's series (the same series, no copy).
LABEL_SLOTH_ID = "sloth_id"
LABEL_SLOTH_SERVICE = "sloth_service"
LABEL_SLOTH_SLO = "sloth_slo"


def sloth_labels(service: str, slo_name: str) -> dict[str, str]:
    """Sloth's values: sloth_id is `<service>-<slo name>` (its spec loaders' fmt.Sprintf("%s-%s")).
    An opsctl name already prefixed `<service>-` is Sloth's id (a Sloth file read, or what
    `slo convert --to sloth` writes as the Sloth name without the prefix): not prefixed twice."""
    prefix = f"{service}-"
    name = slo_name[len(prefix):] if slo_name.startswith(prefix) and len(slo_name) > len(prefix) else slo_name
    return {LABEL_SLOTH_ID: f"{prefix}{name}", LABEL_SLOTH_SERVICE: service, LABEL_SLOTH_SLO: name}

RECORD_SLOTH_INFO = "sloth_slo_info"  # vector(1) per SLO with Sloth's labels (slos.sloth_labels)


def sloth_info_labels(goal: float) -> dict[str, str]:
    """What Sloth's `sloth_slo_info` adds to the SLO's labels: its objective in percent as Sloth
    writes it ("99.9"), and the mode naming the generator (Sloth's are cli-gen-prom, ctrl-gen-k8s)."""
    return {"sloth_mode": "opsctl", "sloth_objective": f"{goal * 100:.10g}"}


# Labels opsctl sets on generated rules; `alerting.labels` in the config may not override them.
RESERVED_LABELS = (
    "alertname", LABEL_SLO, LABEL_BACKEND, LABEL_SERVICE, LABEL_SEVERITY, LABEL_LONG_WINDOW, LABEL_SHORT_WINDOW,
    LABEL_CATEGORY, LABEL_TIER, LABEL_CAUSE,
)

# ---------------------------------------------------------------------------------------------
# Causes: what broke, carried from the counters to the page title, the policy and the ticket.
# An alert's labels never change while it fires (a flipping label is a new fingerprint: a new
# episode, a spurious resolve), so an availability alert keeps one rule per SLO x severity x tier
# and carries its cause in the `cause` ANNOTATION: the dominant bad outcome class over the alert's
# short window, read from the recorded per-cause ratios. Latency, quality and absent-metric alerts
# carry the fixed cause of their kind.

CAUSES = ("server_error", "timeout", "auth", "capacity", "latency", "quality", "absent")
# Availability causes -> the proxy outcomes (opsctl.metrics.schema.BAD_OUTCOMES) they count.
CAUSE_OUTCOMES: dict[str, tuple[str, ...]] = {
    "server_error": ("server_error",),
    "timeout": ("timeout",),
    "auth": ("auth_error",),  # 401/403 and token failures
    "capacity": ("throttled",),  # 429, or 503 with Retry-After: the vendor's provisioned throughput exhausted
}
AVAILABILITY_CAUSES = tuple(CAUSE_OUTCOMES)
# What an availability SLO's alert says when no per-cause ratio answers (an SLI over another metric).
DEFAULT_AVAILABILITY_CAUSE = "server_error"
# How titles and summaries name a cause: "databricks: auth failures (401/403) at 22x".
CAUSE_TEXT = {
    "server_error": "server errors (5xx)",
    "timeout": "timeouts",
    "auth": "auth failures (401/403)",
    "capacity": "throttled (429/503 Retry-After: capacity)",
    "latency": "slow answers (latency)",
    "quality": "quality drift",
    "absent": "metrics absent",
}

# The fixed `category` label of every alert opsctl generates (Alertmanager routes on it).
CATEGORIES = ("availability", "latency", "quality", "absent")


def cause_text(cause: str) -> str:
    return CAUSE_TEXT.get(cause, cause)


def dominant_cause(ratios: dict[str, float | None]) -> str | None:
    """The cause with the largest ratio (ties: the first in CAUSES order); None when none is above 0.
    Prometheus' `topk(1, ...)` picks the same one whenever the largest is unique."""
    best, top = None, 0.0
    for cause in AVAILABILITY_CAUSES:
        value = ratios.get(cause)
        if value is not None and value == value and value > top:
            best, top = cause, value
    return best


def record_cause_ratio(window: str) -> str:
    """Share of valid events that were bad for one cause over `window` (label `cause`):
    slo:sli_cause_error:ratio_rate5m."""
    return f"slo:sli_cause_error:ratio_rate{window}"

# ---------------------------------------------------------------------------------------------
# Recording rules, in Prometheus' level:metric:operation form. Every series carries the labels
# slo, backend and service, so one SLO's series are selected with {slo="<name>",service="<service>"}
# (rules.own_matchers): SLO names need not be unique across the services of one Prometheus.

RECORD_OBJECTIVE = "slo:objective:ratio"  # the goal, e.g. 0.9999
RECORD_ERROR_BUDGET = "slo:error_budget:ratio"  # 1 - goal
RECORD_BUDGET_REMAINING = "slo:period_error_budget_remaining:ratio"  # 1 - error ratio over period / budget


def window_label(seconds: int) -> str:
    """A window as Prometheus writes durations: 300 -> '5m', 2419200 -> '28d'."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def record_error_ratio(window: str) -> str:
    """Share of valid events that were bad over `window` ('5m', '28d'): slo:sli_error:ratio_rate5m."""
    return f"slo:sli_error:ratio_rate{window}"


def record_good_increase(window: str) -> str:
    """Good events over the base window, aggregated to one series per SLO: slo:sli_good:increase5m."""
    return f"slo:sli_good:increase{window}"


def record_valid_increase(window: str) -> str:
    """Valid events over the base window, aggregated to one series per SLO: slo:sli_valid:increase5m."""
    return f"slo:sli_valid:increase{window}"


# Windows whose error ratio comes from the recorded base-window increases (plus the period):
# raw increase() over a day or more touches every sample of every series each evaluation.
DERIVED_WINDOWS = ("1d", "3d")
BASE_WINDOW_SECONDS = 300  # the recorded increases cover at least 5m (a multiple of the interval)
# The hourly increases, recorded every evaluation from the base ones (the fleet report reads the
# long windows and the period's coverage from them at a 1h step: docs/decisions/0420-*).
COARSE_WINDOW = ("1h", 3600)


def base_window(interval_seconds: int, period_seconds: int | None = None) -> tuple[str, int]:
    """The recorded increases' window: the smallest multiple of the evaluation interval >= 5m (5m
    scaled with the period, see window_scale), so consecutive evaluations' windows tile time (each
    event counted base / interval times)."""
    base = BASE_WINDOW_SECONDS if period_seconds is None else scaled_seconds(BASE_WINDOW_SECONDS, period_seconds)
    seconds = interval_seconds * -(-base // interval_seconds)
    return window_label(seconds), seconds


def derived_windows(period_seconds: int) -> tuple[str, ...]:
    """The labels of a period's windows taken from the recorded increases (DERIVED_WINDOWS scaled)."""
    return tuple(dict.fromkeys(scaled_label(w, period_seconds) for w in DERIVED_WINDOWS))


# The valid rate every SLO over event counts records whatever its period (its short windows scale):
# the dashboards' traffic split reads it, so services and SLOs of any period share one series name.
TRAFFIC_RATE_WINDOW = "5m"


def record_valid_rate(window: str) -> str:
    """Valid events per second over `window` (the minimum-traffic guard): slo:sli_valid:rate5m."""
    return f"slo:sli_valid:rate{window}"


def rule_group_name(prefix: str, slo_name: str) -> str:
    """One rule group per SLO: recording rules first, then the alerts that read them."""
    return f"{prefix}-{slo_name}"


def period_group_name(prefix: str, slo_name: str) -> str:
    """The SLO's period ratio and budget left, evaluated less often (no alert reads them)."""
    return f"{prefix}-{slo_name}-period"


# ---------------------------------------------------------------------------------------------
# Alerts: one alert name per severity; the window pair is in the long_window / short_window labels.

ALERT_NAMES = {"page": "SloBurnRatePage", "ticket": "SloBurnRateTicket"}
FAST_ALERT_NAME = "SloFastBurnPage"  # the fast-burn tier (alerting.fast), severity page, tier=fast
ABSENT_ALERT_NAME = "SloMetricsAbsent"  # the SLI's series have no sample (alerting.absent)


def fast_group_name(prefix: str, slo_name: str) -> str:
    """The fast-burn tier's group: evaluated every alerting.fast.evaluation_interval (seconds)."""
    return f"{prefix}-{slo_name}-fast"


def alert_name(severity: str) -> str:
    return ALERT_NAMES[severity]


def runbook_name(slo_name: str, severity: str) -> str:
    """The runbook file an alert links to, relative to the runbooks directory / base URL."""
    if severity not in SEVERITIES:
        raise ValueError(f"unknown severity {severity!r}")
    return f"{slo_name}-{severity}.md"


def runbook_url(base_url: str, slo_name: str, severity: str) -> str:
    return f"{base_url.rstrip('/')}/{runbook_name(slo_name, severity)}"
