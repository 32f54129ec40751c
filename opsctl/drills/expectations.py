"""Expectations judged from what the drill observed: a pure function of the observations.

The observations come from the systems themselves, not from the engine's intentions: the incident
as the pager reports it (created, acknowledged, escalated), failovers as the audit log recorded
them, tickets as the ticket channel reads them back, alerts and burn rates as evaluated over the
metric source. Every deadline counts from t0, the first injected fault (or the method's start).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsctl.drills.scenario import Expectation
from opsctl.drills.text import burn_over_threshold, duration_text, rate_text


@dataclass
class TicketSeen:
    vendor: str
    category: str  # opsctl's category asked for
    asked_at: float
    ticket_id: str | None = None
    filed_at: float | None = None
    routed_value: str | None = None  # the vendor's category value it was filed in
    routed_category: str | None = None  # that value in opsctl's name
    status_category: str | None = None  # where the vendor has it now (opsctl name; None: unmapped)
    status_value: str | None = None
    first_response_at: float | None = None
    tags: tuple[str, ...] = ()
    error: str | None = None


@dataclass
class PageSeen:
    """One PagerDuty incident as the pager (or the chain's PagerDuty endpoint) has it."""

    dedup_key: str
    at: float
    title: str | None = None


@dataclass
class Observations:
    t0: float | None = None
    method_done: bool = False
    first_firing: dict[tuple[str, str, str], tuple[float, Any]] = field(default_factory=dict)  # (slo, sev, pair)
    paged_at: float | None = None  # the incident's creation, as the pager has it
    page_title: str | None = None  # the incident's title, as the pager has it
    page_error: str | None = None
    acknowledged_at: float | None = None
    acknowledged_by: str | None = None
    escalated_at: float | None = None
    failovers: list[dict] = field(default_factory=list)  # applied failover audit entries
    moves: list[dict] = field(default_factory=list)  # every applied traffic change's audit entry, in time order
    pages: list[PageSeen] = field(default_factory=list)  # every incident opened (distinct dedup keys)
    failover_errors: list[tuple[float, str]] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)  # drill `set` audit entries (applied or refused)
    tickets: list[TicketSeen] = field(default_factory=list)
    automation: list[dict] = field(default_factory=list)  # what the policy engine did: at, policy, action, status, detail
    unmatched: list[tuple[float, str]] = field(default_factory=list)  # alerts delivered that no policy matched
    engine: dict | None = None  # the policy engine's shape (automation/engine_factory.py), once built
    # action (failover, ticket) -> why it can no longer happen: a delivery no policy matched, and no
    # page or ticket rule of the faulted backend reaches a policy taking it, nor a hand action
    cannot_happen: dict[str, str] = field(default_factory=dict)
    burning_since: dict[str, float] = field(default_factory=dict)  # slo -> first tick it burned
    recovered_at: dict[str, float] = field(default_factory=dict)
    window_burn: dict[tuple[str, int], float | None] = field(default_factory=dict)  # (slo, window) -> now


@dataclass
class Verdict:
    name: str
    expect: str
    passed: bool
    within: int | None
    at: float | None  # when it was met (None: never)
    seconds: float | None  # at - t0
    detail: str  # what was observed
    reason: str = ""  # why it failed, or why it was not evaluated
    evaluated: bool = True  # False: the drill stopped before this could be decided (neither pass nor fail)

    @property
    def result(self) -> str:
        if self.passed:
            return "pass"
        if self.evaluated:
            return "fail"
        return NOT_JUDGED if self.reason.startswith(NOT_JUDGED) else NOT_EVALUATED

    @property
    def mark(self) -> str:
        return {"pass": "PASS", "fail": "FAIL"}.get(self.result, self.result)

    def to_dict(self, fmt) -> dict:
        return {"name": self.name, "expect": self.expect, "passed": self.passed,
                "result": self.result,
                "within_seconds": self.within, "at": fmt(self.at) if self.at is not None else None,
                "seconds": self.seconds, "detail": self.detail, "reason": self.reason}


NOT_EVALUATED = "not evaluated"
NOT_JUDGED = "not judged here"
# Counts and absences: wrong as soon as exceeded, met only when the deadline (or the drill's end) comes.
SETTLED_AT_END = ("pages", "tickets", "no-ticket", "no-flap")


def not_judged(e: Expectation, why: str) -> Verdict:
    """An expectation a world cannot judge on everything it names: listed, neither passed nor failed."""
    return Verdict(e.name, e.expect, False, e.within, None, None, "", f"{NOT_JUDGED}: {why}", evaluated=False)


def weights(entry: dict, side: str) -> dict:
    return (entry.get(side) or {}).get("weights", {}) or {}


