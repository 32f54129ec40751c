"""One consistency probe run, as `opsctl probe consistency` asks for it: the push target opened
before anything is sent, the golden set sent `repeat` times to each backend through clients that
are closed whatever happens, the report built (with the noise floor when repeated) and its gauges
pushed. The command parses its options, calls these and renders what they return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from opsctl.errors import UsageError

if TYPE_CHECKING:
    from opsctl.clock import WallClock
    from opsctl.config import Config
    from opsctl.quality.golden import GoldenCase
    from opsctl.quality.probe import Answer, ProbeReport
    from opsctl.quality.push.base import MetricsSink, Sample


def check_push_flags(*, push: bool, push_to: str | None, pushgateway_url: str | None, dry_run: bool) -> None:
    if (push_to or pushgateway_url or dry_run) and not push:
        raise UsageError("--push-to, --pushgateway-url and --dry-run go with --push")


@dataclass(frozen=True)
class Push:
    """Where the figures go: `target` is what the report names, `sink` what is written (nothing on a dry run)."""

    target: MetricsSink
    sink: MetricsSink
    dry_run: bool


def open_push(cfg: Config, *, push_to: str | None, pushgateway_url: str | None, dry_run: bool) -> Push:
    """The push target (--push-to, else a Pushgateway when its URL is given, else quality.push.target);
    a bad one fails here, before the probe sends anything."""
    from opsctl.quality.push.registry import open_sink

    target = open_sink(cfg, push_to or ("pushgateway" if pushgateway_url else None), url=pushgateway_url)
    return Push(target, open_sink(cfg, "none") if dry_run else target, dry_run)


def mixed_apis(cfg: Config, backends: Sequence[str]) -> str | None:
    """The warning for backends behind different APIs, or None when they share one."""
    if len({cfg.endpoints[n].api for n in backends}) <= 1:
        return None
    return ("warning: the backends use different APIs (" + ", ".join(f"{n}: {cfg.endpoints[n].api}" for n in backends)
            + "); the chat template changes answers and prompt-token counts on one side only")


@dataclass
class ConsistencyRun:
    report: ProbeReport
    pushed: list[Sample] | None = None  # None: not pushed
    push: Push | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        if self.push is not None and self.pushed is not None:
            data["pushed"] = {"target": self.push.target.description, "samples": len(self.pushed),
                              "dry_run": self.push.dry_run}
        return data


def run_consistency(cfg: Config, cases: Sequence[GoldenCase], backends: Sequence[str], *, repeat: int = 1,
                    push: Push | None = None, clock: WallClock | None = None) -> ConsistencyRun:
    """Probe every backend `repeat` times, judge the answers and push the gauges (when `push`)."""
    from opsctl.clock import WallClock
    from opsctl.quality.endpoints import open_clients
    from opsctl.quality.probe import analyze, apply_repeats, run_probe, samples

    clock = clock or WallClock()
    settings = cfg.quality.probe
    clients = open_clients(cfg, backends, clock=clock)
    runs: dict[str, list[list[Answer]]] = {name: [] for name in backends}
    try:
        for _ in range(repeat):
            answers = run_probe(cases, clients, deadline_seconds=settings.deadline, concurrency=settings.concurrency,
                                clock=clock)
            for name, got in answers.items():
                runs[name].append(got)
    finally:
        for client in clients.values():
            client.close()
    report = analyze(cases, {name: got[0] for name, got in runs.items()}, settings)
    if repeat > 1:
        apply_repeats(report, cases, runs, settings)
    run = ConsistencyRun(report)
    if push is not None:
        run.pushed = samples(report, service=cfg.service, at=clock.now(),
                             between_threshold=settings.min_exact_match_between)
        push.sink.push(run.pushed, clock.now())
        run.push = push
    return run
