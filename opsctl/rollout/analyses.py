"""The plan's analyses measured from evidence: each check reads the metric source (Prometheus or the
embedded store) at one instant and returns its `result`, the mapping the analysis' success and
failure conditions are judged on (plan.judge). No number is typed in: every figure is read.

    burn-rate         the fastest short-window burn (5m, 30m, 1h) of the SLOs of both backends
                      (the receiving one and the one it comes from): max_burn, burn_<backend>
    shadow-readiness  `opsctl shadow check` of the new backend against the baseline: ready,
                      error_ratio (the new backend's bad share of its requests), p99_ratio
                      (its p99 over the baseline's), and each part of the verdict: requests_ok,
                      errors_ok, latency_ok (every percentile within max_latency_ratio), load_ok
    quality-rules     the live quality rules (opsctl.quality.live): firing (count), ok
    consistency       the consistency probe's exact-match gauge against its noise floor:
                      exact_match, floor, ok
    latency-judge     the equivalence judgement on the share over `threshold` (quality/latency_judge):
                      verdict (equivalent | worse | better | inconclusive), difference
    ab-equivalence    the A/B arms read from the grammar service's counters (quality/abtest): verdict,
                      and per metric its verdict, difference, needed (trials per arm), n per arm, days
    m2                M2 precision, recall and F0.5 of the answers against the golden set: p, r, f05
    cost              cost per million tokens per backend over the window, with the new backend's
                      share of tokens (cost.replicas_query bills the internal fleet when set):
                      vendor_per_mtok, baseline_per_mtok, share, share_ok (>= cost.min_traffic_share)

A check that cannot be measured (no data) returns {"error": why}: neither condition holds on it, so
it is Inconclusive (pause), never a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from opsctl.errors import OpsctlError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.rollout.plan import Analysis, RolloutPlan


class Evidence:
    """What a measurement reads: the config, the metric source (opened once, lazily) and the instant."""

    def __init__(self, cfg: "Config", plan: "RolloutPlan", at: float, source: Callable[[], Any] | None = None,
                 base_dir=None):
        self.cfg, self.plan, self.at = cfg, plan, at
        self._source = source
        self._opened = None
        self.base_dir = base_dir
        self.mirror: float | None = None  # during a shadow step: the share mirrored (readiness asks that much)

    def source(self):
        if self._opened is None:
            if self._source is not None:
                self._opened = self._source()
            else:
                from opsctl.metrics.base import open_source

                self._opened = open_source(self.cfg)
        return self._opened


def _window(analysis: "Analysis") -> int:
    return (analysis.args.window or analysis.interval).seconds


def burn_rate(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.traffic.slo_health import burn_now, slo_results

    backends = analysis.args.backends or [ev.plan.backend, ev.plan.baseline]
    results, missing = slo_results(ev.cfg, ev.source, lambda: ev.at, backends)
    out: dict = {}
    rates = []
    for b in backends:
        rate = burn_now(results, b)
        out[f"burn_{b}"] = rate
        if rate is not None:
            rates.append(rate)
    if missing or len(rates) < len(backends):
        out["error"] = "no burn rate for " + ", ".join(b for b in backends if out.get(f"burn_{b}") is None)
        return out
    out["max_burn"] = max(rates)
    return out


def shadow_readiness(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.quality.shadow import shadow_report

    settings = ev.cfg.quality.shadow
    report = shadow_report(ev.source(), shadow=ev.plan.backend, primary=[ev.plan.baseline], real=[ev.plan.baseline],
                           at=ev.at, settings=settings, window_seconds=analysis.args.window.seconds
                           if analysis.args.window else None, share=ev.mirror or 1.0, scope=ev.cfg.service_matcher)
    s, p = report.figures["shadow"], report.figures["primary"]
    out: dict = {"ready": report.verdict == "ready", "verdict": report.verdict}
    # each part of the verdict on its own, so a plan can gate on what it asks of the shadow (e.g. that
    # it holds the load without errors, latency judged apart): requests_ok, errors_ok, latency_ok, load_ok
    parts: dict[str, list] = {"requests": [], "errors": [], "latency": [], "load": []}
    for c in report.checks:
        key = "errors" if c.name == "error rate" else "latency" if c.name.startswith("latency") else c.name
        if key in parts:
            parts[key].append(c.ok)
    for key, oks in parts.items():
        if oks and None not in oks:
            out[f"{key}_ok"] = all(oks)
    if s.error_rate is not None and p.error_rate is not None:
        out["error_ratio"] = s.error_rate
    p99 = next((k for k in s.latency if k.endswith("99")), None)
    shadow_p99, primary_p99 = (s.latency.get(p99), p.latency.get(p99)) if p99 else (None, None)
    if shadow_p99 and primary_p99:
        out["p99_ratio"] = shadow_p99 / primary_p99
    if report.verdict == "unknown":
        out["error"] = "; ".join(c.detail for c in report.checks if c.ok is None)
    return out


def quality_rules(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.quality.live import evaluate_quality
    from opsctl.quality.rules import plan_quality

    plan = plan_quality(ev.cfg)
    if plan is None:
        return {"error": "no quality rules configured (quality.rules)"}
    found = evaluate_quality(plan, ev.source(), ev.at)
    firing = [f for f in found.firing if f.backend == ev.plan.backend]
    out: dict = {"firing": len(firing), "ok": not firing,
                 "alerts": sorted({f.alertname for f in firing})}
    if ev.plan.backend in found.unknown:
        out["error"] = found.unknown[ev.plan.backend]
    return out


def _gauges(ev: Evidence, name: str) -> list[tuple[dict, float]]:
    """The newest value of a gauge per label set: PromQL on Prometheus, the gauges table of the
    embedded store file (where `opsctl probe --push` writes) otherwise."""
    source = ev.source()
    if hasattr(source, "query_vector"):
        return [(dict(r.get("metric", {})), float(r["value"][1])) for r in source.query_vector(name, ev.at)]
    path = getattr(source, "path", None)
    if path is None:
        return []
    from opsctl.metrics.gauges import GaugeStore

    store = GaugeStore.open(Path(path))
    try:
        return [(g.labels, g.value) for g in store.latest(name) if g.ts <= ev.at]
    finally:
        store.close()


def consistency(analysis: "Analysis", ev: Evidence) -> dict:
    """Exact match between the two backends (the probe's figure) against its noise floor: the
    threshold the probe derived from each backend's self-agreement when it ran repeatedly
    (`opsctl_probe_exact_match_threshold_ratio`), or `args.min_exact_match`."""
    from opsctl.quality import names

    def pick(name):
        for labels, value in _gauges(ev, name):
            if labels.get(names.LABEL_BACKEND) == ev.plan.backend and labels.get(names.LABEL_REFERENCE) == ev.plan.baseline:
                return value
        return None

    match = pick(names.EXACT_MATCH)
    floor = analysis.args.min_exact_match if analysis.args.min_exact_match is not None else pick(names.EXACT_MATCH_THRESHOLD)
    if match is None or floor is None:
        what = "exact match" if match is None else "noise floor (run the probe with --repeat, or set args.min_exact_match)"
        return {"error": f"no probe {what} for {ev.plan.backend} vs {ev.plan.baseline} (`opsctl probe --push`)"}
    return {"exact_match": match, "floor": floor, "ok": match >= floor}


def latency_judge(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.quality.latency_judge import judge, read_histogram
    from opsctl.rollout.margins import latency_margin

    window = _window(analysis)
    threshold = analysis.args.threshold or 0.5
    # args.margin when given, else a tenth of the budget of the SLO with this threshold (decision 0530)
    if analysis.args.margin is None:
        from opsctl.errors import UsageError
        from opsctl.slo.loading import load_slos

        try:
            drawn = latency_margin(load_slos([ev.cfg.slo_dir], ev.cfg.backends, config=ev.cfg), ev.plan.backend,
                                   threshold)
        except UsageError as exc:
            return {"error": str(exc)}
    else:
        drawn = latency_margin([], ev.plan.backend, threshold, analysis.args.margin)
    a = read_histogram(ev.source(), ev.plan.baseline, window, ev.at, ev.cfg.service_matcher)
    b = read_histogram(ev.source(), ev.plan.backend, window, ev.at, ev.cfg.service_matcher)
    verdict = judge(a, b, threshold=threshold, margin=drawn.value, alpha=analysis.args.alpha or 0.05)
    return {**verdict.to_dict(), **drawn.to_dict()}


def ab_equivalence(analysis: "Analysis", ev: Evidence, stage=None) -> dict:
    """The A/B arms (the plan's backend and baseline) read from the counters once, at the fixed
    horizon, over `args.window` (`$window` is given in seconds, which Prometheus and the embedded
    store both read), judged by `opsctl ab equivalence`'s TOST against the sample size the stage's
    alpha, power and margin need: inconclusive while an arm holds fewer trials, equivalent when the
    interval lies inside the margin, different when it lies outside. `days` is how long today's
    traffic takes to fill the smaller arm at the stage's share: the stage's `daily_trials`, else the
    window's trials a day when it spans a day or more, else the window scaled by the weekly profile
    (quality.abtest.daily_trials; `<metric>_daily_basis` says which)."""
    from opsctl.rollout.ab_check import judge_arms

    if stage is None or not stage.metrics:
        return {"error": "the A/B stage declares no metrics"}
    # the loop of `opsctl rollout ab` (rollout.ab_check), reading the counters through the same
    # wrapper; here a metric without a baseline ratio assumes 0.5 (its arm is then short of the n)
    check = judge_arms(ev.plan, stage, ev.source(), ev.at, f"{_window(analysis)}s", assumed_baseline=0.5)
    out: dict = {}
    for r in check.results:
        found, name = r.verdict, r.metric
        out.update({f"{name}_verdict": found.verdict, f"{name}_difference": found.difference,
                    f"{name}_needed": found.needed, f"{name}_n_baseline": found.n_a,
                    f"{name}_n_new": found.n_b, f"{name}_ratio_baseline": r.ratios[0],
                    f"{name}_ratio_new": r.ratios[1]})
        if r.days is not None:
            out[f"{name}_days"] = r.days
            out[f"{name}_daily_trials"] = r.daily_trials
            out[f"{name}_daily_basis"] = r.daily_basis
    return {"verdict": check.worst, "metrics": [r.verdict.verdict for r in check.results], **out}


def m2(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.quality.m2 import load_m2, score

    if not analysis.args.gold or not analysis.args.answers:
        return {"error": "m2 needs args.gold and args.answers (one answer a line)"}
    from opsctl.rollout.gates import resolve

    base = ev.base_dir or ev.cfg.base_dir  # beside the plan file (the controller sets it), else the config
    sentences = load_m2(resolve(base, analysis.args.gold))
    try:
        answers = resolve(base, analysis.args.answers).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        return {"error": f"{analysis.args.answers}: cannot read the answers: {exc}"}
    found = score(sentences, answers)
    return {"p": found.precision, "r": found.recall, "f05": found.f}


def cost(analysis: "Analysis", ev: Evidence) -> dict:
    from opsctl.quality.cost import cost_report

    window = _window(analysis)
    report = cost_report(ev.source(), ev.cfg.cost, at=ev.at, window_seconds=window, scope=ev.cfg.service_matcher)
    lines = {line.backend: line for line in report.lines}
    new, old = lines.get(ev.plan.backend), lines.get(ev.plan.baseline)
    out: dict = {"vendor_per_mtok": getattr(new, "per_million", None),
                 "baseline_per_mtok": getattr(old, "per_million", None)}
    share = getattr(new, "share", None)
    out["share"] = share
    out["share_ok"] = share is not None and share >= ev.cfg.cost.min_traffic_share
    gpu = getattr(ev.cfg.cost.backends.get(ev.plan.baseline), "gpu", None)
    out["replicas_query"] = bool(getattr(gpu, "replicas_query", None))
    out["warnings"] = [w for line in report.lines for w in line.warnings] + list(report.warnings)
    if not out["share_ok"]:
        # below cost.min_traffic_share the per-token figure is not evidence: inconclusive, never a pass
        out["error"] = (f"{ev.plan.backend} carried {'no' if share is None else f'{share:.1%} of the'} tokens,"
                        f" below cost.min_traffic_share ({ev.cfg.cost.min_traffic_share:.0%})")
        out["vendor_per_mtok"] = None
    return out


CHECKS: dict[str, Callable[..., dict]] = {
    "burn-rate": burn_rate, "shadow-readiness": shadow_readiness, "quality-rules": quality_rules,
    "consistency": consistency, "latency-judge": latency_judge, "ab-equivalence": ab_equivalence,
    "m2": m2, "cost": cost,
}


def measure(analysis: "Analysis", ev: Evidence, stage=None) -> dict:
    """One measurement of `analysis`: its result, or {"error": why} when the evidence is missing."""
    fn = CHECKS[analysis.check]
    try:
        result = fn(analysis, ev, stage) if analysis.check == "ab-equivalence" else fn(analysis, ev)
    except OpsctlError as exc:
        return {"error": exc.message}
    if "error" in result:  # part of the evidence is missing: no condition may hold on the rest
        return {"error": result["error"]}
    return result