def moved_off(entry: dict, backend: str) -> bool:
    return weights(entry, "before").get(backend, 0) > weights(entry, "after").get(backend, 0)


def moved_toward(entry: dict, backend: str) -> bool:
    return weights(entry, "before").get(backend, 0) < weights(entry, "after").get(backend, 0)


def first_detection(obs: Observations, backend: str | None) -> float | None:
    """When the first page-level alert on `backend` (or any, for None) fired since t0."""
    times = [at for (_, sev, _), (at, a) in obs.first_firing.items()
             if sev == "page" and obs.t0 is not None and at >= obs.t0
             and (backend is None or getattr(a, "backend", None) in (backend, None))]
    return min(times, default=None)


def title_problem(title: str | None, e: Expectation) -> str | None:
    """What is wrong with a page's title for a `paged` expectation's `mentions` and `not-mentions`
    (None: nothing). The embedded and the chain drill judge the title the same way."""
    text = (title or "").lower()
    missing = [w for w in e.mentions if w.lower() not in text]
    wrong = [w for w in e.excludes if w.lower() in text]
    if not (missing or wrong):
        return None
    return "; ".join(([f"the page does not name {', '.join(missing)}"] if missing else [])
                     + ([f"the page names {', '.join(wrong)}"] if wrong else []))


def _automation_said(obs: Observations) -> str:
    """Why the automation did nothing, when an alert reached it that no policy matched."""
    if obs.unmatched and not obs.automation:
        return f" (automation: no policy matched {obs.unmatched[0][1]})"
    return ""


