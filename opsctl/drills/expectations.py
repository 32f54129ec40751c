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
    def mark(self) -> str:
        return "PASS" if self.passed else "FAIL" if self.evaluated else NOT_EVALUATED

    def to_dict(self, fmt) -> dict:
        return {"name": self.name, "expect": self.expect, "passed": self.passed,
                "result": "pass" if self.passed else "fail" if self.evaluated else NOT_EVALUATED,
                "within_seconds": self.within, "at": fmt(self.at) if self.at is not None else None,
                "seconds": self.seconds, "detail": self.detail, "reason": self.reason}


NOT_EVALUATED = "not evaluated"


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
                and (e.backend is None or a.backend == e.backend) and (e.alert is None or a.alertname == e.alert)]
        if not hits:
            what = (f"no {e.severity} alert" + (f" {e.alert}" if e.alert else "") + (f" for {slo}" if slo else "")
                    + (f" on {e.backend}" if e.backend else ""))
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
            return obs.paged_at, f"on-call paged: {obs.page_title!r}", title_problem(obs.page_title, e)
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
        mine = [f for f in obs.failovers if (f.get("before") or {}).get("weights", {}).get(source, 0)
                > (f.get("after") or {}).get("weights", {}).get(source, 0)]
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
        detail = f"ticket {t.ticket_id} filed in {t.routed_value!r} (opsctl: {t.routed_category or 'unmapped'})"
        if "drill" not in t.tags:
            return t.filed_at, detail, "the ticket is not tagged as a drill"
        if t.routed_category != e.category:
            return t.filed_at, detail, (f"it reached {t.routed_value!r}, not the {e.category} category"
                                        f" (asked for {t.category!r})")
        if t.status_category is not None and t.status_category != e.category:
            return t.filed_at, detail, (f"read back, the ticket is in {t.status_value!r}"
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
        detail = f"{e.vendor} responded; ticket now in {t.status_value!r} (opsctl: {t.status_category or 'unmapped'})"
        if e.category and t.status_category != e.category:
            return t.first_response_at, detail, (f"the vendor's triage moved it out of {e.category}:"
                                                 f" it is in {t.status_value!r} (opsctl: {t.status_category or 'unmapped'})")
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
