"""Reading SLO files of both formats: slo-generator's (opsctl.slo.model) and OpenSLO v1
(opsctl.slo.openslo). It sits above both, so that neither imports the other back."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from opsctl.errors import ConfigError
from opsctl.config.loading import yaml_files
from opsctl.slo.model import SloDefinition, _validate


def load_slos(paths: Iterable[str | Path], backends: Iterable[str], *, config=None) -> list[SloDefinition]:
    """Load and validate SLO files, slo-generator's and OpenSLO v1 (told apart by `apiVersion`);
    every problem in every file is reported before failing.

    OpenSLO references (`indicatorRef`, `metricSourceRef`, ...) resolve across all the files read.
    With `config`, an OpenSLO time window must equal its `slos.period` and alert conditions must
    be among the burn-rate alerts its `alerting:` generates (see opsctl.slo.openslo).
    """
    from opsctl.slo import openslo

    known = set(backends)
    files = yaml_files(paths, "SLO")
    problems: list[str] = []
    slos: list[SloDefinition] = []
    open_docs: list[tuple[str, object]] = []
    for path in files:
        try:
            docs = openslo.read_documents(path)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        if any(openslo.is_openslo(d) for d in docs):
            open_docs.extend((str(path), str(path) if len(docs) == 1 else f"{path}: document {i + 1}", d)
                             for i, d in enumerate(docs))
        elif len(docs) != 1:
            problems.append(f"{path}: (top level): a slo-generator SLO file holds one document, got {len(docs)}")
        else:
            slo = _validate(docs[0], str(path), known, problems)
            if slo:
                slos.append(slo)
    if open_docs:
        slos.extend(openslo.load(open_docs, known, config, problems))
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
