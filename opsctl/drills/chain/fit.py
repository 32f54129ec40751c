"""Whether a scenario can run through the chain, and which of its expectations the chain judges:
one answer for the run (runner.ChainDrill) and its dry run (plan.chain_plan), so the plan refuses
what the run refuses and lists what the run will call "not judged here" (observed.CANNOT_JUDGE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.drills.scenario import Scenario


def chain_problems(scenario: Scenario, cfg: Config, *, history: float) -> list[str]:
    """Why the local chain cannot run `scenario` (empty: it can), each naming the file and the fix.
    `history`: the seconds of baseline the chain backfills."""
    from opsctl.drills.chain.faults import KINDS

    faults = scenario.faults
    out = [f"{scenario.path}: fault kind {f.kind!r} has no chain exporter fault (known: {', '.join(KINDS)})"
           for f in faults if f.kind not in KINDS]
    if not faults:
        out.append(f"{scenario.path}: a chain drill needs a fault to send down the chain (method has none):"
                   f" run it embedded (opsctl drill run {scenario.path})")
    return out + quality_refusal(scenario, cfg, history=history)


def quality_refusal(scenario: Scenario, cfg: Config, *, history: float) -> list[str]:
    """A quality scenario is refused, with the reason, rather than left to wait out its timeout:
    the chain does not yet scale the quality rules' `for:`, backfill as far back as they compare,
    nor check their minimum traffic against the scenario's rate."""
    from opsctl.quality.rules import plan_quality

    sc = scenario
    quality = [f.kind for f in sc.faults if f.kind == "quality-regression"] or [
        e.alert or "" for e in sc.expectations if e.expect == "detected" and (e.alert or "").startswith("Quality")]
    if not quality:
        return []
    plan = plan_quality(cfg)
    if plan is None:
        return [f"{sc.path}: a quality scenario in a chain drill, but quality.rules.enabled is false: nothing would fire"]
    longest_for = max((a.for_seconds for a in plan.alerts), default=0)
    needs = max((a.needs_per_side() for a in plan.alerts), default=0.0)  # the noise guard, per window
    return [f"{sc.path}: a chain drill does not run quality scenarios yet: the quality rules compare with"
            f" {plan.offset} earlier (the chain backfills {history / 3600:g}h), their for: {longest_for}s is not"
            f" shortened, and the noisiest needs {needs:,.0f} requests per {plan.window} on each side (the scenario"
            f" sends {sc.embedded.peak_rps:g}/s at peak; the chain's traffic rate is not checked against it): run it"
            f" embedded (opsctl drill run {sc.path})"]


def judged_here(scenario: Scenario) -> list[str]:
    """Each expectation as the chain will judge it, in the scenario's order: `judged: NAME (KIND)`,
    or `not judged here: NAME (KIND): why` for a kind no local chain component can show. A no-flap
    window is watched whole once the hops settled (polling._watch_no_flap, decisions/0356)."""
    from opsctl.drills.chain.observed import cannot_judge
    from opsctl.drills.text import duration_text

    out = []
    for e in scenario.expectations:
        why = cannot_judge(e)
        if why:
            out.append(f"not judged here: {e.name} ({e.expect}): {why}")
        elif e.expect == "no-flap":
            out.append(f"judged: {e.name} ({e.expect}; the chain watches the traffic for the whole"
                       f" {duration_text(e.window)} after the move off, up to the scenario's max-duration; a move"
                       " back fails it)")
        else:
            out.append(f"judged: {e.name} ({e.expect})")
    return out
