"""The shape of slo-generator v2 SLO files as typed models, built by the toolkit's one engine
(`opsctl.config.build`): unknown keys and wrong types are refused there with their key path.
Fields typed Any are checked in opsctl.slo.model with messages that say what PromQL or
slo-generator needs of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsctl.errors import ConfigError


@dataclass(frozen=True)
class Metadata:
    name: Any = None
    labels: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Spec:
    backend: Any = None
    method: Any = None
    service_level_indicator: Any = None
    goal: Any = None
    description: str = ""
    exporters: list[Any] = field(default_factory=list)
    error_budget_policy: str | None = None


@dataclass(frozen=True)
class RatioSli:
    filter_good: Any = None
    filter_valid: Any = None
    filter_bad: Any = None
    operators: Any = None


@dataclass(frozen=True)
class DistributionSli:
    expression: Any = None
    threshold_bucket: Any = None
    good_below_threshold: Any = True


@dataclass(frozen=True)
class QuerySli:
    expression: Any = None


SLI_MODELS = {"good_bad_ratio": RatioSli, "distribution_cut": DistributionSli, "query_sli": QuerySli}


def typed(cls: type, data: Any, prefix: str, file: str, problems: list[str]) -> Any:
    """`cls` built from `data` at key path `prefix`; its problems are added with their full key path."""
    from opsctl.config import build

    try:
        return build(cls, data, file)
    except ConfigError as exc:
        for problem in exc.problems:
            key, _, what = problem[len(file) + 2:].partition(": ")
            problems.append(f"{file}: {prefix if key == '(top level)' else f'{prefix}.{key}'}: {what}")
        return None
