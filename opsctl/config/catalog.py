"""The service catalog: one install, many services (docs/decisions/0008-the-service-catalog.md).

A catalog is a directory of configs, one per service: `services/<name>.yaml`, the file name equal
to its `service:` (a file without `service:` takes its name), with an optional
`services/_defaults.yaml` deep-merged under each (mappings merge key by key, the service's file
wins; lists and scalars are replaced whole). It is found by `--catalog DIR`, `$OPSCTL_CATALOG`, or
`./services/` when no config file is found (`--config`, `$OPSCTL_CONFIG`, `./opsctl.yaml` win).

Each service's config resolves relative paths against the catalog directory, and keeps apart what
two services would otherwise share:

    state_dir, slos.dir, runbooks.dir     <dir>/<service>/ (state, SLO files, runbooks per service)
    alerting.rule_group_prefix            <prefix>-<service> (default opsctl-slo-<service>)
    automation.leader_election.lease_name <lease_name>-<service>, default opsctl-<service>-serve

and `slos.require_service_matcher` defaults to on: `slo validate` refuses an SLO whose selectors
lack `<metrics.service_label>="<service>"`.

(ConfigMaps of the kubernetes state backend are already named `opsctl-<service>-...`.)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opsctl.errors import ConfigError, NoDataError, UsageError

if TYPE_CHECKING:
    from opsctl.config.root import Config

DEFAULTS_FILE = "_defaults.yaml"
CATALOG_ENV = "OPSCTL_CATALOG"
# A service name is a file name, a directory name and part of Kubernetes object names.
_NAME = re.compile(r"[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?")


def find_catalog_dir(explicit: str | None, *, config_found: bool) -> Path | None:
    """`--catalog DIR`, else `$OPSCTL_CATALOG`, else `./services/` when no config file was found."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CATALOG_ENV)
    if env:
        return Path(env)
    local = Path("services")
    return local if not config_found and local.is_dir() else None


def deep_merge(base: Any, over: Any) -> Any:
    """`over` merged onto `base`: mappings key by key (recursively), anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            out[key] = deep_merge(base[key], value) if key in base else value
        return out
    return over


class Catalog:
    def __init__(self, directory: Path):
        self.dir = Path(directory)
        if not self.dir.is_dir():
            raise ConfigError(f"{self.dir}: no such catalog directory",
                              hint="give --catalog DIR (or $OPSCTL_CATALOG) a directory of <service>.yaml files")
        self.files = {p.stem: p for p in sorted(self.dir.glob("*.yaml"))
                      if p.is_file() and p.name != DEFAULTS_FILE}
        for name, path in self.files.items():
            if not _NAME.fullmatch(name):
                raise ConfigError(f"{path}: {name!r} is not a service name (lower-case letters, digits, - and _,"
                                  " at most 63, starting and ending with a letter or digit)")
        if not self.files:
            raise ConfigError(f"{self.dir}: the catalog has no service (<service>.yaml files)",
                              hint="write one config per service as DIR/<service>.yaml")

    @property
    def names(self) -> list[str]:
        return list(self.files)

    def _read(self, path: Path) -> dict[str, Any]:
        from opsctl.config.cache import cached_parse
        from opsctl.config.loading import parse_yaml, read_text

        data = cached_parse(path, "config", lambda: read_text(path, "config file"), lambda t: parse_yaml(t, path))
        if data is None and path.name == DEFAULTS_FILE:
            return {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the config must be a mapping of sections, got {type(data).__name__}")
        return data

    def _defaults(self) -> dict[str, Any]:
        path = self.dir / DEFAULTS_FILE
        if not path.is_file():
            return {}
        data = self._read(path)
        if "service" in data:
            raise ConfigError(f"{path}: service: belongs in each service's own file, not in the shared defaults")
        return data

    def pick(self, service: str | None) -> str:
        """The service to act on: `service` (exit 3 when the catalog has none of that name), else
        the only one; several without a choice is a usage error naming them."""
        if service:
            if service not in self.files:
                raise NoDataError(f"--service {service}: no such service in the catalog {self.dir}"
                                  f" (known: {', '.join(self.names)})",
                                  hint=f"add {self.dir}/{service}.yaml, or pick one of the known")
            return service
        if len(self.files) == 1:
            return self.names[0]
        raise UsageError(f"the catalog {self.dir} has {len(self.files)} services ({', '.join(self.names)}):"
                         " pick one with --service NAME ($OPSCTL_SERVICE)",
                         hint="read commands also take --all-services")

    def load(self, service: str) -> Config:
        from opsctl.config.root import Config
        from opsctl.model import build

        path = self.files[service]
        own = self._read(path)
        named = own.get("service", service)
        if named != service:
            raise ConfigError(f"{path}: service: {named!r} differs from the file name {service!r}",
                              hint=f"rename the file to {named}.yaml or set service: {service}")
        defaults = self._defaults()
        data = deep_merge(defaults, own)
        data["service"] = service
        data["state_dir"] = _per_service(data.get("state_dir", ".opsctl"), service)
        for section, default in (("slos", "slos"), ("runbooks", "runbooks")):
            part = dict(data.get(section) or {})
            part["dir"] = _per_service(part.get("dir", default), service)
            data[section] = part
        alerting = dict(data.get("alerting") or {})
        alerting["rule_group_prefix"] = f"{alerting.get('rule_group_prefix', 'opsctl-slo')}-{service}"
        data["alerting"] = alerting
        automation = dict(data.get("automation") or {})
        election = dict(automation.get("leader_election") or {})
        dns = service.replace("_", "-")
        election["lease_name"] = f"{election['lease_name']}-{dns}" if "lease_name" in election else f"opsctl-{dns}-serve"
        automation["leader_election"] = election
        data["automation"] = automation
        data["source_path"] = str(path)
        data["catalog"] = str(self.dir)
        data["base_dir"] = str(path.resolve().parent)
        try:
            return build(Config, data, str(path))
        except ConfigError as exc:  # a problem in a key only the shared defaults hold: under that file
            raise _under_their_file(exc, path, own, self.dir / DEFAULTS_FILE, defaults) from None

    def load_all(self) -> list[Config]:
        return [self.load(name) for name in self.names]


def _holds(data: Any, key: str) -> bool:
    """Whether the file's `data` holds the key path `key` ('freezes[0]', 'traffic.file.path'): a
    list is replaced whole, so the file holding the list holds every item."""
    import re

    node = data
    for part in key.split("."):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)", part)
        if m is None or not isinstance(node, dict) or m.group(1) not in node:
            return False
        node = node[m.group(1)]
        if m.group(2):
            return True
    return True


def _under_their_file(exc: ConfigError, path: Path, own: dict[str, Any], defaults_path: Path,
                      defaults: dict[str, Any]) -> ConfigError:
    """`exc` (the merged config's problems, each under the service's file) with each problem whose key
    only the catalog's `_defaults.yaml` holds reported under that file."""
    prefix = f"{path}: "
    moved = []
    for problem in exc.problems:
        rest = problem[len(prefix):] if problem.startswith(prefix) else None
        key = rest.split(":", 1)[0].strip() if rest else ""
        if rest and key and not _holds(own, key) and _holds(defaults, key):
            problem = f"{defaults_path}: {rest}"
        moved.append(problem)
    if moved == list(exc.problems):
        return exc
    where = defaults_path if all(p.startswith(f"{defaults_path}: ") for p in moved) else path
    return ConfigError(f"{where}: invalid configuration", problems=moved, hint=exc.hint)


