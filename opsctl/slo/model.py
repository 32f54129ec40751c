"""SLO files in slo-generator's v2 format -> validated SloDefinition objects.

The same files run under slo-generator itself. opsctl reads `metadata.labels.backend` (a
configured backend, or `all` for the service as a whole) and requires the `good_bad_ratio`
method over the `prometheus` backend with `filter_good` and `filter_valid` selectors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from opsctl.errors import ConfigError
from opsctl.metrics.promql import parse_selector
from opsctl.slo.conventions import ALL_BACKENDS

API_VERSION = "sre.google.com/v2"
KIND = "ServiceLevelObjective"


@dataclass(frozen=True)
class SloDefinition:
    name: str
    backend: str  # a configured backend, or "all"
    goal: float
    filter_good: str
    filter_valid: str
    description: str
    file: str
    kind: str  # availability | latency
    threshold_seconds: float | None  # for latency SLOs: the `le` bound
    document: dict = field(repr=False, compare=False, hash=False, default_factory=dict)

    @property
    def error_budget(self) -> float:
        return 1.0 - self.goal

    def slo_generator_config(self) -> dict:
        """A private copy of the document for slo-generator, which mutates nothing but deserves no trust."""
        return copy.deepcopy(self.document)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigError(f"{path}: no such SLO file or directory")
    return files


def load_slos(paths: Iterable[str | Path], backends: Iterable[str]) -> list[SloDefinition]:
    """Load and validate SLO files; every problem in every file is reported before failing."""
    from opsctl.config import load_yaml_file

    known = set(backends)
    files = discover(paths)
    problems: list[str] = []
    slos: list[SloDefinition] = []
    for path in files:
        try:
            doc = load_yaml_file(path, "SLO file")
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        slo = _validate(doc, str(path), known, problems)
        if slo:
            slos.append(slo)
    if not files:
        problems.append("no SLO files found in " + ", ".join(str(p) for p in paths))
    names: dict[str, str] = {}
    for slo in slos:
        if slo.name in names:
            problems.append(f"{slo.file}: metadata.name: {slo.name!r} is also defined in {names[slo.name]}")
        names[slo.name] = slo.file
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) in SLO files", problems=problems)
    return slos


def _validate(doc: Any, file: str, known: set[str], problems: list[str]) -> SloDefinition | None:
    before = len(problems)

    def bad(where: str, what: str) -> None:
        problems.append(f"{file}: {where}: {what}")

    if not isinstance(doc, dict):
        bad("(top level)", "an SLO file must be a mapping")
        return None
    if doc.get("apiVersion") != API_VERSION:
        bad("apiVersion", f"must be {API_VERSION!r}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        bad("kind", f"must be {KIND!r}, got {doc.get('kind')!r}")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    if not isinstance(doc.get("metadata"), dict):
        bad("metadata", "missing or not a mapping")
    name = meta.get("name")
    if not isinstance(name, str) or not name or not all(c.isalnum() or c in "-_" for c in name):
        bad("metadata.name", f"must be a name of letters, digits, - and _, got {name!r}")
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    backend = labels.get("backend")
    if backend is None:
        bad("metadata.labels.backend", f"missing: name a backend ({', '.join(sorted(known))}) or {ALL_BACKENDS!r}")
    elif not isinstance(backend, str) or (backend != ALL_BACKENDS and backend not in known):
        bad("metadata.labels.backend", f"unknown backend {backend!r} (known: {', '.join(sorted(known))}, {ALL_BACKENDS})")
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else None
    if spec is None:
        bad("spec", "missing or not a mapping")
        return None
    if spec.get("backend") != "prometheus":
        bad("spec.backend", f"opsctl evaluates SLOs over PromQL: must be 'prometheus', got {spec.get('backend')!r}")
    if spec.get("method") != "good_bad_ratio":
        bad("spec.method", f"must be 'good_bad_ratio' (filter_good over filter_valid), got {spec.get('method')!r}")
    goal = spec.get("goal")
    if isinstance(goal, bool) or not isinstance(goal, (int, float)) or not 0 < goal < 1:
        bad("spec.goal", f"must be a number strictly between 0 and 1 (e.g. 0.9999), got {goal!r}")
        goal = None
    sli = spec.get("service_level_indicator") if isinstance(spec.get("service_level_indicator"), dict) else None
    good = valid = None
    if sli is None:
        bad("spec.service_level_indicator", "missing or not a mapping")
    else:
        if "filter_bad" in sli:
            bad("spec.service_level_indicator.filter_bad", "use filter_valid: opsctl counts good over valid")
        good, valid = sli.get("filter_good"), sli.get("filter_valid")
        for key, value in (("filter_good", good), ("filter_valid", valid)):
            if not isinstance(value, str) or not value.strip():
                bad(f"spec.service_level_indicator.{key}", "missing: a PromQL series selector")
                continue
            try:
                parse_selector(value)
            except Exception as exc:  # UsageError from the parser
                bad(f"spec.service_level_indicator.{key}", str(exc))
    if len(problems) > before:
        return None
    kind, threshold = _classify(good)
    return SloDefinition(
        name=name,
        backend=backend,
        goal=float(goal),
        filter_good=good.strip(),
        filter_valid=valid.strip(),
        description=str(spec.get("description", "")),
        file=file,
        kind=kind,
        threshold_seconds=threshold,
        document=doc,
    )


def _classify(filter_good: str) -> tuple[str, float | None]:
    """A latency SLO counts histogram buckets; its threshold is the `le` bound it selects."""
    selector = parse_selector(filter_good)
    if not selector.metric.endswith("_bucket"):
        return "availability", None
    import re

    for m in selector.matchers:
        if m.label == "le":
            number = re.match(r"[0-9.]+", m.value.replace("\\", ""))
            return "latency", float(number.group(0)) if number else None
    return "latency", None
