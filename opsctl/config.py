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


@dataclass(frozen=True)
class SeverityAlerting:
    """How one severity's burn-rate alerts behave: `for:` and the minimum-traffic guard."""

    for_duration: str  # Prometheus `for:`: the condition must hold this long before the alert fires
    min_request_rate: float  # valid events per second over the pair's short window, below which it never fires

    def __post_init__(self):
        from opsctl.clock import parse_duration

        if not 0 <= parse_duration(self.for_duration) <= 86400:
            raise ValueError("for_duration must be between 0s and 1d")
        if not 0 <= self.min_request_rate < 1e6:
            raise ValueError("min_request_rate must be >= 0 (requests per second)")

    @property
    def for_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.for_duration)


@dataclass(frozen=True)
class PrometheusRuleMeta:
    """metadata of the PrometheusRule manifest (`opsctl slo rules --format prometheusrule`)."""

    name: str = "opsctl-slo-burn-rate"
    namespace: str = "monitoring"
    labels: dict[str, str] = field(default_factory=dict)  # what prometheus-operator's ruleSelector matches

    def __post_init__(self):
        import re

        for what, value in (("name", self.name), ("namespace", self.namespace)):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", value):
                raise ValueError(f"{what} must be a Kubernetes name (lower case, digits, - and .), got {value!r}")


@dataclass(frozen=True)
class AlertingConfig:
    """Burn-rate alerting: the generated Prometheus rules and the in-process evaluation share it."""

    # Rule evaluation interval: each group's `interval:` and the in-process `for:` steps.
    evaluation_interval: str = "1m"
    runbook_base_url: str = "https://runbooks.example.com/llm-inference"
    rule_group_prefix: str = "opsctl-slo"
    labels: dict[str, str] = field(default_factory=dict)  # extra labels on every alert, e.g. team
    page: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("2m", 1.0))
    ticket: SeverityAlerting = field(default_factory=lambda: SeverityAlerting("15m", 0.1))
    prometheus_rule: PrometheusRuleMeta = field(default_factory=PrometheusRuleMeta)

    def __post_init__(self):
        import re

        from opsctl.clock import parse_duration
        from opsctl.slo.conventions import RESERVED_LABELS

        interval = parse_duration(self.evaluation_interval)
        if not 10 <= interval <= 3600 or interval % 10:
            raise ValueError("evaluation_interval must be a multiple of 10s between 10s and 1h (metrics come every 10s)")
        if not self.runbook_base_url.startswith(("http://", "https://")):
            raise ValueError(f"runbook_base_url must start with http:// or https:// (got {self.runbook_base_url!r})")
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", self.rule_group_prefix):
            raise ValueError(f"rule_group_prefix must be letters, digits, _ . : -, got {self.rule_group_prefix!r}")
        for name in self.labels:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", name) or name.startswith("__"):
                raise ValueError(f"labels: {name!r} is not a Prometheus label name")
            if name in RESERVED_LABELS:
                raise ValueError(f"labels: {name!r} is set by opsctl on every alert and cannot be overridden")

    @property
    def interval_seconds(self) -> int:
        from opsctl.clock import parse_duration

        return parse_duration(self.evaluation_interval)

    def severity(self, name: str) -> SeverityAlerting:
        return {"page": self.page, "ticket": self.ticket}[name]


@dataclass(frozen=True)
class Config:
    service: str
    backends: dict[str, Backend]
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    slos: SloConfig = field(default_factory=SloConfig)
    alerting: AlertingConfig = field(default_factory=AlertingConfig)
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
        return yaml.safe_load(text)
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
