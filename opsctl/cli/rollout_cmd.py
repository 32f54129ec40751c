"""`opsctl rollout plan|sample-size`: the migration as one plan, on the freeze calendar."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option, render_table
from opsctl.cli.params import TIME


@click.group()
def rollout():
    """Rollout plans (rollouts/*.yaml): shadow, A/B, ramp and cost stages between the freezes.

    \b
    Examples:
      opsctl rollout plan rollouts/vendor-migration.yaml
      opsctl rollout plan rollouts/vendor-migration.yaml --start 2026-11-02T09:00:00-05:00 -o json
      opsctl rollout plan rollouts/vendor-migration.yaml --html timeline.html
      opsctl rollout sample-size --baseline 0.32 --margin 0.01 --daily-trials 400000 --share 0.1
    """


def _local(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


@rollout.command()
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--start", type=TIME, help="When the rollout starts (default: the plan's `start`).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Also write an HTML/SVG timeline here.")
@output_option
@click.pass_obj
def plan(app, plan_file, start, html_out, output):
    """Each step's start and end around the freezes, and the earliest completion.

    A step never starts inside a freeze and never runs into one: it is moved after the freeze.
    An A/B step lasts the longer of its min_duration and the fixed horizon its metrics need at
    today's traffic (daily_trials)."""
    from opsctl.errors import UsageError
    from opsctl.freeze import FreezeCalendar
    from opsctl.rollout.calendar import ab_horizons, schedule
    from opsctl.rollout.plan import load_plan

    cfg = app.config
    the_plan = load_plan(plan_file, backends=list(cfg.backends))
    problems = []
    for i, stage in enumerate(the_plan.stages):
        if stage.kind == "cost" and stage.cost.share / 100 < cfg.cost.min_traffic_share:
            problems.append(f"{plan_file}: stages[{i}].cost.share: {stage.cost.share}% is below "
                            f"cost.min_traffic_share ({cfg.cost.min_traffic_share:.0%})")
    if problems:
        from opsctl.errors import ConfigError

        raise ConfigError(f"{plan_file}: invalid rollout plan", problems=problems)
    at = start if start is not None else the_plan.start_at
    if at is None:
        raise UsageError(f"{plan_file}: the plan has no `start`: give --start TIME")
    durations, sizes = ab_horizons(the_plan)
    result = schedule(the_plan, FreezeCalendar(cfg.freezes), at, durations)
    data = result.to_dict()
    data["sample_sizes"] = [{"step": i + 1, "metric": name, **size.to_dict()}
                            for i, found in sorted(sizes.items()) for name, size in found]
    if html_out:
        from pathlib import Path

        from opsctl.rollout.timeline import html
        from opsctl.statefile import atomic_file

        with atomic_file(Path(html_out), mode=0o644) as fh:
            fh.write(html(result))

    def table(d):
        from opsctl.clock import format_duration

        rows = []
        for s in result.steps:
            note = f"moved after freeze {', '.join(s.moved_after)}" if s.moved_after else ""
            rows.append([s.index, s.stage, s.label, _local(s.start), _local(s.end), format_duration(s.seconds), note])
        lines = [render_table(["#", "STAGE", "STEP", "START (UTC)", "END (UTC)", "LASTS", "NOTE"], rows), ""]
        for f in result.freezes:
            lines.append(f"freeze {f.name}: {f.local(f.start)} until {f.local(f.end)}"
                         + (f" ({f.reason})" if f.reason else ""))
        for s in d["sample_sizes"]:
            lines.append(f"A/B {s['metric']}: {s['per_arm']} trials per arm ({s['days']:.1f} days at"
                         f" {s['daily_trials']}/day, {s['share']:.0%} share; {s['variance']})")
        lines.append(f"earliest completion: {_local(result.end)} UTC")
        if html_out:
            lines.append(f"timeline written to {html_out}")
        return "\n".join(lines)

    emit(data, output, table=table)


@rollout.command(name="sample-size")
@click.option("--baseline", type=float, required=True, help="Today's ratio of the metric (e.g. 0.32 accepted/shown).")
@click.option("--margin", type=float, required=True, help="Equivalence margin, absolute (0.01 = one point).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Level of each one-sided test.")
@click.option("--power", type=float, default=0.8, show_default=True, help="Chance to show equivalence if none.")
@click.option("--daily-trials", type=int, help="Trials a day today (both arms together).")
@click.option("--share", type=float, help="Fraction of trials in the new backend's arm (e.g. 0.1).")
@output_option
def sample_size(baseline, margin, alpha, power, daily_trials, share, output):
    """Trials per arm (and days at today's traffic) a fixed-horizon TOST needs for a margin."""
    from opsctl.quality.abtest import sample_size as size_of

    size = size_of(baseline, margin, alpha=alpha, power=power, daily_trials=daily_trials, share=share)

    def table(d):
        text = f"{d['per_arm']} trials per arm for ±{margin} at alpha {alpha}, power {power} ({d['variance']})"
        if d["days"] is not None:
            text += f"\n{d['days']:.1f} days at {daily_trials} trials/day with a {share:.0%} arm"
        return text

    emit(size.to_dict(), output, table=table)
