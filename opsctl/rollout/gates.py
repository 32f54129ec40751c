"""Every gate measurable before the rollout starts: the one check `rollout plan`, `rollout start`
(with and without `--dry-run`), `rollout run` and serve's controller (before each step) make of a
plan against the config it runs under (docs/decisions/0501-gates-measurable-before-start.md).

A plan that passes `build_plan` has the right shapes; this asks whether each analysis can ever be
measured, so a rollout never learns at a step's end (weeks in) that its gate had no inputs:

    m2               args.gold and args.answers both given; each file exists beside the plan file
                     (never the working directory), the gold file parses as M2 and the answers hold
                     one line per gold sentence
    ab-equivalence   its stage declares metrics
    quality-rules    the config has quality rules
    cost             a cost stage's share is at least cost.min_traffic_share (below it the per-token
                     figure is no evidence)

Every problem at once, each `PLAN: stages[i].KIND.analysis[j].args.gold: ...` with the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from opsctl.errors import ConfigError

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.rollout.plan import RolloutPlan


def resolve(plan_dir: str | Path, value: str) -> Path:
    """A path an analysis names, resolved beside the plan file (an absolute path as it is)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(plan_dir) / path


def gate_problems(cfg: "Config", plan: "RolloutPlan", plan_dir: str | Path) -> list[str]:
    """What keeps a gate of `plan` from ever being measured, each with its key path and the fix."""
    from opsctl.errors import UsageError

    problems: list[str] = []
    slos = None  # read once, for a latency judge whose margin comes from its SLO
    for i, stage in enumerate(plan.stages):
        where = f"stages[{i}].{stage.kind}"
        body = stage.body
        if stage.kind == "cost":
            floor = cfg.cost.min_traffic_share
            if body.share / 100 < floor:
                problems.append(f"{where}.share: {body.share}% is below cost.min_traffic_share ({floor:.0%})")
        for j, a in enumerate(body.analysis):
            at = f"{where}.analysis[{j}]"
            if a.check == "m2":
                sentences = None
                for key in ("gold", "answers"):
                    value = getattr(a.args, key)
                    if not value:
                        what = ("the golden set, an M2 file" if key == "gold"
                                else "the new backend's corrections, one line per gold sentence")
                        problems.append(f"{at}.args.{key}: m2 needs it ({what}), a path beside the plan file")
                        continue
                    path = resolve(plan_dir, value)
                    if not path.is_file():
                        problems.append(f"{at}.args.{key}: {value}: no such file beside the plan ({path})")
                        continue
                    try:
                        if key == "gold":
                            from opsctl.quality.m2 import load_m2

                            sentences = load_m2(path)
                        elif sentences is not None:
                            lines = path.read_text(encoding="utf-8").splitlines()
                            if len(lines) != len(sentences):
                                problems.append(f"{at}.args.answers: {value}: {len(lines)} lines for"
                                                f" {len(sentences)} gold sentences: give one answer per sentence")
                    except (UsageError, OSError, UnicodeDecodeError) as exc:
                        problems.append(f"{at}.args.{key}: {getattr(exc, 'message', exc)}")
            elif a.check == "ab-equivalence" and not getattr(body, "metrics", None):
                problems.append(f"{at}: ab-equivalence needs {where}.metrics (successes and trials per arm)")
            elif a.check == "quality-rules" and not cfg.quality.rules.enabled:
                problems.append(f"{at}: quality-rules needs quality.rules.enabled in the config")
            elif a.check == "latency-judge" and a.args.margin is None:
                # the margin comes from the latency SLO with the judge's threshold (rollout.margins)
                from opsctl.rollout.margins import latency_margin
                from opsctl.slo.loading import load_slos

                slos = slos if slos is not None else load_slos([cfg.slo_dir], cfg.backends, config=cfg)
                try:
                    latency_margin(slos, plan.backend, a.args.threshold or 0.5)
                except UsageError as exc:
                    problems.append(f"{at}.args.margin: {exc.message}")
    return problems


def check_gates(cfg: "Config", plan: "RolloutPlan", plan_file: str | Path, plan_dir: str | Path | None = None) -> None:
    """ConfigError (exit 2) listing every gate of `plan` that cannot be measured; files resolve
    beside `plan_file` (or in `plan_dir`, the directory a started rollout recorded)."""
    directory = plan_dir if plan_dir is not None else Path(plan_file).resolve().parent
    problems = gate_problems(cfg, plan, directory)
    if problems:
        raise ConfigError(f"{plan_file}: invalid rollout plan",
                          problems=[f"{plan_file}: {p}" for p in problems])