class Judge:
    def __init__(self, resolve_slo):
        self.resolve_slo = resolve_slo  # scenario SLO name -> full name

    def judge(self, e: Expectation, obs: Observations, now: float, *, final: bool) -> Verdict | None:
        """A verdict, or None while it may still be met."""
        if obs.t0 is None:
            return self._fail(e, obs, "the method never started") if final else None
        deadline = obs.t0 + e.within if e.within is not None else None
        method = getattr(self, "_" + e.expect.replace("-", "_"))
        at, detail, problem = method(e, obs)
        if problem:  # observed, and wrong: fails at once
            return self._fail(e, obs, problem, detail=detail, at=at)
        if e.expect in SETTLED_AT_END:  # nothing wrong so far: met once the deadline or the drill's end is reached
            if (deadline is not None and now >= deadline) or final:
                end = min(now, deadline) if deadline is not None else now
                return Verdict(e.name, e.expect, True, e.within, end, end - obs.t0, detail)
            return None
        if at is not None:
            if deadline is not None and at > deadline:
                return self._fail(e, obs, f"{detail} at t0+{duration_text(at - obs.t0)}: later than the {duration_text(e.within)}"
                                          " deadline", detail=detail, at=at)
            return Verdict(e.name, e.expect, True, e.within, at, at - obs.t0, detail)
        if (deadline is not None and now >= deadline) or final:
            why = detail or "not observed"
            limit = f"within {duration_text(e.within)}" if e.within is not None else "during the drill"
            return self._fail(e, obs, f"{why} {limit}" + ("" if now >= (deadline or now) else " (the drill ended first)"))
        return None

    def _fail(self, e, obs, reason, *, detail="", at=None) -> Verdict:
        return Verdict(e.name, e.expect, False, e.within, at, (at - obs.t0) if at is not None and obs.t0 else None,
                       detail, reason)

    # -- one method per expectation: (met at, what was observed, what is wrong) ------------------

    def _detected(self, e, obs):
        slo = self.resolve_slo(e.slo) if e.slo else None
        hits = [(at, a) for (name, sev, _), (at, a) in obs.first_firing.items()
                if at >= obs.t0 and sev == e.severity and (slo is None or name == slo)
                and (e.backend is None or a.backend == e.backend) and (e.alert is None or a.alertname == e.alert)
                and (e.cause is None or getattr(a, "cause", None) == e.cause)]
        if not hits:
            what = (f"no {e.severity} alert" + (f" {e.alert}" if e.alert else "") + (f" for {slo}" if slo else "")
                    + (f" on {e.backend}" if e.backend else "") + (f" with cause {e.cause}" if e.cause else ""))
            return None, f"{what} fired", None
        at, alert = min(hits, key=lambda h: h[0])
        if hasattr(alert, "describe"):  # a quality alert
            return at, alert.describe(), None
        return at, (f"{alert.alertname} {alert.slo} {alert.long_window}/{alert.short_window}"
                    f" {burn_over_threshold(alert)}"), None

    def _paged(self, e, obs):
        if obs.page_error:
            return None, "", f"the page failed: {obs.page_error}"
        if obs.paged_at is None:
            return None, "nobody was paged", None
        if e.mentions or e.excludes:  # what the page must (not) name, read off the incident's title
            return obs.paged_at, f"on-call paged: \"{obs.page_title}\"", title_problem(obs.page_title, e)
        return obs.paged_at, "on-call paged (incident opened)", None

    def _acknowledged(self, e, obs):
        if obs.acknowledged_at is None:
            return None, "the page was not acknowledged" if obs.paged_at else "nobody was paged", None
        return obs.acknowledged_at, f"acknowledged by {obs.acknowledged_by or 'on-call'}", None

    def _escalated(self, e, obs):
        if obs.escalated_at is None:
            return None, "the page did not escalate", None
        return obs.escalated_at, "escalated to the next on-call level", None

    def _failover_applied(self, e, obs):
        source = e.backend
        mine = [f for f in obs.failovers if moved_off(f, source)]
        if not mine:
            errors = [msg for _, msg in obs.failover_errors]
            if errors:
                return None, "", f"the failover from {source} failed: {errors[0]}"
            if "failover" in obs.cannot_happen:  # decided now: waiting cannot bring it
                return None, "", f"no failover from {source} can happen: {obs.cannot_happen['failover']}"
            return None, f"no failover from {source} was applied{_automation_said(obs)}", None
        entry = mine[0]
        before = entry["before"]["weights"].get(source, 0)
        after = entry["after"]["weights"].get(source, 0)
        detail = f"{source} {before}% -> {after}%"
        missing = [g for g in e.overrides if g not in (entry.get("overrides") or [])]
        if missing:
            return entry["ts"], detail, (f"the failover did not record the override of {', '.join(missing)}"
                                        f" (recorded: {', '.join(entry.get('overrides') or []) or 'none'})")
        if e.full and after > 0:
            short = entry.get("shortfall") or {}
            why = "; ".join(f"{b} could carry only {s['capacity_share']}%" for b, s in short.items())
            return entry["ts"], detail, f"only {before - after} of {before} points moved off {source}" + (
                f" ({why})" if why else "")
        if e.overrides:
            detail += f", overriding {', '.join(e.overrides)}"
        detected = first_detection(obs, source)
        by_method = str(entry.get("actor") or "").startswith("drill method")
        if not by_method and (detected is None or entry["ts"] < detected):
            when = "no page-level alert on it had fired" if detected is None else \
                f"before its first page-level alert (t0+{duration_text(detected - (obs.t0 or detected))})"
            return entry["ts"], detail, f"the failover from {source} came {when}: nothing mitigates before it is detected"
        return entry["ts"], detail, None

    def _ticket(self, e, obs) -> TicketSeen | None:
        mine = [t for t in obs.tickets if t.vendor == e.vendor]
        filed = [t for t in mine if t.filed_at is not None]
        return filed[0] if filed else (mine[0] if mine else None)

    def _vendor_ticket(self, e, obs):
        t = self._ticket(e, obs)
        if t is None:
            if "ticket" in obs.cannot_happen:
                return None, "", f"no ticket with {e.vendor} can be filed: {obs.cannot_happen['ticket']}"
            return None, f"no ticket was filed with {e.vendor}{_automation_said(obs)}", None
        if t.filed_at is None:
            return None, "", f"filing the {e.vendor} ticket failed: {t.error}"
        detail = f"ticket {t.ticket_id} filed in \"{t.routed_value}\" (opsctl: {t.routed_category or 'unmapped'})"
        if "drill" not in t.tags:
            return t.filed_at, detail, "the ticket is not tagged as a drill"
        if t.routed_category != e.category:
            return t.filed_at, detail, (f"it reached \"{t.routed_value}\", not the {e.category} category"
                                        f" (asked for {t.category})")
        if t.status_category is not None and t.status_category != e.category:
            return t.filed_at, detail, (f"read back, the ticket is in \"{t.status_value}\""
                                        f" (opsctl: {t.status_category}), not {e.category}")
        return t.filed_at, detail, None

    def _vendor_responded(self, e, obs):
        t = self._ticket(e, obs)
        if t is None and "ticket" in obs.cannot_happen:
            return None, "", f"no ticket reached {e.vendor}, nor can one: {obs.cannot_happen['ticket']}"
        if t is None or t.filed_at is None:
            return None, f"no ticket reached {e.vendor}", None
        if t.first_response_at is None:
            return None, f"{e.vendor} did not respond to ticket {t.ticket_id}", None
        detail = f"{e.vendor} responded; ticket now in \"{t.status_value}\" (opsctl: {t.status_category or 'unmapped'})"
        if e.category and t.status_category != e.category:
            return t.first_response_at, detail, (f"the vendor's triage moved it out of {e.category}:"
                                                 f" it is in \"{t.status_value}\" (opsctl: {t.status_category or 'unmapped'})")
        return t.first_response_at, detail, None

    def _slo_recovered(self, e, obs):
        slo = self.resolve_slo(e.slo)
        if slo in obs.recovered_at:
            return obs.recovered_at[slo], f"{slo}: burn over the last {duration_text(e.window)} back to 1x or less", None
        burn = obs.window_burn.get((slo, e.window))
        if slo not in obs.burning_since:
            return None, f"{slo} never burned its budget faster than sustainable", None
        shown = rate_text(burn) if burn is not None else "unknown (no data)"
        return None, f"{slo} still burning ({shown} over the last {duration_text(e.window)})", None

    def _change_refused(self, e, obs):
        mine = [c for c in obs.changes if c.get("action") == e.action]
        if not mine:
            return None, f"no routine `{e.action}` was attempted", None
        entry = mine[0]
        refused_by = [g["name"] for g in entry.get("guards") or [] if not g.get("ok")]
        if entry.get("outcome") == "refused" and e.guard in refused_by:
            return entry["ts"], f"refused by {e.guard}: {entry.get('message', '')}"[:300], None
        if entry.get("outcome") == "refused":
            return entry["ts"], f"refused by {', '.join(refused_by)}", f"refused, but not by {e.guard}"
        return entry["ts"], f"outcome {entry.get('outcome')}", f"the routine change was {entry.get('outcome')}: {e.guard} did not refuse it"

    # -- counts and absences: met only at the end (or the deadline); exceeded, they fail at once --

    def _pages(self, e, obs):
        keys = sorted({p.dedup_key for p in obs.pages})
        detail = f"{len(keys)} PagerDuty incident(s)" + (f": {', '.join(keys[:4])}" if keys else "")
        if len(keys) > e.max:
            at = sorted(obs.pages, key=lambda p: p.at)[e.max].at if len(obs.pages) > e.max else None
            return at, detail, f"{len(keys)} PagerDuty incidents opened, at most {e.max} expected"
        return None, detail, None

    def _tickets(self, e, obs):
        mine = [t for t in obs.tickets if t.filed_at is not None and (e.vendor is None or t.vendor == e.vendor)]
        shown = ", ".join(f"{t.ticket_id} ({t.vendor}, {t.routed_category or t.category})" for t in mine[:4])
        detail = f"{len(mine)} ticket(s)" + (f": {shown}" if shown else "")
        if len(mine) > e.max:
            return mine[e.max].filed_at, detail, f"{len(mine)} tickets filed, at most {e.max} expected"
        wrong = [t for t in mine if e.category is not None and (t.routed_category or t.category) != e.category]
        if wrong:
            t = wrong[0]
            return t.filed_at, detail, f"ticket {t.ticket_id} is in {t.routed_category or t.category}, not {e.category}"
        return None, detail, None

    def _no_ticket(self, e, obs):
        mine = [t for t in obs.tickets if e.vendor is None or t.vendor == e.vendor]
        if mine:
            t = mine[0]
            return t.filed_at or t.asked_at, f"ticket {t.ticket_id or '(failed)'} with {t.vendor}", (
                f"a ticket was asked of {t.vendor} ({t.category}): none expected")
        return None, "no ticket filed", None

    def _no_flap(self, e, obs):
        b = e.backend
        moves = sorted(obs.moves, key=lambda m: m.get("ts", 0))
        for i, away in enumerate(moves):
            if not moved_off(away, b):
                continue
            for back in moves[i + 1:]:
                gap = back.get("ts", 0) - away.get("ts", 0)
                if gap > e.window:
                    break
                if moved_toward(back, b):
                    return back["ts"], f"{len(moves)} traffic move(s)", (
                        f"traffic moved back toward {b} ({back.get('action')}) {duration_text(gap)} after moving"
                        f" off it ({away.get('action')}), within the {duration_text(e.window)} window")
        return None, f"{len(moves)} traffic move(s), none back toward {b} within {duration_text(e.window)}", None

    def _page_names(self, e, obs):
        if obs.page_error:
            return None, "", f"the page failed: {obs.page_error}"
        if obs.paged_at is None:
            return None, "nobody was paged", None
        missing = [w for w in e.mentions if w.lower() not in (obs.page_title or "").lower()]
        detail = f"the page: \"{obs.page_title}\""
        if missing:  # the title follows the incident: it may name them later; failed at the drill's end
            return None, f"{detail} does not name {', '.join(missing)}", None
        return obs.paged_at, detail, None
