"""`opsctl rollout`: the migration as one plan, on the freeze calendar; run by serve's leader or in simulated time."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option
from opsctl.cli.rollout_render import ab_table, plan_table, run_table, state_text
from opsctl.cli.params import TIME
from opsctl.cli.source_options import source_options


@click.group()
def rollout():
    """Rollout plans (rollouts/*.yaml): shadow, A/B, ramp and cost stages between the freezes.

    \b
    Examples:
      opsctl rollout plan rollouts/vendor-migration.yaml
      opsctl rollout plan rollouts/vendor-migration.yaml --start 2026-11-02T09:00:00-05:00 -o json
      opsctl rollout plan rollouts/vendor-migration.yaml --html timeline.html
      opsctl rollout sample-size --baseline 0.32 --margin 0.01 --daily-trials 400000 --share 0.1
      opsctl rollout start rollouts/vendor-migration.yaml      # the leader of `opsctl serve` drives it
      opsctl rollout status
      opsctl rollout pause --reason "look first"             # resume | promote | abort
      opsctl rollout run rollouts/migration-drill.yaml --journey chaos/migration/journey.yaml --run completes
    """


@rollout.command()
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--start", type=TIME, help="When the rollout starts: RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m"
                                                   " (default: the plan's `start`).")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Also write an HTML/SVG timeline here.")
@output_option
@click.pass_obj
def plan(app, plan_file, start, html_out, output):
    """Each step's start and end around the freezes, and the earliest completion.

    A step never starts inside a freeze and never runs into one: it is moved after the freeze.
    An A/B step lasts the longer of its min_duration and the fixed horizon its metrics need at
    today's traffic (daily_trials)."""
    from opsctl.freeze import FreezeCalendar
    from opsctl.rollout.calendar import plan_rollout
    from opsctl.rollout.gates import check_gates
    from opsctl.rollout.plan import load_plan

    cfg = app.config
    the_plan = load_plan(plan_file, backends=list(cfg.backends))
    check_gates(cfg, the_plan, plan_file)  # every gate measurable: as start, run and serve check it
    planned = plan_rollout(the_plan, FreezeCalendar(cfg.freezes), start, plan_file)
    if html_out:
        from pathlib import Path

        from opsctl.rollout.timeline import html
        from opsctl.statefile import atomic_file

        with atomic_file(Path(html_out), mode=0o644) as fh:
            fh.write(html(planned.schedule))

    emit(planned.to_dict(), output, table=lambda _: plan_table(planned, html_out))


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


@rollout.command()
@click.argument("gold", type=click.Path(dir_okay=False))
@click.argument("answers", type=click.Path(dir_okay=False))
@click.option("--tokenized", is_flag=True, help="ANSWERS are already tokenized as GOLD: split on whitespace only.")
@output_option
def m2(gold, answers, tokenized, output):
    """M2 precision, recall and F0.5 of a backend's corrections (ANSWERS: one corrected sentence per
    line, in the order of GOLD's sentences) against GOLD's edits in M2 format, counted as the M2
    scorer counts them (edits spanning up to 2 unchanged words). Answers are tokenized as the gold
    source (Treebank style: "day." -> "day ."), unless --tokenized.

    \b
    Example:
      opsctl rollout m2 golden.m2 databricks-answers.txt -o json
    """
    from pathlib import Path

    from opsctl.errors import UsageError
    from opsctl.quality.m2 import load_m2, score

    sentences = load_m2(gold)
    try:
        lines = Path(answers).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{answers}: cannot read the answers: {exc}") from exc
    result = score(sentences, lines, tokenized=tokenized)
    emit(result.to_dict(), output, table=lambda d: (
        f"precision {d['precision']:.4f}  recall {d['recall']:.4f}  F0.5 {d['f05']:.4f}"
        f"  ({d['tp']} true positives, {d['fp']} false positives, {d['fn']} missed)"))


@rollout.command()
@click.option("--baseline", required=True, metavar="NAME", help="The backend compared against (e.g. internal).")
@click.option("--candidate", required=True, metavar="NAME", help="The backend judged (e.g. databricks).")
@click.option("--window", default="1h", show_default=True, metavar="DUR", help="Histogram window.")
@click.option("--threshold", type=float, default=0.5, show_default=True,
              help="Seconds: the judge compares the share of requests slower than this (a bucket bound).")
@click.option("--margin", type=float, default=None,
              help="Equivalence margin on that share (0.01 = one point). Default: a tenth of the error budget"
                   " of the latency SLO with this threshold (0.0001 for a 99.9% SLO).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Level of each one-sided test.")
@source_options
@output_option
@click.pass_obj
def latency(app, baseline, candidate, window, threshold, margin, alpha, prometheus_url, source_kind, at, output):
    """Latency judge: is the candidate's share of slow requests within the margin of the baseline's?

    Exit 0 equivalent (or better), 1 worse beyond the margin, 3 inconclusive (too few requests).

    \b
    Example:
      opsctl rollout latency --baseline internal --candidate databricks --window 2h --threshold 1
    """
    from opsctl.cli.source_options import open_checked_source, parse_window
    from opsctl.errors import NoDataError, OpsctlError
    from opsctl.quality.latency_judge import judge, read_histogram, share_over
    from opsctl.rollout.margins import latency_margin

    cfg = app.config
    cfg.backend(baseline)
    cfg.backend(candidate)
    seconds = parse_window(window)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    scope = cfg.service_matcher  # two services' histograms never sum
    a, b = (read_histogram(source, name, seconds, when, scope) for name in (baseline, candidate))
    share_over(a, threshold)  # a threshold that is no bucket bound is refused before any margin is sought
    drawn = latency_margin(_slos_of(cfg) if margin is None else [], candidate, threshold, margin)
    result = judge(a, b, threshold=threshold, margin=drawn.value, alpha=alpha)
    emit({**result.to_dict(), **drawn.to_dict()}, output, table=lambda d: (
        f"{d['verdict']} ({d['outcome']}): over {threshold:g}s {candidate} {d['share_b']:.3%} vs {baseline}"
        f" {d['share_a']:.3%}, difference {d['difference'] * 100:+.3f} points (margin {drawn.describe()},"
        f" se {d['standard_error'] * 100:.3f}; {d['n_b']} vs {d['n_a']} requests)"))
    if result.verdict == "worse":
        raise OpsctlError(f"{candidate} is slower than {baseline} beyond the margin")
    if result.verdict == "inconclusive":
        raise NoDataError("inconclusive: too few requests to tell; wait for more (pause)")


def _slos_of(cfg):
    """The service's SLOs (the latency judge's margin is drawn from the one with its threshold)."""
    from opsctl.slo.loading import load_slos

    return load_slos([cfg.slo_dir], cfg.backends, config=cfg)


@rollout.command()
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--window", metavar="DUR", help="Counter window (default: the A/B stage's min_duration).")
@source_options
@output_option
@click.pass_obj
def ab(app, plan_file, window, prometheus_url, source_kind, at, output):
    """The plan's A/B metrics read from the counters, judged once at the fixed horizon.

    Each metric's `successes` and `trials` PromQL is evaluated per arm (`$arm` = the plan's baseline
    and backend, `$window`, written in seconds on the embedded store, which also holds the counters
    `rollout run` writes), as the rollout's ab-equivalence analysis reads them; the horizon is the
    TOST sample size for the metric's margin (binomial variance). Before it is reached the verdict is inconclusive whatever the figures (no peeking).
    Exit 0 equivalent, 1 different, 3 inconclusive or not yet at the horizon.

    \b
    Example:
      opsctl rollout ab rollouts/vendor-migration.yaml --prometheus-url http://prometheus:9090
    """
    from opsctl.cli.source_options import open_checked_source
    from opsctl.errors import NoDataError, OpsctlError
    from opsctl.rollout.ab_check import ab_stage, check_ab
    from opsctl.rollout.plan import load_plan

    cfg = app.config
    the_plan = load_plan(plan_file, backends=list(cfg.backends))
    stage = ab_stage(the_plan, plan_file)
    source, when = open_checked_source(cfg, source_kind, prometheus_url, at)
    check = check_ab(the_plan, stage, source, when, window)

    emit(check.to_list(), output, table=lambda _: ab_table(check))
    if "different" in check.verdicts:
        raise OpsctlError("an A/B metric differs beyond its margin")
    if "inconclusive" in check.verdicts:
        raise NoDataError("an A/B metric is inconclusive (horizon not reached, or the interval crosses the margin)")


# -- the rollout run by the cluster (opsctl serve, leader only), steered from any laptop ---------------


def _store(app):
    from opsctl.rollout.document import RolloutStore
    from opsctl.state import open_state_store

    return RolloutStore(open_state_store(app.config))  # a person's writes: compare-and-swap, no term


def _actor() -> str:
    from opsctl.audit import current_actor

    return current_actor()


@rollout.command()
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Validate and show where it would start; write nothing.")
@click.option("--yes", is_flag=True, help="Accepted for the CLI conventions (starting only records the plan).")
@output_option
@click.pass_obj
def start(app, plan_file, dry_run, yes, output):
    """Record a rollout of PLAN_FILE in the shared state; the leader of `opsctl serve` drives it.

    It starts from the current split (abort returns there). One rollout per service at a time."""
    from pathlib import Path

    from opsctl.config.loading import parse_yaml, read_text
    from opsctl.rollout.document import start_rollout
    from opsctl.rollout.steps import starting_point
    from opsctl.rollout.plan import build_plan
    from opsctl.clock import wall_now

    cfg = app.config
    data = parse_yaml(read_text(Path(plan_file), "rollout plan"), Path(plan_file))
    the_plan = build_plan(data, plan_file, backends=list(cfg.backends))
    from opsctl.rollout.steps import plan_steps
    from opsctl.rollout.simrun import refuse_unmirrored

    refuse_unmirrored(cfg, plan_steps(the_plan))  # a gate that cannot mirror and no shadow object: exit 2
    from opsctl.rollout.gates import check_gates

    check_gates(cfg, the_plan, plan_file)  # every gate measurable (files beside the plan): exit 2
    from opsctl.freeze import FreezeCalendar
    from opsctl.rollout.calendar import check_complete_by, schedule, step_seconds

    # started now, the plan must still meet its complete_by (exit 4 with the gap), as `rollout plan` says
    check_complete_by(the_plan, schedule(the_plan, FreezeCalendar(cfg.freezes), wall_now(), step_seconds(the_plan)[0]),
                      plan_file)
    current, mirror, objects = starting_point(cfg)  # reads only; with traffic.shadow_actuator, both objects
    if current is None:
        from opsctl.errors import NoDataError

        raise NoDataError("the split is unknown: set it first (`opsctl traffic set ...`)")
    if dry_run:
        emit({"plan": the_plan.name, "from": current.to_dict(list(cfg.backends)), "dry_run": True}, output,
             table=lambda d: f"would start rollout {d['plan']} from {current.describe(list(cfg.backends))}")
        return
    state = start_rollout(_store(app), data, the_plan, by=_actor(), at=wall_now(), current=current,
                          order=list(cfg.backends), mirror=mirror, objects=objects,
                          plan_dir=str(Path(plan_file).resolve().parent))
    emit(state.to_dict(), output, table=state_text)


@rollout.command()
@output_option
@click.pass_obj
def status(app, output):
    """The rollout's state: status, step, phase, term, its last events and pending intents."""
    from opsctl.errors import NoDataError

    state = _store(app).read()
    if state is None:
        raise NoDataError("no rollout recorded", hint="start one with `opsctl rollout start PLAN`")
    emit(state.to_dict(), output, table=state_text)


def _intent_command(action: str, doc: str):
    @rollout.command(name=action, help=doc)
    @click.option("--reason", default="", help="Why (recorded with the intent).")
    @click.option("--dry-run", is_flag=True, help="Show the intent; write nothing.")
    @click.option("--yes", is_flag=True, help="Accepted for the CLI conventions.")
    @output_option
    @click.pass_obj
    def command(app, reason, dry_run, yes, output):
        from opsctl.clock import wall_now
        from opsctl.rollout.document import new_intent

        if dry_run:
            emit({"action": action, "reason": reason, "dry_run": True}, output,
                 table=lambda d: f"would ask the rollout's controller to {action}")
            return
        intent = new_intent(_store(app), action, by=_actor(), at=wall_now(), reason=reason)
        from opsctl.model.build import to_dict

        emit(to_dict(intent), output,
             table=lambda d: f"{action} recorded ({intent.id}); the leader applies it at its next tick")

    return command


_intent_command("pause", "Pause the rollout at its current step (the leader applies it at its next tick).")
_intent_command("resume", "Resume a paused rollout (an inconclusive step is measured again from now).")
_intent_command("promote", "Skip the rest of the current step's analyses and go to the next step.")
_intent_command("abort", "Abort: back to the split the rollout started from, recorded.")


@rollout.command(name="run")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--start", type=TIME, help="When the rollout starts: RFC 3339 with a zone, or now, now-7d, -7d, now-1h30m"
                                                   " (default: the journey's, else the plan's `start`).")
@click.option("--journey", "journey_file", type=click.Path(dir_okay=False),
              help="A journey (chaos/migration/*.yaml): its start, scale and the incidents of --run.")
@click.option("--run", "run_name", help="The journey's run to play (its incidents and expected end).")
@click.option("--out-dir", type=click.Path(file_okay=False), help="The run's state dir (default: a new temporary one).")
@output_option
@click.pass_obj
def run_cmd(app, plan_file, start, journey_file, run_name, out_dir, output):
    """Drive the rollout controller in simulated time on the embedded store (nothing real moves).

    Each measurement reads simulated metrics: the proxy's counters drawn for the window before it
    with the split the rollout has then and the journey's incidents, drawn at the simulated instants
    into the run's own store (every guard reads it there; the output's `data` says so). Exit 1 when
    a --run ends otherwise than its journey expects.

    Example: opsctl rollout run rollouts/summarize-migration.yaml --out-dir /tmp/rehearsal"""
    from pathlib import Path

    from opsctl.config.loading import parse_yaml, read_text
    from opsctl.errors import OpsctlError, UsageError
    from opsctl.rollout.journey import load_journey, play
    from opsctl.rollout.plan import build_plan

    cfg = app.config
    data = parse_yaml(read_text(Path(plan_file), "rollout plan"), Path(plan_file))
    the_plan = build_plan(data, plan_file, backends=list(cfg.backends))
    journey = load_journey(Path(journey_file)) if journey_file else None
    if run_name and journey is None:
        raise UsageError("--run needs --journey FILE")
    played = play(cfg, data, the_plan, plan_file=plan_file, start=start, journey=journey, run_name=run_name,
                  out_dir=out_dir)
    emit(played.to_dict(), output, table=lambda _: run_table(played))
    if played.problems:
        raise OpsctlError(f"run {run_name}: " + "; ".join(played.problems))
