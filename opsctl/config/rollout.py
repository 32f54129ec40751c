"""Settings for rollouts: the flagd experiment gate (`traffic.flagd`)."""

from __future__ import annotations

import re

from opsctl.model import Model


class FlagdConfigMap(Model):
    name: str
    key: str = "flags.flagd.json"
    namespace: str | None = None  # default: traffic.kubernetes.namespace


class FlagdSettings(Model):
    """`traffic.actuator: flagd`: the split as a flagd flag (variants = backends, `fractional` on the
    user's targeting key), in a file (`path`, relative to the state dir) or a ConfigMap key."""

    flag: str = "llm-backend"
    path: str | None = None  # default traffic/flags.flagd.json under the state dir (when no configmap)
    configmap: FlagdConfigMap | None = None

    def __post_init__(self) -> None:
        if self.path is not None and self.configmap is not None:
            raise ValueError("give either path (a file) or configmap, not both")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}", self.flag):
            raise ValueError(f"flag {self.flag!r}: use letters, digits, '.', '_' and '-'")

    @property
    def file_path(self) -> str:
        return self.path or "traffic/flags.flagd.json"
