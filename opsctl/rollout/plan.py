"""The rollout plan file (`rollouts/*.yaml`): stages shadow / ab / ramp / cost, each with analyses.

A plan is typed on opsctl.model like every other input: `load_plan(path)` reports every problem at
once, each with the file and the key path (`stages[2].ramp.steps[1].weight`). Each stage item is a
mapping with exactly one of `shadow`, `ab`, `ramp`, `cost`.

An analysis (Argo Rollouts' AnalysisTemplate) names a `check`, a `success` and a `failure`
condition over the check's `result` and a `failure_limit`; its three outcomes are Argo's:
Successful -> continue, Failed more than `failure_limit` times -> abort (back to where the rollout
started), neither condition true -> Inconclusive -> pause (waits for a person). Conditions are a
small closed language, parsed once here: `result.FIELD OP VALUE` joined by `and` / `or`, with OP one
of < <= > >= == != and VALUE a number, true, false or a 'quoted' word; no eval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from opsctl.model import Duration, Model, field

CHECKS = ("burn-rate", "shadow-readiness", "quality-rules", "consistency", "m2", "ab-equivalence",
          "latency-judge", "cost")
OUTCOMES = ("continue", "abort", "pause")  # Successful, Failed (beyond the limit), Inconclusive
MAX_STEPS = 100

_CLAUSE = re.compile(r"\s*result(?:\.([A-Za-z_][A-Za-z0-9_]*))?\s*(<=|>=|==|!=|<|>)\s*"
                     r"(-?[0-9]+(?:\.[0-9]+)?|true|false|'[A-Za-z0-9_ .-]*')\s*")


class Clause(Model):
    name: str  # "" = the result itself
    op: str
    value: Any

    def holds(self, result: Any) -> bool:
        actual = result.get(self.name) if self.name and isinstance(result, dict) else (
            getattr(result, self.name, None) if self.name else result)
        if actual is None:
            return False
        if isinstance(self.value, (int, float)) and not isinstance(self.value, bool):
            if isinstance(actual, bool) or not isinstance(actual, (int, float)):
                return False
        try:
            return {"<": actual < self.value, "<=": actual <= self.value, ">": actual > self.value,
                    ">=": actual >= self.value, "==": actual == self.value, "!=": actual != self.value}[self.op]
        except TypeError:
            return False


def parse_condition(text: str) -> tuple[tuple[Clause, ...], ...]:
    """'result.p < 0.05 and result.n >= 100 or result.verdict == 'pass'' -> OR of ANDs of clauses."""
    if not text.strip():
        raise ValueError("a condition must not be empty")
    alternatives = []
    for alternative in re.split(r"\s+or\s+", text.strip()):
        clauses = []
        for part in re.split(r"\s+and\s+", alternative):
            m = _CLAUSE.fullmatch(part)
            if m is None:
                raise ValueError(f"{part.strip()!r} is not `result.FIELD OP VALUE` (OP one of < <= > >= == !=;"
                                 " VALUE a number, true, false or a 'quoted' word)")
            name, op, raw = m.groups()
            value: Any
            if raw in ("true", "false"):
                value = raw == "true"
            elif raw.startswith("'"):
                value = raw[1:-1]
            else:
                value = float(raw) if "." in raw else int(raw)
            clauses.append(Clause(name or "", op, value))
        alternatives.append(tuple(clauses))
    return tuple(alternatives)


def condition_holds(text: str, result: Any) -> bool:
    return any(all(c.holds(result) for c in clauses) for clauses in parse_condition(text))


class AnalysisArgs(Model):
    """A check's own parameters, typed: each check takes the ones named in ARGS_OF and no other."""

    window: Duration | None = None  # the evidence window (default: the analysis interval)
    threshold: float | None = None  # latency-judge: the bound in seconds (a bucket bound)
    margin: float | None = None  # latency-judge: equivalence margin on the share over the threshold
    alpha: float | None = None  # latency-judge: level of each one-sided test
    backends: list[str] | None = None  # burn-rate: the backends judged (default: both of the plan's)
    gold: str | None = None  # m2: the golden set's M2 file
    answers: str | None = None  # m2: the answers file of the new backend
    min_exact_match: float | None = None  # consistency: the noise floor (default: the probe's own)

    def __post_init__(self):
        if self.margin is not None and not 0 < self.margin < 1:
            raise ValueError("margin must be between 0 and 1")
        if self.alpha is not None and not 0 < self.alpha < 0.5:
            raise ValueError("alpha must be between 0 and 0.5")
        if self.threshold is not None and not self.threshold > 0:
            raise ValueError("threshold must be positive (seconds)")
        if self.window is not None and self.window.seconds < 60:
            raise ValueError("window must be at least 1m")
        if self.min_exact_match is not None and not 0 <= self.min_exact_match <= 1:
            raise ValueError("min_exact_match must be between 0 and 1")


