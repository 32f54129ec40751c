"""Reading SLO files of every format: slo-generator's (opsctl.slo.model), OpenSLO v1
(opsctl.slo.openslo), Sloth's service files and CRD (opsctl.slo.sloth) and Pyrra's
ServiceLevelObjective (opsctl.slo.pyrra). It sits above them all, so that none imports another."""

from __future__ import annotations

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
        kinds = [_format(d) for d in docs]
        if any(k != "slo-generator" for k in kinds):  # told apart by apiVersion / kind / version
            for i, (kind, doc) in enumerate(zip(kinds, docs)):
                where = str(path) if len(docs) == 1 else f"{path}: document {i + 1}"
                if kind == "slo-generator" and isinstance(doc, dict) and doc.get("apiVersion") == "sre.google.com/v2":
                    problems.append(f"{where}: (top level): slo-generator's format holds one SLO per file:"
                                    " move it to a file of its own")
                elif kind == "slo-generator":
                    what = repr(doc.get("apiVersion")) if isinstance(doc, dict) else "not a mapping"
                    problems.append(f"{where}: apiVersion: not an SLO format opsctl reads ({what}): it reads"
                                    f" {', '.join(FORMATS)}")
                else:
                    found[kind].append((str(path), where, doc))
        elif len(docs) != 1:
            problems.append(f"{path}: (top level): a slo-generator SLO file holds one document, got {len(docs)}")
        else:
            slo = _validate(docs[0], str(path), known, problems)
            if slo:
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


FORMATS = ("sre.google.com/v2 (slo-generator)", "openslo/v1", "version: prometheus/v1 and sloth.slok.dev/v1 (Sloth)",
           "pyrra.dev/v1alpha1 (Pyrra)")


# What names each format, read here so that telling files apart imports no reader (Sloth's and
# Pyrra's cost about 11 ms each): the same values as sloth.SERVICE_VERSION, sloth.CRD_API_VERSION
# and pyrra.API_VERSION (tests/slo/test_loading_lazy.py holds them equal).
SLOTH_VERSION = "prometheus/v1"
SLOTH_API_VERSION = "sloth.slok.dev/v1"
PYRRA_API_VERSION = "pyrra.dev/v1alpha1"


def _format(doc: object) -> str:
    """Which tool's SLO document this is, by its apiVersion (or Sloth's `version`)."""
    if not isinstance(doc, dict):
        return "slo-generator"
    api = doc.get("apiVersion")
    if str(api or "").startswith("openslo/"):
        return "openslo"
    if doc.get("version") == SLOTH_VERSION or api == SLOTH_API_VERSION:
        return "sloth"
    if api == PYRRA_API_VERSION:
        return "pyrra"
    return "slo-generator"


def _items(docs: list[Any]) -> list[Any]:
    """A Kubernetes `List` (kind: List, or a *List kind with items) counts as its items."""
    out = []
    for doc in docs:
        if (isinstance(doc, dict) and isinstance(doc.get("items"), list) and str(doc.get("kind", "")).endswith("List")
                and all(_format(item) in ("sloth", "pyrra") for item in doc["items"])):
            out.extend(doc["items"])
        else:
            out.append(doc)
    return out
