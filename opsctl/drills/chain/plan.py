"""`opsctl drill run --chain --dry-run` (with or without --live): every step the drill would take.

Read-only: the preflight checks are queries (is a real incident open, an alert firing, each
component answering); nothing is started, injected, paged or filed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsctl.drills.plan import Plan
from opsctl.drills.report import duration_text
from opsctl.drills.safety import Check, check_real_alerts, check_real_incidents
from opsctl.drills.scenario import default_backend
from opsctl.drills.text import params_text

if TYPE_CHECKING:
    from opsctl.config import Config
    from opsctl.drills.scenario import Scenario


class ChainPlan(Plan):
    """`drill run --chain --dry-run` (mode chain or live-chain): what the drill sets up, each step,
    each hop it watches, its verdict and rollbacks, as sentences."""

    setup: tuple[str, ...]
    method: tuple[str, ...]
    hops: tuple[str, ...]
    verdict: str
    rollbacks: tuple[str, ...]
    expectations: tuple[str, ...] = ()  # each judged, or "not judged here" and why (chain/fit.py)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "file": self.file, "mode": self.mode, "dry_run": True,
            "preflight": [c.to_dict() for c in self.preflight], "would_refuse": self.would_refuse,
            "setup": list(self.setup), "method": list(self.method), "hops": list(self.hops),
            "verdict": self.verdict, "rollbacks": list(self.rollbacks), "expectations": list(self.expectations),
        }

    def text(self) -> str:
        lines = [f"dry run of {self.file} ({self.mode}): {self.scenario}", "preflight:"]
        lines += [f"  {'ok' if c.ok else 'REFUSED'}  {c.name}: {c.message}" for c in self.preflight]
        for section in ("setup", "method", "hops", "expectations", "rollbacks"):
            lines.append(section + ":")
            items: tuple[str, ...] = getattr(self, section)
            lines += [f"  - {item}" for item in items] or ["  - none"]
        lines.append(f"verdict: {self.verdict}")
        lines.append("nothing was started or changed")
        return "\n".join(lines)


def reachable(name: str, url: str | None, path: str) -> Check:
    import urllib.error

    from opsctl.drills.chain.components import http_get

    if not url:
        return Check(f"{name} answers", False, f"no URL configured for {name}")
    try:
        http_get(url.rstrip("/") + path, timeout=5)
    except urllib.error.HTTPError as exc:
        return Check(f"{name} answers", False, f"{url}{path} answered HTTP {exc.code}")
    except OSError as exc:
        return Check(f"{name} answers", False, f"{url}{path}: {getattr(exc, 'reason', exc)}")
    return Check(f"{name} answers", True, f"{url}{path} ok")


def live_checks(cfg: Config) -> list[Check]:
    from opsctl.drills.cleanup import interrupted_runs
    from opsctl.drills.plan import interrupted_check

    live = cfg.drills.live
    return [check_real_incidents(cfg), check_real_alerts(cfg, strict=True),
            interrupted_check(interrupted_runs(cfg)),
            reachable("Prometheus", cfg.metrics.prometheus.url, "/-/ready"),
            reachable("Alertmanager (drills.live.alertmanager_url)", live.alertmanager_url, "/-/ready"),
            reachable("opsctl serve (drills.live.serve_url)", live.serve_url, "/readyz")]


def local_checks() -> list[Check]:
    from opsctl.drills.chain.binaries import BINARIES, MissingBinary, find_binary

    out = []
    for name in BINARIES:
        try:
            out.append(Check(f"{name} on PATH", True, find_binary(name)))
        except MissingBinary as exc:
            out.append(Check(f"{name} on PATH", False, exc.message))
    return out


def chain_plan(scenario: Scenario, cfg: Config, *, live: bool, routing: Path, timeout: int | None,
               generated: bool = False) -> ChainPlan:
    from opsctl.drills.chain.faults import broken_hop
    from opsctl.drills.chain.fit import chain_problems, judged_here
    from opsctl.drills.chain.progress import ACK_CAP, DEFAULT_HISTORY, PAUSE_CAP
    from opsctl.drills.chain.setup import AM_GROUP_WAIT, DRILL_EVALUATION, SCRAPE_INTERVAL

    from opsctl.drills.scenario import check_against_config
    from opsctl.slo.loading import load_slos

    problems = check_against_config(scenario, cfg, [s.name for s in load_slos([cfg.slo_dir], cfg.backends, config=cfg)], live=live)
    fits = Check("the scenario fits the config" + (" and a live drill" if live else ""), not problems,
                 "; ".join(problems) or "ok")
    unfit = chain_problems(scenario, cfg, history=DEFAULT_HISTORY) if not live else (
        [] if scenario.faults else [f"{scenario.path}: a chain drill needs a fault"])
    runs = Check("the scenario runs as a chain drill", not unfit, "; ".join(unfit) or "ok")
    checks = [fits, runs] + (live_checks(cfg) if live else local_checks() + [
        Check("routing file", True, f"{routing}: generated from the config's automation.policies (opsctl slo routes)")
        if generated else
        Check("routing file", routing.is_file(), str(routing) if routing.is_file() else f"{routing}: not found")])
    setup, steps = [], []
    if live:
        setup += [f"use Prometheus {cfg.metrics.prometheus.url} (its burn-rate rules as deployed)",
                  f"use Alertmanager {cfg.drills.live.alertmanager_url} (its routing as deployed)",
                  f"use opsctl serve {cfg.drills.live.serve_url} (its policies as deployed)",
                  f"the real {cfg.paging.provider} pager and {cfg.tickets.provider} ticket channel; the"
                  f" {cfg.traffic.actuator} actuator"]
    else:
        setup += ["write the drill's config under <state_dir>/drills/<run-id>/ (state, split, pager, audit log there)",
                  "`opsctl slo rules` -> rules.yaml; `promtool check rules`",
                  f"simulate {DEFAULT_HISTORY // 3600}h of baseline and backfill it with promtool tsdb"
                  " create-blocks-from openmetrics",
                  f"start the exporter (127.0.0.1, scraped every {SCRAPE_INTERVAL}s), the PagerDuty Events API v2"
                  " endpoint and the ticket-queue bridge on loopback",
                  f"start Alertmanager with the routing of {routing} (receivers pointed at the drill, group_wait"
                  f" at most {AM_GROUP_WAIT}s), Prometheus (rules every {DRILL_EVALUATION}s, `for:` scaled)"
                  " and opsctl serve with the configured policies",
                  "wait until Prometheus scrapes the exporter and no page-level alert is pending or firing"]
    faulted = False  # the pauses before the first fault are capped, the later ones kept (decisions/0350)
    for i, step in enumerate(scenario.method):
        pause = min(step.pause_before, PAUSE_CAP) if not (live or faulted) else step.pause_before
        faulted = faulted or step.fault is not None
        when = f" after {duration_text(pause)}" if pause else ""
        if step.fault is None:
            steps.append(f"method[{i}]{when}: {step.action} {step.name} ("
                         + ("wait" if step.action == "wait" else "not run: the chain does it") + ")")
            continue
        f = step.fault
        backend = f.backend or default_backend(f.kind, cfg)
        where = ("the exporter's simulated traffic" if not live else
                 (f"{f.live.namespace}/{getattr(f.live, 'virtual_service', None) or getattr(f.live, 'deployment', '')}"
                  if f.live else "(no live target)"))
        steps.append(f"method[{i}]{when}: switch on {f.kind} on {backend} ({params_text(f.params)}) in {where}:"
                     f" breaks {broken_hop(f.kind)}")
    ack = scenario.on_call.acknowledge_after
    hops = ["Prometheus: the burn-rate rule pending, then firing (alerts and rules API)",
            "Alertmanager: the alert received, notifications to PagerDuty and the webhook (API v2, /metrics)",
            "PagerDuty: an incident from an Events API v2 trigger",
            (f"on-call acknowledges {duration_text(min(ack, ACK_CAP))} after the page" if ack is not None and not live
             else "on-call acknowledges (watched on the pager)"),
            "opsctl serve: the delivery accepted, the policy's actions (its /metrics" + (")" if live else " and log)"),
            "the traffic controller: the failover applied (audit log, the split)",
            "the ticket channel: the vendor ticket and its category"]
    return ChainPlan(
        scenario=scenario.title, file=scenario.path, mode="live-chain" if live else "chain", preflight=tuple(checks),
        setup=tuple(setup), method=tuple(steps), hops=tuple(hops), expectations=tuple(judged_here(scenario)),
        verdict=("every required hop within " + (duration_text(timeout) if timeout is not None else
                 "the predicted page time + a 3m margin") + " of the fault, else the drill fails naming"
                " the first broken hop and its last evidence"),
        rollbacks=("switch the faults off", "resolve the drill's incidents" if not live else
                   "the alert resolves once the fault is off (serve restores traffic after its hold-down)",
                   "stop every process the drill started" if not live else "report what is left for a human"),
    )
