"""The binaries a chain drill runs, found on PATH with a clear error when one is missing."""

from __future__ import annotations

import shutil

from opsctl.errors import OpsctlError

# name -> (alternative names, how to install it)
BINARIES = {
    "prometheus": ((), "apt-get install prometheus, or a release from prometheus.io"),
    "promtool": ((), "apt-get install prometheus (promtool ships with it)"),
    "alertmanager": (("prometheus-alertmanager",), "apt-get install prometheus-alertmanager"),
}


class MissingBinary(OpsctlError):
    """A binary the chain drill starts is not installed (exit 1: the drill cannot run)."""


def find_binary(name: str) -> str:
    alternatives, install = BINARIES[name]
    for candidate in (name, *alternatives):
        path = shutil.which(candidate)
        if path:
            return path
    tried = " or ".join((name, *alternatives))
    raise MissingBinary(f"a chain drill needs {tried} on PATH and found none",
                        hint=f"install it ({install}) or add its directory to PATH")


def find_all() -> dict[str, str]:
    """Every binary, or one error naming all that are missing."""
    found, missing = {}, []
    for name in BINARIES:
        try:
            found[name] = find_binary(name)
        except MissingBinary:
            missing.append(name)
    if missing:
        raise MissingBinary(f"a chain drill needs {', '.join(missing)} on PATH",
                            hint="; ".join(f"{n}: {BINARIES[n][1]}" for n in missing))
    return found
