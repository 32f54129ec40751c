"""`opsctl rollout run --journey`: a journey (chaos/migration/*.yaml) plays a rollout plan in simulated
time several ways, each run with its incidents and the end it expects. `play` resolves the run's
start and incidents, drives `simrun.run` and checks the end against the journey's expectation, as a
typed `Played` (the CLI parses, calls `play` and renders; exit 1 when a run ends otherwise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opsctl.errors import UsageError
from opsctl.model import Model, field
from opsctl.rollout.simrun import RunResult, SimIncident


class JourneyRun(Model):
    name: str
    expect: str  # completed | aborted
    incidents: list[SimIncident] = field(default_factory=list)
    abort_step: int | None = None  # the step an aborted run must stop at
    abort_check: str | None = None  # the analysis that must abort it
    description: str = ""

    def __post_init__(self) -> None:
        if self.expect not in ("completed", "aborted"):
            raise ValueError("expect must be completed or aborted")


class Journey(Model):
    """chaos/migration/*.yaml: a rollout plan run in simulated time, several ways."""

    version: int
    title: str
    plan: str  # the plan file, relative to the journey file
    runs: list[JourneyRun]
    start: str | None = None  # default: the plan's
    peak_rps: float = 150.0
    seed: int = 0
    description: str = ""

    def run_named(self, name: str) -> JourneyRun:
        for r in self.runs:
            if r.name == name:
                return r
        raise UsageError(f"no run {name!r} in the journey (runs: {', '.join(r.name for r in self.runs)})")


def load_journey(path: Path) -> Journey:
    from opsctl.config.loading import parse_yaml, read_text
    from opsctl.model import build

    return build(Journey, parse_yaml(read_text(path, "migration journey"), path), str(path))


class Played(Model):
    """A simulated run, with the journey's run it plays and how its end differs from what that run
    expects (`problems`, empty when it ends as expected or when no run was named)."""

    result: RunResult
    state_dir: str
    expected: JourneyRun | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from opsctl.model.build import to_dict

        out: dict[str, Any] = to_dict(self.result)
        out["state_dir"] = self.state_dir
        if self.expected is not None:
            out["expected"] = to_dict(self.expected)
            out["as_expected"] = not self.problems
        return out


def problems_of(result: RunResult, expected: JourneyRun) -> list[str]:
    """How a run's end differs from what the journey's run expects: its status, the step an abort
    stops at, and the analysis that aborts it (the abort's detail starts with the check's name)."""
    problems = []
    aborted = next((e for e in result.history if e["what"] == "aborted"), None)
    if result.status != expected.expect:
        problems.append(f"ended {result.status}, the journey expects {expected.expect}")
    if expected.abort_step is not None and result.step != expected.abort_step:
        problems.append(f"stopped at step {result.step}, the journey expects step {expected.abort_step}")
    if expected.abort_check and (aborted is None or not aborted["detail"].startswith(expected.abort_check)):
        problems.append(f"not aborted by {expected.abort_check}")
    return problems


def play(cfg: Any, plan_data: dict[str, Any], plan: Any, *, plan_file: str, start: float | None,
         journey: Journey | None, run_name: str | None, out_dir: str | None) -> Played:
    """The rollout of `plan` in simulated time: from `start`, else the journey's, else the plan's
    (UsageError when none is known); with the named run's incidents (UsageError for a run the
    journey lacks), the journey's traffic and seed; in `out_dir` or a new temporary directory."""
    import tempfile

    from opsctl.clock import parse_rfc3339
    from opsctl.rollout import simrun

    expected = journey.run_named(run_name) if journey is not None and run_name else None
    at = start if start is not None else (parse_rfc3339(journey.start, require_zone=True) if journey and journey.start
                                          else plan.start_at)
    if at is None:
        raise UsageError(f"{plan_file}: the plan has no `start`: give --start TIME")
    root = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="opsctl-rollout-run-"))
    result = simrun.run(cfg, plan_data, plan, start=at, root=root, plan_dir=str(Path(plan_file).resolve().parent),
                        incidents=list(expected.incidents) if expected else [],
                        peak_rps=journey.peak_rps if journey else 150.0, seed=journey.seed if journey else 0,
                        progress=None)
    problems = problems_of(result, expected) if expected is not None else []
    return Played(result, str(root), expected, problems)
