"""Sloth SLO files -> SloDefinitions, read from the SLO dirs beside slo-generator's and OpenSLO's.

Two shapes, told apart by their header: a service file (`version: prometheus/v1`, snake_case
keys) and the Kubernetes CRD (`apiVersion: sloth.slok.dev/v1`, `kind: PrometheusServiceLevel`,
camelCase keys as its Go types write them; the older snake_case spelling of the CRD is read too).
Each holds one service and several SLOs; a file may hold several documents.

How each maps onto what opsctl computes:

- `sli.events` (`error_query` / `total_query`, each an expression with Sloth's `{{.window}}`):
  a bad/total form that keeps event counts. good = total - bad; valid = total. Sloth's queries
  are conventionally `sum(rate(...[{{.window}}]))`: per-second rates, which times the window's
  seconds are its events (`counts: rate`); with `increase` they are the events (`counts:
  increase`); a query with neither (or both) gives the same SLI as a ratio without event counts.
- `sli.raw.error_ratio_query` -> query_sli, SLI = 1 - the ratio: no event counts.
- `sli.plugin` (Sloth SLI plugins run Go code inside Sloth) and SLO plugins (`plugins`,
  `slo_plugins` / `sloPlugins`, which rewrite Sloth's rules) are refused, naming the plugins.
- `service` must not be empty (Sloth refuses it); label and annotation values are read as Sloth
  reads them, as strings (`tier: 2` is "2", `true` is "true").
- The SLO is named as Sloth names it (`sloth_id`: `<service>-<name>`), its objective (a
  percentage) is the goal as written, `labels.backend` (SLO labels over service labels) ties a
  traffic guard, the service must be the config's (which names the service in rules).
  `alerting.page_alert.disable` and `ticket_alert.disable` are honoured (`SloDefinition.silenced`:
  no alerts of that severity, the fast tier following the page; recording rules kept); the rest of
  `alerting` is Sloth's own, and opsctl's burn-rate alerts come from the config's `alerting:`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from opsctl.errors import ConfigError

if TYPE_CHECKING:  # the SLO model loads when a file is Sloth's
    from opsctl.slo.model import Bad, SloDefinition

SERVICE_VERSION = "prometheus/v1"
CRD_API_VERSION = "sloth.slok.dev/v1"
CRD_KIND = "PrometheusServiceLevel"
WINDOW = re.compile(r"\{\{\s*\.window\s*\}\}")
_RATE = re.compile(r"(?<![A-Za-z0-9_:])rate\s*\(")
_INCREASE = re.compile(r"(?<![A-Za-z0-9_:])increase\s*\(")


def is_sloth(doc: Any) -> bool:
    return isinstance(doc, dict) and (doc.get("version") == SERVICE_VERSION or doc.get("apiVersion") == CRD_API_VERSION)


@dataclass(frozen=True)
class Events:
    error_query: str
    total_query: str


@dataclass(frozen=True)
class Raw:
    error_ratio_query: str


@dataclass(frozen=True)
class Plugin:
    id: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sli:
    events: Events | None = None
    raw: Raw | None = None
    plugin: Plugin | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.events, self.raw, self.plugin)) != 1:
            raise ValueError("give exactly one of events, raw or plugin")


@dataclass(frozen=True)
class AlertMeta:
    """Sloth's page_alert / ticket_alert: `disable` is honoured; labels and annotations are Sloth's
    own (opsctl's alerts carry the config's)."""

    disable: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Alerting:
    name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    page_alert: AlertMeta = field(default_factory=AlertMeta)
    ticket_alert: AlertMeta = field(default_factory=AlertMeta)


@dataclass(frozen=True)
class Slo:
    name: str
    objective: Any
    sli: Sli
    description: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    alerting: Alerting = field(default_factory=Alerting)  # its `disable`s honoured; opsctl's alerts from `alerting:`
    plugins: Any = None  # Sloth's SLO plugins: refused by name (they rewrite rules inside Sloth)


@dataclass(frozen=True)
class ServiceFile:
    version: Literal["prometheus/v1"]
    service: str
    slos: list[Slo]
    labels: dict[str, str] = field(default_factory=dict)
    slo_plugins: Any = None


@dataclass(frozen=True)
class CrdSpec:
    service: str
    slos: list[Slo]
    labels: dict[str, str] = field(default_factory=dict)
    slo_plugins: Any = None


@dataclass(frozen=True)
class Crd:
    apiVersion: Literal["sloth.slok.dev/v1"]
    kind: Literal["PrometheusServiceLevel"]
    spec: CrdSpec
    metadata: dict[str, Any] = field(default_factory=dict)
    status: Any = None


_CAMEL = {"errorQuery": "error_query", "totalQuery": "total_query", "errorRatioQuery": "error_ratio_query",
          "pageAlert": "page_alert", "ticketAlert": "ticket_alert", "sloPlugins": "slo_plugins"}
_TEXT_MAPS = ("labels", "annotations")


def _snake(value: Any) -> Any:
    """The CRD's camelCase keys in the service file's spelling (one model reads both)."""
    if isinstance(value, dict):
        return {_CAMEL.get(k, k): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _stringified(value: Any, key: str = "") -> Any:
    """Label and annotation values as Sloth reads them (Go's YAML into a map of strings):
    `tier: 2` is "2", `critical: true` is "true"."""
    if isinstance(value, dict):
        if key in _TEXT_MAPS:
            return {k: _text(v) for k, v in value.items()}
        return {k: _stringified(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringified(v) for v in value]
    return value


def _text(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def load(docs: list[tuple[str, str, Any]], known: set[str], problems: list[str]) -> list[SloDefinition]:
    """(file, where, raw document) -> SloDefinitions; every problem is added to `problems`."""
    from opsctl.config import build

    out = []
    for path, where, doc in docs:
        crd = doc.get("apiVersion") == CRD_API_VERSION
        if crd and doc.get("kind") != CRD_KIND:
            problems.append(f"{where}: kind: Sloth's Kubernetes kind is {CRD_KIND!r}, got {doc.get('kind')!r}")
            continue
        body: CrdSpec | ServiceFile
        try:
            body = build(Crd, _stringified(_snake(doc)), where).spec if crd else build(ServiceFile, _stringified(doc), where)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        prefix = "spec.slos" if crd else "slos"
        if not body.service.strip():
            problems.append(f"{where}: {'spec.' if crd else ''}service: must name the service (Sloth refuses an"
                            " empty one; its SLO ids are <service>-<name>)")
            continue
        if body.slo_plugins is not None:
            problems.append(f"{where}: {'spec.sloPlugins' if crd else 'slo_plugins'}: Sloth's SLO plugins"
                            f" ({_plugin_ids(body.slo_plugins)}) rewrite the generated rules inside Sloth; opsctl"
                            " does not run them: remove them (opsctl's rules come from its config's `alerting:`)")
            continue
        for i, slo in enumerate(body.slos):
            one = _definition(slo, body, f"{prefix}[{i}]", path, where, known, problems)
            if one is not None:
                out.append(one)
    return out


def _definition(slo: Slo, body: CrdSpec | ServiceFile, key: str, path: str, where: str, known: set[str],
                problems: list[str]) -> SloDefinition | None:
    from opsctl.slo.model import SloDefinition, check_backend, check_name, classify_expression, percent_goal

    before = len(problems)

    def bad(sub: str, what: str) -> None:
        problems.append(f"{where}: {key}.{sub}: {what}")

    name = f"{body.service}-{slo.name}"  # Sloth's sloth_id
    if (why := check_name(name)) is not None:
        bad("name", f"with the service, the SLO's id {why}")
    goal: float | None
    try:
        goal = percent_goal(slo.objective)
    except ValueError as exc:
        bad("objective", str(exc))
        goal = None
    labels = {**body.labels, **slo.labels}
    backend = labels.get("backend")
    if (why := check_backend(backend, known)) is not None:
        bad("labels.backend", why)
    if slo.plugins is not None:
        bad("plugins", f"Sloth's SLO plugins ({_plugin_ids(slo.plugins)}) rewrite the generated rules inside"
            " Sloth; opsctl does not run them: remove them (opsctl's rules come from its config's `alerting:`)")
        return None
    if slo.sli.plugin is not None:
        bad("sli.plugin", f"Sloth SLI plugins ({slo.sli.plugin.id!r}) run Go code inside Sloth; opsctl cannot"
            " compute them: write the plugin's queries as sli.events or sli.raw")
        return None
    silenced = tuple(s for s, meta in (("page", slo.alerting.page_alert), ("ticket", slo.alerting.ticket_alert))
                     if meta.disable)
    if slo.sli.raw is not None:
        query = _query(slo.sli.raw.error_ratio_query, "sli.raw.error_ratio_query", bad)
        if query is None or goal is None or len(problems) > before:
            return None
        kind, threshold = classify_expression(query)
        expression = f"1 - ({query})"
        return SloDefinition(
            name=name, backend=backend, goal=goal, filter_good=None, filter_valid=None,
            description=slo.description, file=path, kind=kind, threshold_seconds=threshold,
            document=_document(name, labels, body.service, slo.description, goal, "query_sli",
                               {"expression": expression}),
            method="query_sli", expression=expression, service_name=body.service, source_format="sloth",
            keys=(("sli", f"{key}.sli.raw.error_ratio_query"),), silenced=silenced)
    events = slo.sli.events
    if events is None:  # Sli holds exactly one of events, raw and plugin
        return None
    error = _query(events.error_query, "sli.events.error_query", bad)
    total = _query(events.total_query, "sli.events.total_query", bad)
    if error is None or total is None or goal is None or len(problems) > before:
        return None
    kind, threshold = classify_expression(error + " " + total)
    rates = bool(_RATE.search(error)) and bool(_RATE.search(total))
    increases = bool(_INCREASE.search(error)) and bool(_INCREASE.search(total))
    roles = (("good", f"{key}.sli.events"), ("valid", f"{key}.sli.events.total_query"),
             ("bad", f"{key}.sli.events.error_query"), ("sli", f"{key}.sli.events"))
    if rates == increases:  # neither or both: the same SLI, as a ratio without event counts
        expression = f"1 - ((({error}) or ({total}) * 0) / ({total}))"
        return SloDefinition(
            name=name, backend=backend, goal=goal, filter_good=None, filter_valid=None,
            description=slo.description, file=path, kind=kind, threshold_seconds=threshold,
            document=_document(name, labels, body.service, slo.description, goal, "query_sli",
                               {"expression": expression}),
            method="query_sli", expression=expression, service_name=body.service, source_format="sloth", keys=roles,
            silenced=silenced)
    good = f"({total}) - (({error}) or ({total}) * 0)"
    return SloDefinition(
        name=name, backend=backend, goal=goal, filter_good=good, filter_valid=total,
        description=slo.description, file=path, kind=kind, threshold_seconds=threshold,
        document=_document(name, labels, body.service, slo.description, goal, "good_bad_ratio",
                           {"filter_good": good, "filter_valid": total, "operators": []}),
        method="good_bad_ratio", filter_bad=error, operators=(), service_name=body.service,
        source_format="sloth", counts="rate" if rates else "increase", keys=roles, silenced=silenced)


def _plugin_ids(plugins: Any) -> str:
    """The ids of Sloth plugins as its files write them (`chain: [{id: ...}]`), for messages."""
    chain = plugins.get("chain") if isinstance(plugins, dict) else None
    ids = [str(p.get("id")) for p in chain if isinstance(p, dict) and "id" in p] if isinstance(chain, list) else []
    return ", ".join(dict.fromkeys(ids)) or "plugins"


def _query(text: str, key: str, bad: Bad) -> str | None:
    """A Sloth query with `{{.window}}` as opsctl's `[window]` placeholder."""
    if not text.strip():
        bad(key, "must be a PromQL expression")
        return None
    if not WINDOW.search(text):
        bad(key, "needs Sloth's `{{.window}}` where the range goes, so each window measures its own span")
        return None
    query = " ".join(WINDOW.sub("window", text).split())
    if "[window" in query.replace("[window]", "").replace("[window:", ""):
        bad(key, "`{{.window}}` goes inside a range, as `[{{.window}}]`")
        return None
    return query


def _document(name: str, labels: dict[str, str], service: str, description: str, goal: float, method: str,
              sli: dict[str, Any]) -> dict[str, Any]:
    """The slo-generator document of the same SLI (what `slo convert --to slo-generator` writes)."""
    meta_labels = {"service_name": service, **({"backend": labels["backend"]} if "backend" in labels else {})}
    return {"apiVersion": "sre.google.com/v2", "kind": "ServiceLevelObjective",
            "metadata": {"name": name, "labels": meta_labels},
            "spec": {"description": description, "backend": "prometheus", "method": method,
                     "service_level_indicator": sli, "goal": goal}}
