"""The live Executor: the traffic controller, the pager and the vendor ticket provider.

Wiring only: every decision is the policy engine's (policy.py) and the guards' (traffic).
"""

from __future__ import annotations

from opsctl.errors import UsageError


def open_executor(cfg):
    try:
        import opsctl.traffic.controller  # noqa: F401
    except ImportError:
        raise UsageError(
            "traffic control is not part of this build yet: the live executor cannot act",
            hint="run `opsctl serve --dry-run` (or automation.dry_run: true) until it is",
        ) from None
    raise UsageError("live executor not wired yet")
