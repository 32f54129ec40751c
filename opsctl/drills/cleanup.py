"""`opsctl drill cleanup`: finish the rollbacks of drills whose process died (kill -9, a crash, a lost
host session), from their persisted state, and write their reports.

A drill still running holds its run lock and is left alone. Cleanup takes the lock itself, so two
cleanups never undo the same drill twice.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Callable

from opsctl.drills.state import RunState, find_run, iter_runs
from opsctl.errors import ConflictError, OpsctlError


def interrupted_runs(user_cfg) -> list[RunState]:
    """Runs that did not finish and whose process is gone."""
    return [r for r in iter_runs(user_cfg.drills_path) if not r.finished and not r.is_running()]


def cleanup(user_cfg, run_id: str | None = None, *, dry_run: bool = False,
            progress: Callable[[str], None] | None = None) -> list[dict]:
    progress = progress or (lambda line: None)
    if run_id:
        state = find_run(user_cfg.drills_path, run_id)
        if state.is_running():
            raise ConflictError(f"drill {state.run_id} is still running (pid {state.data.get('pid')})",
                                hint="stop it with Ctrl-C: its rollbacks run on the way out")
        runs = [state]
    else:
        runs = interrupted_runs(user_cfg)
    return [_one(user_cfg, state, dry_run, progress) for state in runs]


def _pending(state: RunState) -> dict:
    return {
        "faults": [f"{f['kind']} on {f['backend']} ({f['injector']})" for f in state.active_faults()],
        "pages": state.open_pages(),
        "split_original": state.data["split"]["original"],
    }


def _one(user_cfg, state: RunState, dry_run: bool, progress) -> dict:
    from opsctl.drills.env.registry import open_environment
    from opsctl.drills.render import write_reports
    from opsctl.drills.report import report_from_state
    from opsctl.drills.rollback import Rollbacks
    from opsctl.drills.scenario import load_scenario

    out = {"run_id": state.run_id, "mode": state.mode, "phase": state.phase, **_pending(state)}
    if state.finished:
        return {**out, "status": "finished", "message": "nothing to do: the drill finished and rolled back"}
    if dry_run:
        return {**out, "status": "dry-run", "message": "would remove the faults, restore the split and resolve the pages"}
    state.acquire()
    env = None
    try:
        copy = state.dir / "scenario.yaml"
        scenario = load_scenario(copy if copy.exists() else state.data["scenario"]["path"])
        kwargs = {}
        if state.mode == "embedded":
            sim = state.data.get("sim") or {}
            kwargs["sim_now"] = sim.get("now")
        env = open_environment(state.mode, user_cfg, scenario, state.run_id, state.dir, **kwargs)
        env.reopen()

        def say(kind: str, message: str) -> None:
            at = env.clock.now()
            state.data["timeline"].append({"at": at, "phase": "cleanup", "kind": kind, "message": message})
            progress(f"[{state.run_id}] {kind}: {message}")

        host = state.data.get("host")
        where = "" if host == socket.gethostname() else f" on {host}"
        reason = (f"interrupted: the drill process (pid {state.data.get('pid')}{where}) stopped during"
                  f" {state.phase}; rolled back by `opsctl drill cleanup` (pid {os.getpid()})")
        say("cleanup", reason)
        rollbacks = Rollbacks(env, state, say)
        results = rollbacks.run(["remove-faults", "restore-traffic", "resolve-pages"])
        leftovers = rollbacks.leftovers()
        for problem in leftovers:
            say("leftover", problem)
        state.data.update(outcome="aborted", abort_reason=reason, finished_at=time.time())
        data = report_from_state(state, reason=reason, rollbacks=results, leftovers=leftovers)
        paths = write_reports(state.dir, data)
        state.data["report"] = {k: str(v) for k, v in paths.items()}
        state.data["phase"] = "done"
        state.save()
        status = "cleaned" if not leftovers and all(r["status"] != "failed" for r in results) else "incomplete"
        return {**out, "status": status, "rollbacks": results, "leftovers": leftovers, "report": str(paths["md"]),
                "message": "; ".join(f"{r['action']}: {r['message']}" for r in results)}
    except OpsctlError as exc:
        return {**out, "status": "failed", "message": exc.message}
    finally:
        if env is not None:
            env.close()
        state.release()
