"""Publish SLO reports through slo-generator's own exporters (`opsctl slo report --export FILE`).

FILE is slo-generator's shared-config format, so a team's existing file works as it is: its
`exporters:` mapping (name -> settings, `${VAR}` replaced from the environment) and, when present,
`default_exporters:` (which of them to use; otherwise all). Other sections (backends, error budget
policies) are slo-generator's business and are ignored here.

Two of its exporters are supported, the ones whose dependencies opsctl ships and tests against
loopback servers: `prometheus` (Pushgateway, one push per metric per report; prometheus_client's
30 s timeout per push) and `cloudevent` (one structured CloudEvent POST per report, 10 s timeout).
Names take slo-generator's `kind/instance` form (`prometheus/staging`). An unknown kind, a missing
or unknown field is an error naming the file and key path (exit 2); slo-generator itself would
log it and carry on. Values are never echoed: they may be credentials.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from opsctl.errors import ConfigError, OpsctlError

# kind -> (slo-generator's class name, required fields, optional fields)
KINDS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "prometheus": ("Prometheus", ("url",), ("job", "username", "password", "metrics")),
    "cloudevent": ("Cloudevent", ("service_url",), ("auth",)),
}
_ENV = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class Exporter:
    name: str
    settings: dict[str, Any]  # slo-generator's exporter config, `name` and `class` included

    @property
    def kind(self) -> str:
        return self.name.split("/")[0]


def load_exporters(path: str | Path, env: Mapping[str, str] | None = None) -> list[Exporter]:
    """The exporters FILE configures, validated; every problem at once."""
    from opsctl.config import load_yaml_file

    path = Path(path)
    data = load_yaml_file(path, "exporters file")
    variables: Mapping[str, str] = os.environ if env is None else env
    if not isinstance(data, dict) or not isinstance(data.get("exporters"), dict) or not data["exporters"]:
        raise ConfigError(f"{path}: exporters: expected a mapping of exporter name -> settings"
                          " (slo-generator's shared-config format)")
    problems: list[str] = []
    configured = data["exporters"]
    chosen = data.get("default_exporters")
    if chosen is None:
        chosen = list(configured)
    elif not isinstance(chosen, list) or not all(isinstance(n, str) for n in chosen):
        problems.append("default_exporters: expected a list of exporter names")
        chosen = []
    else:
        problems += [f"default_exporters: {n!r} is not under exporters:" for n in chosen if n not in configured]
    exporters = []
    for name in dict.fromkeys(n for n in chosen if n in configured):
        exporter = _exporter(str(name), configured[name], variables, problems)
        if exporter:
            exporters.append(exporter)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    return exporters


def _exporter(name: str, raw: object, env: Mapping[str, str], problems: list[str]) -> Exporter | None:
    where = f"exporters.{name}"
    kind = name.split("/")[0]
    if kind not in KINDS:
        problems.append(f"{where}: opsctl publishes through slo-generator's {' and '.join(KINDS)} exporters,"
                        f" not {kind!r}")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a mapping of settings")
        return None
    cls, required, optional = KINDS[kind]
    before = len(problems)
    problems += [f"{where}.{k}: required" for k in required if raw.get(k) in (None, "")]
    problems += [f"{where}.{k}: unknown field (known: {', '.join(required + optional)})"
                 for k in raw if k not in required + optional]
    settings = _substitute(raw, env, where, problems)
    for key in ("url", "service_url"):
        value = settings.get(key)
        if isinstance(value, str) and value and not value.startswith(("http://", "https://")):
            problems.append(f"{where}.{key}: expected an http:// or https:// URL")
    auth = settings.get("auth")
    if kind == "cloudevent" and auth is not None and not (isinstance(auth, dict) and set(auth) <= {
            "token", "google_service_account_auth"}):
        problems.append(f"{where}.auth: expected a mapping with token or google_service_account_auth")
    if len(problems) > before:
        return None
    return Exporter(name, {**settings, "name": name, "class": cls})


def _substitute(value: Any, env: Mapping[str, str], where: str, problems: list[str]) -> Any:
    """slo-generator's `${VAR}` references, replaced from the environment; an unset one is named."""
    if isinstance(value, dict):
        return {k: _substitute(v, env, f"{where}.{k}", problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, env, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    if isinstance(value, str):
        for var in _ENV.findall(value):
            if var not in env:
                problems.append(f"{where}: environment variable {var} is not set")
                return value
        return _ENV.sub(lambda m: env[m.group(1)], value)
    return value


def publish(reports: dict[str, dict[str, dict[str, Any]]], exporters: list[Exporter]) -> int:
    """Send every report (SLO -> window -> slo-generator report) through every exporter, as
    slo-generator's `compute.export` sends them; returns the number of reports sent. The first
    failure stops the run (exit 1) naming the exporter, SLO and window."""
    from slo_generator.compute import export

    logging.getLogger("slo_generator").setLevel(logging.CRITICAL)
    sent = 0
    for slo, windows in reports.items():
        for window, report in windows.items():
            for exporter in exporters:
                try:
                    export(report, [dict(exporter.settings)], raise_on_error=True)
                except Exception as exc:  # any exporter error: its client's own exceptions
                    raise OpsctlError(f"export of {slo} over {window} through {exporter.name} failed:"
                                      f" {' '.join(str(exc).split()) or type(exc).__name__}") from exc
            sent += 1
    return sent
