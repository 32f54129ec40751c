"""Alert -> action policy: which policies an alert matches, and the alert event as queued.

A policy matches an alert when every `match` label is equal and every `match_re` label fully
matches its regular expression (a missing label is the empty string, as in Alertmanager), and, for
a policy with `causes`, when the alert's `cause` ANNOTATION is one of them. Labels of an alert never
change while it fires; its cause may (the dominant bad outcome over its short window), so the cause
at the episode's opening is the episode's cause: an alert that opened a policy's episode stays with
it when its cause flips (the flip is recorded), and never opens a second cause-narrowed policy's
episode. The ticket category comes from that cause through runbooks.tickets unless the policy
names one. What each policy then does about the alert is policy_engine.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TYPE_CHECKING, Mapping

from opsctl.automation.actions import Outcome
from opsctl.slo import conventions as cv

if TYPE_CHECKING:
    from opsctl.config import AutomationPolicy


class ActionFailed(Exception):
    """An action failed unexpectedly; the event is retried (its done actions are not repeated)."""


@dataclass(frozen=True)
class CompiledPolicy:
    policy: "AutomationPolicy"
    patterns: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def of(cls, policy: "AutomationPolicy") -> "CompiledPolicy":
        return cls(policy, tuple((k, re.compile(v)) for k, v in sorted(policy.match_re.items())))

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def causes(self) -> frozenset[str]:
        return frozenset(self.policy.causes)

    def matches(self, labels: Mapping[str, str]) -> bool:
        for label, value in self.policy.match.items():
            if labels.get(label, "") != value:
                return False
        return all(p.fullmatch(labels.get(label, "")) for label, p in self.patterns)

    def target(self, labels: Mapping[str, str]) -> str:
        """What the episode is about: the backend failed over from, else the alert's backend, SLO or name."""
        failover = self.policy.actions.failover
        if failover is not None and failover.backend:
            return failover.backend
        return labels.get("backend") or labels.get("slo") or labels.get("alertname") or "alert"


def matching(policies: list[CompiledPolicy], labels: Mapping[str, str]) -> list[CompiledPolicy]:
    return [p for p in policies if p.matches(labels)]


def alert_cause(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """What broke, by the alert's `cause` annotation (opsctl's rules write one on every alert), else
    by its fixed `category` label (latency, quality and absent alerts have one cause each)."""
    cause = (annotations or {}).get("cause", "")
    if cause in cv.CAUSES:
        return cause
    category = (labels or {}).get(cv.LABEL_CATEGORY, "")
    if category == "availability":  # rules without the per-cause ratios (an SLI over another metric)
        return cv.DEFAULT_AVAILABILITY_CAUSE
    return category if category in ("latency", "quality", "absent") else None


@dataclass
class Taken:
    """One action's result, as recorded and counted."""

    policy: str
    action: str
    outcome: Outcome
    dry_run: bool
    seconds: float  # from the delivery's arrival to the action's end


@dataclass
class AlertEvent:
    """One alert of one Alertmanager notification, as queued (plain data, JSON in the delivery log)."""

    key: str
    status: str
    labels: dict[str, str]  # Alertmanager labels and annotations: strings (payloads.Labels)
    annotations: dict[str, str]
    starts_at: str  # canonical RFC 3339
    fingerprint: str
    group_key: str
    generator_url: str = ""
    received_at: float = 0.0

    @classmethod
    def from_payload(cls, key: str, data: dict[str, Any], received_at: float) -> "AlertEvent":
        return cls(key=key, status=data["status"], labels=data["labels"], annotations=data["annotations"],
                   starts_at=data["starts_at"], fingerprint=data["fingerprint"], group_key=data["group_key"],
                   generator_url=data.get("generator_url", ""), received_at=received_at)

    @property
    def cause(self) -> str | None:
        return alert_cause(self.labels, self.annotations)

    def summary(self) -> str:
        labels = self.labels
        what = labels.get("alertname", "alert")
        about = ", ".join(f"{k}={labels[k]}" for k in ("slo", "backend", "severity") if labels.get(k))
        if self.cause:
            about += f", cause={self.cause}"
        text = self.annotations.get("summary") or ""
        return f"{what} {self.status} ({about})" + (f": {text}" if text else "")



__all__ = ["ActionFailed", "AlertEvent", "CompiledPolicy", "Taken", "alert_cause", "matching"]
