"""Mode -> environment. An unknown mode is an error, never a fallback (a drill meant to be simulated
must never run against the live systems)."""

from __future__ import annotations

from opsctl.errors import UsageError


def open_environment(mode: str, user_cfg, scenario, run_id: str, run_dir, **kw):
    if mode in ("embedded", "chain"):  # a local chain drill's world is its run directory too
        from opsctl.drills.env.embedded import EmbeddedEnvironment

        return EmbeddedEnvironment(user_cfg, scenario, run_id, run_dir, **kw)
    if mode in ("live", "live-chain"):  # a live chain drill's faults are live faults
        from opsctl.drills.env.live import LiveEnvironment

        return LiveEnvironment(user_cfg, scenario, run_id, run_dir)
    raise UsageError(f"unknown drill mode {mode!r} (known: embedded, live, chain, live-chain)")
