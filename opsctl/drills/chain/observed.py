"""What a chain drill observed, in the embedded drill's shape (`expectations.Observations`), read off
the components themselves: every firing alert Prometheus holds (all its labels and its `cause`
annotation), every incident the PagerDuty endpoint opened, every traffic entry of the audit log, every
ticket the desk holds. The scenario's expectations are then judged by the one `Judge` both worlds
share, on everything they name; what the chain cannot judge is listed as "not judged here"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from opsctl.drills.expectations import Judge, Observations, PageSeen, TicketSeen, Verdict, not_judged

if TYPE_CHECKING:
    from opsctl.drills.chain.collector import Collector
    from opsctl.drills.scenario import Expectation, Scenario

# What a local chain drill has no component for: no vendor answers its ticket, the SLOs' recovery is
# not waited for (the drill ends once the hops settled), the method's traffic changes and manual pages
# are not played (the chain's automation does them), and escalation needs a pager's policy.
CANNOT_JUDGE = {
    "vendor-responded": "the chain's ticket desk has no vendor who answers",
    "slo-recovered": "a chain drill ends once its hops settled, before the SLOs recover",
    "change-refused": "a chain drill does not play the method's traffic changes",
    "escalated": "the chain's PagerDuty endpoint has no escalation policy",
}


def observations(collector: Collector, t0: float | None, since: float | None,
                 title_of: Callable[[str], str | None] | None = None) -> Observations:
    """The chain's observations since the method began (`since`), from the collector's last poll.
    `title_of(dedup_key)`: the title serve's pager gave that incident, if any. The PagerDuty endpoint
    keeps the summary of Alertmanager's first trigger, as PagerDuty does; serve retitles the incident
    as it widens (paging/title.py, decisions/0252), through the pager the drill gives it (its local
    ledger), so that title is what on-call reads (decisions/0353)."""
    obs = Observations(t0=t0, method_done=True)
    obs.first_firing = dict(collector.firing_seen)
    incidents: list[dict] = []
    if collector.sink is not None:
        _, incidents = collector.sink.snapshot()
    incidents.sort(key=lambda i: i["created_at"])
    obs.pages = [PageSeen(i["dedup_key"], i["created_at"], i.get("summary")) for i in incidents]
    if incidents:
        first = incidents[0]
        retitled = title_of(first["dedup_key"]) if title_of is not None else None
        obs.paged_at, obs.page_title = first["created_at"], retitled or first.get("summary")
        acked = [i for i in incidents if i.get("acknowledged_at") is not None]
        if acked:
            obs.acknowledged_at, obs.acknowledged_by = acked[0]["acknowledged_at"], acked[0].get("acknowledged_by")
    if collector.audit is not None:
        entries = collector.audit.find(lambda e: e.get("kind") == "traffic" and not e.get("dry_run")
                                       and e.get("ts", 0) >= (since or 0))
        entries.sort(key=lambda e: e.get("ts", 0))
        obs.moves = [e for e in entries if e.get("outcome") == "applied"]
        obs.failovers = [e for e in obs.moves if e.get("action") == "failover"]
        obs.changes = [e for e in entries if e.get("action") == "set"]
    obs.tickets = [_ticket(t) for t in collector.ticket_records]
    return obs


def _ticket(t: dict) -> TicketSeen:
    return TicketSeen(vendor=t.get("vendor") or "", category=t.get("opsctl_category") or "",
                      asked_at=t.get("created_at") or 0.0, ticket_id=t.get("id"), filed_at=t.get("created_at"),
                      routed_value=t.get("category"), routed_category=t.get("routed_category"),
                      tags=tuple(dict.fromkeys([*(t.get("tags") or ()), *(["drill"] if t.get("drill") else [])])))


def judge(scenario: Scenario, obs: Observations, resolve_slo: Callable[[str], str], now: float) -> list[Verdict]:
    """Every scenario expectation judged on the chain's observations (the embedded drill's Judge)."""
    judge = Judge(resolve_slo)
    out = []
    for e in scenario.expectations:
        why = cannot_judge(e)
        if why:
            out.append(not_judged(e, why))
            continue
        verdict = judge.judge(e, obs, now, final=True)
        if verdict is not None:
            out.append(_window_seen(e, verdict, obs, now))
    return out


def _window_seen(e: Expectation, verdict: Verdict, obs: Observations, now: float) -> Verdict:
    """A no-flap that passed on less than its window after the last move off its backend is not
    judged here: the chain ends once its hops settled, so no move back in the minutes it watched says
    nothing of the rest of the window (a move back it saw fails, whatever the window)."""
    from opsctl.drills.expectations import moved_off
    from opsctl.drills.text import duration_text

    if e.expect != "no-flap" or not verdict.passed or e.backend is None:
        return verdict
    away = [m.get("ts", 0.0) for m in obs.moves if moved_off(m, e.backend)]
    if not away or now - max(away) >= e.window:
        return verdict
    return not_judged(e, f"the chain watched {duration_text(now - max(away))} of the {duration_text(e.window)}"
                         f" window after traffic moved off {e.backend} (no move back in that time)")


def flap_watch_until(scenario: Scenario, moves: list[dict]) -> float | None:
    """The instant until which the chain keeps watching the traffic so that every no-flap
    expectation is judged on its whole window (decisions/0356): the last move off its backend plus
    its window. None when nothing is left to watch: no move off yet, or a move back already seen
    within a window (the expectation has failed; watching longer cannot change it)."""
    from opsctl.drills.expectations import moved_off, moved_toward

    until: float | None = None
    for e in scenario.expectations:
        if e.expect != "no-flap" or e.backend is None:
            continue
        ordered = sorted(moves, key=lambda m: m.get("ts", 0.0))
        away = [m.get("ts", 0.0) for m in ordered if moved_off(m, e.backend)]
        if not away:
            continue
        back = [m.get("ts", 0.0) for m in ordered if moved_toward(m, e.backend)]
        if any(a < b <= a + e.window for a in away for b in back):
            continue
        until = max(until or 0.0, max(away) + e.window)
    return until


def cannot_judge(e: Expectation) -> str | None:
    return CANNOT_JUDGE.get(e.expect)