ARGS_OF: dict[str, tuple[str, ...]] = {
    "burn-rate": ("backends",),
    "shadow-readiness": ("window",),
    "quality-rules": ("window",),
    "consistency": ("min_exact_match",),
    "m2": ("gold", "answers"),
    "ab-equivalence": ("window",),
    "latency-judge": ("window", "threshold", "margin", "alpha"),
    "cost": ("window",),
}


class Analysis(Model):
    check: Literal["burn-rate", "shadow-readiness", "quality-rules", "consistency", "m2", "ab-equivalence",
                   "latency-judge", "cost"]
    success: str
    failure: str
    failure_limit: int = 0  # failed measurements tolerated; one more aborts
    interval: Duration = Duration("1h")  # how often the check is measured during the step
    args: AnalysisArgs = field(default_factory=AnalysisArgs)  # the check's own parameters (ARGS_OF)

    def __post_init__(self):
        allowed = ARGS_OF[self.check]
        extra = [k for k in AnalysisArgs.__dataclass_fields__ if getattr(self.args, k) is not None and k not in allowed]
        if extra:
            raise ValueError(f"args: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not an argument of"
                             f" {self.check} (it takes {', '.join(allowed)})")
        for key in ("success", "failure"):
            try:
                parse_condition(getattr(self, key))
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        if not 0 <= self.failure_limit <= 100:
            raise ValueError("failure_limit must be between 0 and 100")
        if self.interval.seconds < 60:
            raise ValueError("interval must be at least 1m")


def judge(analysis: Analysis, results: list[Any]) -> str:
    """Argo's outcome of an analysis over its measurements so far: continue | abort | pause.

    A measurement is Successful when `success` holds, Failed when `failure` holds (failure wins
    when both do), else Inconclusive. More than `failure_limit` Failed -> abort; any Inconclusive
    (or no measurement at all) -> pause; otherwise continue."""
    failed = inconclusive = 0
    for result in results:
        kind = classify(analysis, result)
        failed += kind == "failed"
        inconclusive += kind == "inconclusive"
    return outcome_of(analysis, failed, inconclusive, len(results))


def classify(analysis: Analysis, result: Any) -> str:
    """One measurement: failed (failure holds; it wins when both do) | successful | inconclusive."""
    if condition_holds(analysis.failure, result):
        return "failed"
    return "successful" if condition_holds(analysis.success, result) else "inconclusive"


def outcome_of(analysis: Analysis, failed: int, inconclusive: int, measured: int) -> str:
    """`judge` from the counts alone (what the rollout controller keeps of a long soak)."""
    if failed > analysis.failure_limit:
        return "abort"
    if inconclusive or not measured:
        return "pause"
    return "continue"


class ShadowStep(Model):
    mirror: int  # percent of requests mirrored to the new backend (responses discarded)
    hold: Duration

    def __post_init__(self):
        if not 1 <= self.mirror <= 100:
            raise ValueError("mirror must be between 1 and 100")
        if self.hold.seconds < 60:
            raise ValueError("hold must be at least 1m")


class ShadowStage(Model):
    steps: list[ShadowStep]
    analysis: list[Analysis] = field(default_factory=list)


class AbMetric(Model):
    """A business metric per arm: successes / trials, each PromQL over the grammar service's counters."""

    name: str
    successes: str  # e.g. sum(increase(grammar_suggestions_accepted_total{arm="$arm"}[$window]))
    trials: str
    margin: float | None = None  # absolute equivalence margin on the ratio (0.01 = one point), given
    baseline: float | None = None  # today's ratio, for the sample size (else read from the counters)
    # the SLO goal of the ratio of good trials the metric protects: the margin is then
    # rollout.margins.MARGIN_FRACTION of its budget 1 - goal (docs/decisions/0530)
    goal: float | None = None

    def __post_init__(self):
        if self.margin is None and self.goal is None:
            raise ValueError("give margin (an absolute difference of ratios) or goal (the SLO goal of the ratio,"
                             " the margin then a tenth of its budget)")
        if self.margin is not None and not 0 < self.margin < 1:
            raise ValueError("margin must be between 0 and 1 (an absolute difference of ratios)")
        if self.goal is not None and not 0 < self.goal < 1:
            raise ValueError("goal must be between 0 and 1 (e.g. 0.99)")
        if self.baseline is not None and not 0 < self.baseline < 1:
            raise ValueError("baseline must be between 0 and 1")


