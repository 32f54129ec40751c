"""opsctl.yaml -> typed, validated models. The only module that handles raw dicts.

Each section is a frozen dataclass; `_build` checks types, ranges and unknown keys against the
annotations and reports every problem with the file and the key path (`metrics.prometheus.timeout`).
Dataclasses rather than pydantic keep `opsctl --help` and `opsctl traffic status` fast to start.

Where the config comes from, first match wins: `--config PATH`, `$OPSCTL_CONFIG`, `./opsctl.yaml`,
else the built-in embedded default (state under `./.opsctl/`).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from opsctl.errors import ConfigError

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"
BUILTIN_CONFIG = DEFAULTS_DIR / "opsctl.yaml"


# ---------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class SecretRef:
    """Where a secret lives: an environment variable or a file. The value is never in the config."""

    env: str | None = None
    file: str | None = None

    def __post_init__(self):
        if bool(self.env) == bool(self.file):
            raise ValueError("give exactly one of 'env' or 'file'")

    def resolve(self) -> str:
        from opsctl.errors import UsageError

        if self.env:
            value = os.environ.get(self.env)
            if not value:
                raise UsageError(f"secret environment variable {self.env} is not set")
            return value.strip()
        try:
            return Path(self.file).read_text().strip()
        except OSError as exc:
            raise UsageError(f"cannot read secret file {self.file}: {exc.strerror}") from exc

    def describe(self) -> str:
        return f"env:{self.env}" if self.env else f"file:{self.file}"


@dataclass(frozen=True)
class Backend:
    """One place the model runs. `kind` is internal (our GPU pods) or vendor (a serving endpoint)."""

    kind: Literal["internal", "vendor"]
    description: str = ""
    vendor: str | None = None


@dataclass(frozen=True)
class PrometheusAuth:
    bearer_token: SecretRef | None = None
    username: str | None = None
    password: SecretRef | None = None

    def __post_init__(self):
        if self.bearer_token and (self.username or self.password):
            raise ValueError("use either bearer_token or username/password, not both")
        if bool(self.username) != bool(self.password):
            raise ValueError("basic auth needs both username and password")


@dataclass(frozen=True)
class PrometheusSource:
    url: str = "http://127.0.0.1:9090"
    timeout: float = 10.0
    auth: PrometheusAuth = field(default_factory=PrometheusAuth)
    max_concurrency: int = 4
    report_deadline: float = 60.0
    verify_tls: bool = True

    def __post_init__(self):
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        if not 0 < self.timeout <= 600:
            raise ValueError("timeout must be between 0 and 600 seconds")
        if not 1 <= self.max_concurrency <= 64:
            raise ValueError("max_concurrency must be between 1 and 64")
        if self.report_deadline <= 0:
            raise ValueError("report_deadline must be positive")


@dataclass(frozen=True)
class MetricsConfig:
    source: Literal["embedded", "prometheus"] = "embedded"
    prometheus: PrometheusSource = field(default_factory=PrometheusSource)


@dataclass(frozen=True)
class SloConfig:
    dir: str = "slos"
    period: str = "28d"

    def __post_init__(self):
        from opsctl.clock import parse_duration

        seconds = parse_duration(self.period)
        if not 86400 <= seconds <= 400 * 86400:
            raise ValueError("period must be between 1d and 400d")

    @property
    def period_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.period)


# ---------------------------------------------------------------------------------------------
# Traffic control, capacity and freezes


def _check_duration(value: str, what: str, *, minimum: int = 0) -> int:
    from opsctl.clock import parse_duration

    seconds = parse_duration(value)
    if seconds < minimum:
        raise ValueError(f"{what} must be at least {minimum}s")
    return seconds


@dataclass(frozen=True)
class KubernetesSettings:
    """How opsctl reaches the cluster: an explicit `host` (e.g. `kubectl proxy`), a kubeconfig, or in-cluster."""

    host: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = "default"
    timeout: float = 10.0

    def __post_init__(self):
        if self.host and not self.host.startswith(("http://", "https://")):
            raise ValueError(f"host must start with http:// or https:// (got {self.host!r})")
        if self.host and self.kubeconfig:
            raise ValueError("give either host or kubeconfig, not both")
        if not 0 < self.timeout <= 300:
            raise ValueError("timeout must be between 0 and 300 seconds")


@dataclass(frozen=True)
class FileActuatorSettings:
    path: str = "traffic/split.json"  # relative paths resolve under state_dir


@dataclass(frozen=True)
class ConfigMapSettings:
    name: str = "grammar-traffic-split"
    key: str = "split.json"
    namespace: str | None = None  # default: traffic.kubernetes.namespace


@dataclass(frozen=True)
class IstioSettings:
    name: str = "llm-inference"  # the VirtualService
    namespace: str | None = None
    route: str | None = None  # spec.http[].name; default: the first HTTP route
    api_version: Literal["v1", "v1beta1", "v1alpha3"] = "v1"


@dataclass(frozen=True)
class GatewayApiSettings:
    name: str = "llm-inference"  # the HTTPRoute
    namespace: str | None = None
    rule: int = 0  # index into spec.rules
    api_version: Literal["v1", "v1beta1"] = "v1"

    def __post_init__(self):
        if self.rule < 0:
            raise ValueError("rule must be a rule index (0 or more)")


@dataclass(frozen=True)
class Destination:
    """Where one backend's requests go: Istio destination host, or Gateway API backendRef (a Service) name."""

    host: str
    port: int | None = None
    subset: str | None = None  # Istio only
    namespace: str | None = None  # Gateway API only

    def __post_init__(self):
        if not self.host:
            raise ValueError("host must not be empty")
        if self.port is not None and not 1 <= self.port <= 65535:
            raise ValueError(f"port must be between 1 and 65535 (got {self.port})")


