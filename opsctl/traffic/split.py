"""The traffic split: integer weights per backend summing to 100, plus shadow (mirror) percentages.

A shadow percentage mirrors that share of all requests to the backend and throws its answers away
(for warming up or testing a backend before a rollout). It costs the backend capacity but no user
sees its answers. Zero weights and zero shadows are dropped from the canonical form, so two splits
that route the same way compare equal.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from opsctl.errors import UsageError
from opsctl.model import Model, field

TOTAL = 100


class Split(Model):
    weights: Mapping[str, int]
    shadow: Mapping[str, int] = field(default_factory=dict)

    __hash__ = None  # type: ignore[assignment]  # mappings inside: compare, don't hash (Model's is a method)

    @classmethod
    def of(cls, weights: Mapping[str, int], shadow: Mapping[str, int] | None = None) -> "Split":
        return cls(
            {k: int(v) for k, v in sorted(weights.items()) if v},
            {k: int(v) for k, v in sorted((shadow or {}).items()) if v},
        )

    def weight(self, backend: str) -> int:
        return self.weights.get(backend, 0)

    def shadow_of(self, backend: str) -> int:
        return self.shadow.get(backend, 0)

    def load_share(self, backend: str) -> int:
        """Percent of all requests the backend serves, its mirrored copies included."""
        return self.weight(backend) + self.shadow_of(backend)

    def backends(self) -> list[str]:
        return sorted(set(self.weights) | set(self.shadow))

    def increased(self, before: "Split | None") -> list[str]:
        """Backends that get a bigger share of user traffic than before."""
        return [b for b in self.backends() if self.weight(b) > (before.weight(b) if before else 0)]

    def load_increased(self, before: "Split | None") -> list[str]:
        """Backends that get more load (weight plus shadow) than before."""
        return [b for b in self.backends() if self.load_share(b) > (before.load_share(b) if before else 0)]

    def with_shadow(self, shadow: Mapping[str, int]) -> "Split":
        merged = dict(self.shadow)
        merged.update(shadow)
        return Split.of(self.weights, merged)

    def to_dict(self, backends: Iterable[str] | None = None) -> dict[str, Any]:
        names = list(backends) if backends is not None else self.backends()
        names += [b for b in self.backends() if b not in names]
        return {
            "weights": {b: self.weight(b) for b in names},
            "shadow": {b: self.shadow_of(b) for b in names if self.shadow_of(b)},
        }

    def describe(self, backends: Iterable[str] | None = None) -> str:
        names = list(backends) if backends is not None else self.backends()
        names += [b for b in self.backends() if b not in names]
        text = " / ".join(f"{b} {self.weight(b)}" for b in names)
        if self.shadow:
            text += " (shadow " + ", ".join(f"{b} {p}%" for b, p in self.shadow.items()) + ")"
        return text

    def validate(self, known: Iterable[str], where: str = "split") -> None:
        problems = split_problems(self.weights, self.shadow, known)
        if problems:
            raise UsageError(f"{where}: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, data: object, known: Iterable[str], where: str) -> "Split":
        """Parse a stored split ({"weights": {...}, "shadow": {...}}); problems name `where`."""
        if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
            raise UsageError(f"{where}: not a split (expected {{\"weights\": {{backend: percent}}, \"shadow\": {{...}}}})")
        shadow = data.get("shadow") or {}
        if not isinstance(shadow, dict):
            raise UsageError(f"{where}: shadow must be a mapping of backend to percent")
        problems = split_problems(data["weights"], shadow, known)
        if problems:
            raise UsageError(f"{where}: " + "; ".join(problems))
        return cls.of(data["weights"], shadow)


def split_problems(weights: Mapping[str, object], shadow: Mapping[str, object], known: Iterable[str]) -> list[str]:
    known = set(known)
    listing = ", ".join(sorted(known))
    problems = []
    for kind, values in (("weight", weights), ("shadow", shadow)):
        for backend, value in values.items():
            if backend not in known:
                problems.append(f"unknown backend {backend!r} (known: {listing})")
            elif isinstance(value, bool) or not isinstance(value, int):
                problems.append(f"{backend}: {kind} must be a whole number from 0 to 100, got {value!r}")
            elif not 0 <= value <= TOTAL:
                problems.append(f"{backend}: {kind} {value} is outside 0-100")
    if not problems:
        total = sum(v for v in weights.values() if isinstance(v, int))  # all whole numbers by now
        if total != TOTAL:
            problems.append(f"weights must sum to 100, they sum to {total}")
    return problems


def check_known(names: Iterable[str], known: Iterable[str], flag: str) -> None:
    """Unknown backend names are an error even with weight 0 (which the canonical form drops)."""
    known = list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"{flag}: unknown backend {unknown[0]!r} (known: {', '.join(sorted(known))})")


def parse_assignments(items: Iterable[str], flag: str) -> dict[str, int]:
    """['internal=30', 'databricks=70'] -> {'internal': 30, 'databricks': 70}; bad syntax is exit 2.
    Ranges and backend names are checked by the bounds guard, so such attempts are audited."""
    result: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().rstrip("%")
        if not sep or not name:
            raise UsageError(f"{flag}: {item!r} is not BACKEND=PERCENT (e.g. internal=30)")
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"{flag}: {item!r}: the percentage must be a whole number from 0 to 100") from None
        if name in result:
            raise UsageError(f"{flag}: backend {name!r} is given twice")
        result[name] = number
    return result


def largest_remainder(shares: Mapping[str, float]) -> dict[str, int]:
    """Round shares that sum to 100 to integers that still sum to 100 (ties go in name order)."""
    floors = {k: math.floor(v + 1e-9) for k, v in shares.items()}
    left = TOTAL - sum(floors.values())
    order = sorted(shares, key=lambda k: (-(shares[k] - floors[k]), k))
    for k in order[:max(left, 0)]:
        floors[k] += 1
    return floors


def fill_remainder(assigned: Mapping[str, int], current: Split, known: Iterable[str]) -> dict[str, int]:
    """Weights from a partial assignment: the unlisted backends share what is left in proportion to
    their current weights (equally when they have none). `internal=60` on 80/20 -> 40/60."""
    others = [b for b in known if b not in assigned]
    left = TOTAL - sum(assigned.values())
    if left < 0:
        raise UsageError(f"the listed weights sum to {sum(assigned.values())}, more than 100")
    if not others:
        return dict(assigned)
    base = {b: current.weight(b) for b in others}
    total = sum(base.values())
    shares = {b: (left * base[b] / total if total else left / len(others)) for b in others}
    rounded = largest_remainder({**shares, "\0fixed": TOTAL - left})  # keep the sum at 100
    rounded.pop("\0fixed")
    return {**assigned, **rounded}


def interpolate(start: Split, target: Split, fraction: float) -> Split:
    """The split `fraction` of the way from start to target (weights and shadow), rounded to sum 100."""
    names = sorted(set(start.backends()) | set(target.backends()))
    weights = largest_remainder(
        {b: start.weight(b) + (target.weight(b) - start.weight(b)) * fraction for b in names}
    )
    shadow = {b: round(start.shadow_of(b) + (target.shadow_of(b) - start.shadow_of(b)) * fraction) for b in names}
    return Split.of(weights, shadow)


def ramp_steps(start: Split, target: Split, step: int) -> list[Split]:
    """Splits from start (exclusive) to target (inclusive), no backend moving more than `step` points at once."""
    names = set(start.backends()) | set(target.backends())
    distance = max(
        [abs(target.weight(b) - start.weight(b)) for b in names]
        + [abs(target.shadow_of(b) - start.shadow_of(b)) for b in names]
        + [0]
    )
    if distance == 0:
        return []
    count = math.ceil(distance / step)
    steps = [interpolate(start, target, i / count) for i in range(1, count)]
    steps.append(target)
    deduped: list[Split] = []
    for s in steps:
        if s != start and (not deduped or deduped[-1] != s):
            deduped.append(s)
    return deduped