class AbStage(Model):
    share: int  # percent of users the experiment gate assigns to the new backend
    min_duration: Duration
    metrics: list[AbMetric] = field(default_factory=list)
    alpha: float = 0.05
    power: float = 0.8
    daily_trials: int | None = None  # trials per day today (both arms); sizes the test's horizon
    analysis: list[Analysis] = field(default_factory=list)

    def __post_init__(self):
        if not 0 < self.alpha < 0.5:
            raise ValueError("alpha must be between 0 and 0.5")
        if not 0.5 <= self.power < 1:
            raise ValueError("power must be between 0.5 and 1")
        if self.daily_trials is not None and self.daily_trials <= 0:
            raise ValueError("daily_trials must be positive")


class RampStep(Model):
    weight: int  # percent of requests on the new backend
    soak: Duration

    def __post_init__(self):
        if not 1 <= self.weight <= 100:
            raise ValueError("weight must be between 1 and 100")
        if self.soak.seconds < 60:
            raise ValueError("soak must be at least 1m")


class RampStage(Model):
    steps: list[RampStep]
    analysis: list[Analysis] = field(default_factory=list)


class CostStage(Model):
    share: int  # percent on the new backend while cost is measured (at least cost.min_traffic_share)
    window: Duration
    analysis: list[Analysis] = field(default_factory=list)


class Stage(Model):
    shadow: ShadowStage | None = None
    ab: AbStage | None = None
    ramp: RampStage | None = None
    cost: CostStage | None = None

    def __post_init__(self):
        given = [k for k in ("shadow", "ab", "ramp", "cost") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"a stage is exactly one of shadow, ab, ramp, cost (got {', '.join(given) or 'none'})")

    @property
    def kind(self) -> str:
        return next(k for k in ("shadow", "ab", "ramp", "cost") if getattr(self, k) is not None)

    @property
    def body(self):
        return getattr(self, self.kind)


DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def parse_days(text: str) -> tuple[int, ...]:
    """'Mon-Fri' or 'Mon,Wed,Fri' (or a mix: 'Mon-Wed,Fri') -> weekday numbers (Monday 0)."""
    out: list[int] = []
    for part in text.split(","):
        ends = [p.strip().capitalize()[:3] for p in part.split("-")]
        if len(ends) > 2 or any(e not in DAYS for e in ends):
            raise ValueError(f"days: {text!r} is not a list of days such as Mon-Fri or Mon,Wed,Fri")
        a, b = DAYS.index(ends[0]), DAYS.index(ends[-1])
        out += list(range(a, b + 1)) if a <= b else list(range(a, 7)) + list(range(0, b + 1))
    return tuple(sorted(set(out)))


def parse_hhmm(text: str, what: str) -> int:
    """'09:00' -> minutes after midnight."""
    m = re.fullmatch(r"([01][0-9]|2[0-3]):([0-5][0-9])", text.strip())
    if m is None:
        raise ValueError(f"{what}: {text!r} is not a time of day such as 09:00")
    return int(m.group(1)) * 60 + int(m.group(2))


class WorkingHours(Model):
    """When a step may start, in the plan's `timezone`: e.g. {days: Mon-Fri, start: "09:00", end: "17:00"}.
    Only starts are held to it; a step runs on past `end`."""

    days: str = "Mon-Fri"
    start: str = "09:00"
    end: str = "17:00"

    def __post_init__(self):
        parse_days(self.days)
        if parse_hhmm(self.end, "end") <= parse_hhmm(self.start, "start"):
            raise ValueError("end must be after start")


class RolloutPlan(Model):
    name: str
    backend: str  # the backend receiving the traffic (e.g. databricks)
    baseline: str  # the backend it comes from (e.g. internal)
    stages: list[Stage]
    start: str | None = None  # RFC 3339, the default for `rollout plan --start`
    description: str = ""
    timezone: str | None = None  # IANA zone of the plan's local times (working hours); e.g. America/New_York
    working_hours: WorkingHours | None = None  # steps start only inside these (needs `timezone`)
    complete_by: str | None = None  # RFC 3339: a plan whose schedule ends later is refused

    @property
    def start_at(self) -> float | None:
        from opsctl.clock import parse_rfc3339

        return None if self.start is None else parse_rfc3339(self.start, require_zone=True)

    @property
    def complete_by_at(self) -> float | None:
        from opsctl.clock import parse_rfc3339

        return None if self.complete_by is None else parse_rfc3339(self.complete_by, require_zone=True)