@dataclass(frozen=True)
class RateLimit:
    """Flap damping: at most `max_changes` traffic operations per `window` (a ramp counts once)."""

    max_changes: int = 6
    window: str = "1h"

    def __post_init__(self):
        if not 1 <= self.max_changes <= 1000:
            raise ValueError("max_changes must be between 1 and 1000")
        _check_duration(self.window, "window", minimum=1)

    @property
    def window_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.window)


@dataclass(frozen=True)
class RampDefaults:
    step: int = 10  # percentage points per step
    interval: str = "5m"  # wait between steps, then check the receiving backend's burn rate

    def __post_init__(self):
        if not 1 <= self.step <= 100:
            raise ValueError("step must be between 1 and 100")
        _check_duration(self.interval, "interval")


@dataclass(frozen=True)
class TrafficConfig:
    actuator: Literal["file", "configmap", "istio", "gateway-api"] = "file"
    # The split before anything was stored (file actuator); must name configured backends and sum to 100.
    default_split: dict[str, int] = field(default_factory=dict)
    file: FileActuatorSettings = field(default_factory=FileActuatorSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    configmap: ConfigMapSettings = field(default_factory=ConfigMapSettings)
    istio: IstioSettings = field(default_factory=IstioSettings)
    gateway_api: GatewayApiSettings = field(default_factory=GatewayApiSettings)
    destinations: dict[str, Destination] = field(default_factory=dict)
    rate_limit: RateLimit = field(default_factory=RateLimit)
    ramp: RampDefaults = field(default_factory=RampDefaults)
    # A write that meets a concurrent change (file version moved, 409 Conflict) re-reads, re-plans and
    # re-checks its guards, up to this many attempts in all; then exit 5.
    conflict_attempts: int = 5

    def __post_init__(self):
        if not 1 <= self.conflict_attempts <= 20:
            raise ValueError("conflict_attempts must be between 1 and 20")


@dataclass(frozen=True)
class CapacityConfig:
    """The internal backend's capacity: ready replicas x rps_per_replica must carry its share x (1 + headroom).

    `source: kubernetes` reads (and scales, through the scale subresource) a Deployment; `source: static`
    takes `replicas` as the ready count and never scales (the embedded environment has no cluster).
    """

    backend: str
    rps_per_replica: float
    source: Literal["kubernetes", "static"] = "kubernetes"
    namespace: str | None = None  # default: traffic.kubernetes.namespace
    deployment: str | None = None
    replicas: int | None = None  # static only
    headroom: float = 0.2
    max_replicas: int = 1
    ready_timeout: str = "10m"
    poll_interval: str = "5s"
    rate_window: str = "5m"  # request rate = sum(rate(llm_proxy_requests_total[rate_window]))

    def __post_init__(self):
        if self.rps_per_replica <= 0:
            raise ValueError("rps_per_replica must be positive")
        if not 0 <= self.headroom <= 10:
            raise ValueError("headroom must be between 0 and 10 (0.2 = keep 20% spare)")
        if self.max_replicas < 0:
            raise ValueError("max_replicas must not be negative")
        if self.source == "kubernetes" and not self.deployment:
            raise ValueError("source kubernetes needs deployment (the internal backend's Deployment name)")
        if self.source == "static" and self.replicas is None:
            raise ValueError("source static needs replicas (the ready replica count)")
        if self.replicas is not None and self.replicas < 0:
            raise ValueError("replicas must not be negative")
        _check_duration(self.ready_timeout, "ready_timeout")
        _check_duration(self.poll_interval, "poll_interval", minimum=0)
        _check_duration(self.rate_window, "rate_window", minimum=10)


@dataclass(frozen=True)
class FreezeWindow:
    """A change freeze: a fixed range (`start`/`end`, local times in `timezone`) or `cron` plus `duration`."""

    name: str
    timezone: str = "UTC"
    start: str | None = None
    end: str | None = None
    cron: str | None = None
    duration: str | None = None
    reason: str = ""

    def __post_init__(self):
        from opsctl.freeze import validate_window

        validate_window(self)


@dataclass(frozen=True)
class Config:
    service: str
    backends: dict[str, Backend]
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    slos: SloConfig = field(default_factory=SloConfig)
    traffic: TrafficConfig = field(default_factory=TrafficConfig)
    capacity: CapacityConfig | None = None
    freezes: list[FreezeWindow] = field(default_factory=list)
    state_dir: str = ".opsctl"
    # Where the config came from, and the directory relative paths resolve against.
    source_path: str = field(default="<built-in>", metadata={"internal": True})
    base_dir: str = field(default=".", metadata={"internal": True})

    def __post_init__(self):
        if not self.backends:
            raise ValueError("backends: at least one backend is required")
        for name in self.backends:
            if not name.replace("-", "").replace("_", "").isalnum() or name == "all":
                raise ValueError(f"backends: invalid backend name {name!r} (letters, digits, - and _; 'all' is reserved)")
        self._check_traffic()

    def _check_traffic(self) -> None:
        """Cross-section checks: traffic, capacity and freezes must name configured backends."""
        known = ", ".join(sorted(self.backends))
        split = self.traffic.default_split
        for name, weight in split.items():
            if name not in self.backends:
                raise ValueError(f"traffic.default_split: unknown backend {name!r} (known: {known})")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
                raise ValueError(f"traffic.default_split.{name}: weight must be an integer from 0 to 100")
        if split and sum(split.values()) != 100:
            raise ValueError(f"traffic.default_split: weights must sum to 100 (they sum to {sum(split.values())})")
        for name in self.traffic.destinations:
            if name not in self.backends:
                raise ValueError(f"traffic.destinations: unknown backend {name!r} (known: {known})")
        if self.traffic.actuator in ("istio", "gateway-api"):
            missing = sorted(set(self.backends) - set(self.traffic.destinations))
            if missing:
                raise ValueError(
                    f"traffic.destinations: actuator {self.traffic.actuator} needs a destination for every backend"
                    f" (missing: {', '.join(missing)})"
                )
        if self.capacity is not None:
            backend = self.backends.get(self.capacity.backend)
            if backend is None:
                raise ValueError(f"capacity.backend: unknown backend {self.capacity.backend!r} (known: {known})")
            if backend.kind != "internal":
                raise ValueError(f"capacity.backend: {self.capacity.backend!r} is a vendor backend; capacity models our own pods")
        names = [w.name for w in self.freezes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"freezes: duplicate freeze name(s): {', '.join(duplicates)}")

    def path(self, value: str) -> Path:
        """Resolve a path from the config against the config file's directory."""
        p = Path(os.path.expanduser(value))
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def slo_dir(self) -> Path:
        return self.path(self.slos.dir)

    @property
    def state_path(self) -> Path:
        return self.path(self.state_dir)

    @property
    def audit_path(self) -> Path:
        return self.state_path / "audit.jsonl"

    def backend(self, name: str) -> Backend:
        try:
            return self.backends[name]
        except KeyError:
            known = ", ".join(sorted(self.backends))
            raise ConfigError(f"unknown backend {name!r} (known: {known})") from None


# ---------------------------------------------------------------------------------------------
# Loading


def find_config_path(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("OPSCTL_CONFIG")
    if env:
        return Path(env)
    local = Path("opsctl.yaml")
    return local if local.is_file() else None


def load_config(explicit: str | None = None) -> Config:
    path = find_config_path(explicit)
    if path is None:
        # The built-in default keeps its SLOs in the package, its state in ./.opsctl.
        cfg = load_config_file(BUILTIN_CONFIG)
        return dataclasses.replace(
            cfg, source_path="<built-in>", state_dir=str(Path.cwd() / cfg.state_dir)
        )
    return load_config_file(path)


def load_yaml_file(path: Path, what: str = "file") -> Any:
    """Parse a YAML file; syntax errors name the file and line."""
    import yaml

    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from exc
    try:
        # libyaml's loader when present: ~10x faster, which the CLI's fast paths (traffic set reads
        # the SLO files for its budget guard) notice.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: YAML syntax error at {where}: {problem}") from exc


def load_config_file(path: Path) -> Config:
    data = load_yaml_file(path, "config file")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of sections, got {type(data).__name__}")
    data = dict(data)
    data["source_path"] = str(path)
    data["base_dir"] = str(path.resolve().parent)
    return build(Config, data, str(path))


def build(cls: type, data: Any, filename: str):
    """Build dataclass `cls` from raw data, collecting every problem before failing."""
    problems: list[str] = []
    result = _build(cls, data, "", problems)
    if problems:
        raise ConfigError(f"{filename}: invalid configuration", problems=[f"{filename}: {p}" for p in problems])
    return result


def _where(path: str) -> str:
    return path or "(top level)"


def _build(tp: Any, value: Any, path: str, problems: list[str]) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _build(options[0], value, path, problems)
        for option in options:
            trial: list[str] = []
            built = _build(option, value, path, trial)
            if not trial:
                return built
        problems.append(f"{_where(path)}: expected {' or '.join(_name(o) for o in options)}, got {_show(value)}")
        return None
    if origin is Literal:
        if value not in args:
            allowed = ", ".join(repr(a) for a in args)
            problems.append(f"{_where(path)}: must be one of {allowed}, got {_show(value)}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, list):
            problems.append(f"{_where(path)}: expected a list, got {_show(value)}")
            return []
        item_tp = args[0] if args else Any
        items = [_build(item_tp, v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
            return {}
        key_tp, val_tp = args if args else (Any, Any)
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append(f"{_where(path)}: keys must be strings, got {k!r}")
                continue
            out[k] = _build(val_tp, v, f"{path}.{k}" if path else k, problems)
        return out
    if dataclasses.is_dataclass(tp):
        return _build_dataclass(tp, value, path, problems)
    if tp is bool:
        if not isinstance(value, bool):
            problems.append(f"{_where(path)}: expected true or false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{_where(path)}: expected an integer, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{_where(path)}: expected a number, got {_show(value)}")
            return value
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            problems.append(f"{_where(path)}: expected a string, got {_show(value)}")
        return value
    raise TypeError(f"unsupported type in config model: {tp!r}")


def _build_dataclass(cls: type, value: Any, path: str, problems: list[str]) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        problems.append(f"{_where(path)}: expected a mapping, got {_show(value)}")
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    public = {n for n, f in fields.items() if not f.metadata.get("internal")}
    for key in value:
        if key not in fields or (key not in public and not (path == "" and cls is Config)):
            known = ", ".join(sorted(public))
            problems.append(f"{path + '.' if path else ''}{key}: unknown key (known keys: {known})")
    kwargs = {}
    before = len(problems)
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in value:
            kwargs[name] = _build(hints[name], value[name], sub, problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: required key is missing")
    if len(problems) > before:
        return None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:
        problems.append(f"{_where(path)}: {exc}")
        return None


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"


# ---------------------------------------------------------------------------------------------
# Rendering (secrets redacted)


def to_dict(obj: Any) -> Any:
    """Model -> plain data for `config show`. SecretRefs show where the secret lives, never a value."""
    if isinstance(obj, SecretRef):
        return {"env": obj.env} if obj.env else {"file": obj.file}
    if dataclasses.is_dataclass(obj):
        return {
            f.name: to_dict(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj
