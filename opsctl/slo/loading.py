"""Reading SLO files of every format: slo-generator's (opsctl.slo.model), OpenSLO v1, v1alpha and
v2alpha (opsctl.slo.openslo), Sloth's service files and CRD (opsctl.slo.sloth) and Pyrra's
ServiceLevelObjective (opsctl.slo.pyrra). It sits above them all, so that none imports another.

Each document is recognised by its own markers before it is validated (`recognise`): a rule
file (Sloth's or Pyrra's generated rules among them), another tool's version or an unknown one is
refused in one line. Every SLO's queries are then parsed as PromQL Prometheus loads
(opsctl.slo.promql_check): one query that cannot load would make the whole rule file fail."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from opsctl.errors import ConfigError
from opsctl.config.loading import yaml_files
from opsctl.slo.model import SloDefinition
from opsctl.slo.model_parse import _validate

if TYPE_CHECKING:
    from opsctl.config import Config


def load_slos(paths: Iterable[str | Path], backends: Iterable[str], *,
              config: Config | None = None) -> list[SloDefinition]:
    """Load and validate SLO files, slo-generator's, OpenSLO v1, Sloth's and Pyrra's (told apart by
    `apiVersion`, or Sloth's `version`); every problem in every file is reported before failing.

    OpenSLO references (`indicatorRef`, `metricSourceRef`, ...) resolve across all the files read.
    With `config`, an OpenSLO time window must equal its `slos.period` and alert conditions must
    be among the burn-rate alerts its `alerting:` generates (see opsctl.slo.openslo).
    """
    from opsctl.slo import openslo

    known = set(backends)
    files = yaml_files(paths, "SLO")
    problems: list[str] = []
    slos: list[SloDefinition] = []
    found: dict[str, list[tuple[str, str, Any]]] = {"openslo": [], "sloth": [], "pyrra": []}
    for path in files:
        try:
            docs = _items(openslo.read_documents(path))
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        for i, doc in enumerate(docs):  # each told apart by its own markers before it is validated
            where = str(path) if len(docs) == 1 else f"{path}: document {i + 1}"
            kind, refusal = recognise(doc)
            if refusal is not None:
                problems.append(f"{where}: {refusal}")
            elif kind != "slo-generator":
                found[kind].append((str(path), where, doc))
            elif len(docs) != 1:
                problems.append(f"{where}: (top level): slo-generator's format holds one SLO per file:"
                                " move it to a file of its own")
            elif (slo := _validate(doc, str(path), known, problems)) is not None:
                slos.append(slo)
    if found["openslo"]:
        slos.extend(openslo.load(found["openslo"], known, config, problems))
    if found["sloth"]:  # Sloth's and Pyrra's readers load only when a file's apiVersion names them
        from opsctl.slo import sloth

        slos.extend(sloth.load(found["sloth"], known, problems))
    if found["pyrra"]:
        from opsctl.slo import pyrra

        period = config.slos.period_seconds if config is not None else None
        slos.extend(pyrra.load(found["pyrra"], known, period, problems))
    slos = [slo for slo in slos if not _promql_problem(slo, problems)]
    if not files:
        problems.append("no SLO files found in " + ", ".join(str(p) for p in paths))
    elif not slos and not problems:
        problems.append("no SLOs in " + ", ".join(str(p) for p in paths) + " (OpenSLO files there hold no kind: SLO)")
    names: dict[str, str] = {}
    for slo in slos:
        if slo.name in names:
            problems.append(f"{slo.file}: metadata.name: {slo.name!r} is also defined in {names[slo.name]}")
        names[slo.name] = slo.file
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) in SLO files", problems=problems)
    return slos


FORMATS = ("sre.google.com/v2 (slo-generator)", "openslo/v1, openslo/v1alpha and openslo.com/v2alpha (OpenSLO)",
           "version: prometheus/v1 and sloth.slok.dev/v1 (Sloth)", "pyrra.dev/v1alpha1 (Pyrra)")


# What names each format, read here so that telling files apart imports no reader (Sloth's and
# Pyrra's cost about 11 ms each): the same values as sloth.SERVICE_VERSION, sloth.CRD_API_VERSION
# and pyrra.API_VERSION (tests/slo/test_loading_lazy.py holds them equal).
SLOTH_VERSION = "prometheus/v1"
SLOTH_API_VERSION = "sloth.slok.dev/v1"
PYRRA_API_VERSION = "pyrra.dev/v1alpha1"
SLO_GENERATOR_API_VERSION = "sre.google.com/v2"
OPENSLO_VERSIONS = ("openslo/v1", "openslo/v1alpha", "openslo.com/v2alpha")


def recognise(doc: object) -> tuple[str, str | None]:
    """(format, None) for a document of a format opsctl reads, told apart by its own markers
    (apiVersion, kind, Sloth's `version`, and the shape Pyrra's file loader reads, which ignores
    apiVersion); ("", the one-line reason) for anything else, so a file is never validated as a
    format it is not (docs/decisions/0451-formats-by-their-markers.md)."""
    if not isinstance(doc, dict):
        return "slo-generator", None  # its validation says a file must be a mapping
    api, kind, version = doc.get("apiVersion"), doc.get("kind"), doc.get("version")
    api_text = str(api or "")
    raw_spec = doc.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    if ("groups" in doc and api is None and kind is None) or kind == "PrometheusRule" or (
            kind is None and api_text.startswith("monitoring.coreos.com/")):
        return "", f"(top level): {_rules_of(doc)}, not an SLO: opsctl reads SLO files ({', '.join(FORMATS)}) and" \
                   " writes the rules itself (`opsctl slo rules`)"
    if api_text in OPENSLO_VERSIONS or api_text.startswith("openslo/"):
        return "openslo", None  # an unknown openslo/ version is refused there, naming the versions read
    if api_text.startswith("openslo.com/"):
        return "", (f"apiVersion: {api_text!r} is not an OpenSLO version opsctl reads (it reads"
                    f" {', '.join(OPENSLO_VERSIONS)}){' (osko writes openslo.com/v1)' if api_text == 'openslo.com/v1' else ''}")
    if version is not None and api is None:
        if version == SLOTH_VERSION:
            return "sloth", None
        return "", (f"version: {version!r} is not a Sloth spec version opsctl reads ({SLOTH_VERSION}; Sloth itself"
                    " reads no other)" if str(version).startswith("prometheus/") else
                    f"version: {version!r}: not an SLO format opsctl reads ({', '.join(FORMATS)})")
    if api == SLOTH_API_VERSION:
        return "sloth", None
    if api_text.startswith("sloth.slok.dev/"):
        return "", f"apiVersion: {api_text!r} is not a Sloth version opsctl reads ({SLOTH_API_VERSION})"
    if api == PYRRA_API_VERSION or (api != SLO_GENERATOR_API_VERSION and "indicator" in spec and (
            "target" in spec or "window" in spec)):
        return "pyrra", None  # Pyrra's loader reads the shape whatever the apiVersion (`v1alpha1` too)
    if api == SLO_GENERATOR_API_VERSION or ((api is None or api_text.startswith("sre.google.com/"))
                                            and "service_level_indicator" in spec):  # its shape: its problems
        return "slo-generator", None
    if api_text.startswith("sre.google.com/"):
        return "", f"apiVersion: {api_text!r} is not a slo-generator version opsctl reads ({SLO_GENERATOR_API_VERSION})"
    what = ", ".join(f"{k} {v!r}" for k, v in (("apiVersion", api), ("kind", kind)) if v is not None)
    return "", (f"(top level): not an SLO format opsctl reads ({what or 'no apiVersion, kind or version'}):"
                f" it reads {', '.join(FORMATS)}")


def _rules_of(doc: dict[str, Any]) -> str:
    """Whose generated rules a rule document holds, by their own names (Sloth's groups, Pyrra's records)."""
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else doc
    groups = spec.get("groups") if isinstance(spec, dict) else None
    names, records = [], []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict):
            names.append(str(group.get("name", "")))
            records += [str(r.get("record", "")) for r in group.get("rules") or [] if isinstance(r, dict)]
    what = "a PrometheusRule manifest" if doc.get("kind") == "PrometheusRule" else "a Prometheus rule file"
    if any(n.startswith("sloth-slo-") for n in names):
        return f"{what} of Sloth's generated rules"
    if any(re.search(r":burnrate[0-9]+[smhdw]$|:increase[0-9]+[smhdw]$", r) for r in records):
        return f"{what} of Pyrra's generated rules"
    return what


def _promql_problem(slo: SloDefinition, problems: list[str]) -> bool:
    """Whether a query of the SLO would not load into Prometheus, the first one added to `problems`
    (one line per SLO: one such query makes the whole rule file fail to load)."""
    from opsctl.slo.promql_check import problem

    for role, query in slo.queries("5m").items():
        if (why := problem(query)) is not None:
            problems.append(f"{slo.file}: {slo.key_of(role)}: SLO {slo.name!r}: not PromQL Prometheus loads: {why}"
                            f" (in {query!r})")
            return True
    return False


def _items(docs: list[Any]) -> list[Any]:
    """A Kubernetes `List` (kind: List, or a *List kind with items) counts as its items."""
    out = []
    for doc in docs:
        if (isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List")
                and all(recognise(item)[0] in ("sloth", "pyrra") for item in doc["items"])):
            out.extend(doc["items"])
        else:
            out.append(doc)
    return out