def _problems(plan: RolloutPlan) -> list[str]:
    """Checks across stages, each naming its key path."""
    problems = []
    if plan.backend == plan.baseline:
        problems.append("baseline: must differ from backend")
    if plan.start is not None:
        try:
            plan.start_at
        except ValueError as exc:
            problems.append(f"start: {exc}")
    if plan.complete_by is not None:
        try:
            plan.complete_by_at
        except ValueError as exc:
            problems.append(f"complete_by: {exc}")
    if plan.timezone is not None:
        from opsctl.freeze import _zone

        try:
            _zone(plan.timezone)
        except ValueError as exc:
            problems.append(f"timezone: {exc}")
    if plan.working_hours is not None and plan.timezone is None:
        problems.append("working_hours: needs the plan's `timezone` (e.g. timezone: America/New_York)")
    if not plan.stages:
        problems.append("stages: a plan needs at least one stage")
    weight, steps = 0, 0
    for i, stage in enumerate(plan.stages):
        where = f"stages[{i}].{stage.kind}"
        body = stage.body
        if stage.kind == "shadow":
            if not body.steps:
                problems.append(f"{where}.steps: at least one step")
            last = 0
            for j, step in enumerate(body.steps):
                if step.mirror <= last:
                    problems.append(f"{where}.steps[{j}].mirror: must be above the step before ({last})")
                last = max(last, step.mirror)
            steps += len(body.steps)
        elif stage.kind == "ramp":
            if not body.steps:
                problems.append(f"{where}.steps: at least one step")
            for j, step in enumerate(body.steps):
                if step.weight <= weight:
                    problems.append(f"{where}.steps[{j}].weight: must be above the weight before it ({weight})")
                weight = max(weight, step.weight)
            steps += len(body.steps)
        else:
            share = body.share
            if not 1 <= share <= 99:
                problems.append(f"{where}.share: must be between 1 and 99")
            elif share < weight:
                problems.append(f"{where}.share: {share} is below the weight already reached ({weight})")
            seconds = (body.min_duration if stage.kind == "ab" else body.window).seconds
            if seconds < 3600:
                problems.append(f"{where}.{'min_duration' if stage.kind == 'ab' else 'window'}: at least 1h")
            weight = max(weight, share) if 1 <= share <= 99 else weight
            steps += 1
        for j, analysis in enumerate(body.analysis):
            allowed = {"shadow": {"shadow-readiness", "burn-rate", "consistency", "m2", "latency-judge"},
                       "ab": {"ab-equivalence", "burn-rate", "quality-rules", "m2", "latency-judge", "consistency"},
                       "ramp": {"burn-rate", "quality-rules", "latency-judge", "consistency", "m2"},
                       "cost": {"cost", "burn-rate"}}[stage.kind]
            if analysis.check not in allowed:
                problems.append(f"{where}.analysis[{j}].check: {analysis.check!r} does not judge a {stage.kind}"
                                f" stage (use one of {', '.join(sorted(allowed))})")
    if steps > MAX_STEPS:
        problems.append(f"stages: {steps} steps in all; at most {MAX_STEPS}")
    return problems


def build_plan(data: Any, filename: str, *, backends: list[str] | None = None) -> RolloutPlan:
    """Raw data -> a RolloutPlan; every problem at once (ConfigError, exit 2), each with `filename: key`.
    The checks across stages run once every stage has its shape."""
    from opsctl.errors import ConfigError
    from opsctl.model import build_into

    problems: list[str] = []
    plan = build_into(RolloutPlan, data, "", problems)
    if backends is not None and isinstance(data, dict):
        for key in ("backend", "baseline"):
            value = data.get(key)
            if isinstance(value, str) and value not in backends:
                problems.append(f"{key}: {value!r} is not a configured backend ({', '.join(backends)})")
    if plan is not None:
        problems += _problems(plan)
    if problems:
        from opsctl.errors import printable

        # a key path echoes the file's own keys: escaped, so a key cannot forge a line of output
        raise ConfigError(f"{filename}: invalid rollout plan", problems=[f"{filename}: {printable(p)}" for p in problems])
    return plan


def load_plan(path: str | Path, *, backends: list[str] | None = None) -> RolloutPlan:
    from opsctl.config.loading import parse_yaml, read_text

    path = Path(path)
    return build_plan(parse_yaml(read_text(path, "rollout plan"), path), str(path), backends=backends)