def _per_service(value: Any, service: str) -> Any:
    return str(Path(value) / service) if isinstance(value, str) and value else value


def find_catalog(config_path: str | None, catalog_dir: str | None) -> Catalog | None:
    """The service catalog to use (opsctl.config.catalog), or None for a single config.

    `--catalog DIR` / `$OPSCTL_CATALOG` name one; `./services/` is one when no config file is found
    (`--config`, `$OPSCTL_CONFIG`, `./opsctl.yaml`). A config file and a catalog at once is refused."""
    from opsctl.config.loading import find_config_path

    catalog_dir = catalog_dir or os.environ.get(CATALOG_ENV) or None
    explicit_config = config_path or os.environ.get("OPSCTL_CONFIG") or None
    if catalog_dir and explicit_config:
        from opsctl.errors import UsageError

        raise UsageError(f"both a config file ({explicit_config}) and a catalog ({catalog_dir}) given",
                         hint="give --config PATH ($OPSCTL_CONFIG) or --catalog DIR ($OPSCTL_CATALOG), not both")
    directory = find_catalog_dir(catalog_dir, config_found=find_config_path(config_path) is not None)
    return Catalog(directory) if directory is not None else None


def load_service_config(config_path: str | None = None, catalog_dir: str | None = None,
                        service: str | None = None) -> Config:
    """The config of `service` (`--service`, `$OPSCTL_SERVICE`): from the catalog when there is one
    (an unknown name is exit 3, several services without a name exit 2), else the single config,
    whose `service:` it must equal (exit 2)."""
    from opsctl.config.loading import load_config

    catalog = find_catalog(config_path, catalog_dir)
    if catalog is not None:
        return catalog.load(catalog.pick(service))
    cfg = load_config(config_path)
    if service and service != cfg.service:
        from opsctl.errors import UsageError

        raise UsageError(f"--service {service}: {cfg.source_path} describes service {cfg.service!r}",
                         hint="pick that config with --config PATH (or $OPSCTL_CONFIG), a catalog with"
                              " --catalog DIR, or drop --service / unset $OPSCTL_SERVICE")
    return cfg
