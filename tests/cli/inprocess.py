"""Run `opsctl ARGS...` in this process, through the same `main()` as the console script.

`main()` maps errors to exit codes, so a traceback, a wrong code or a multi-line usage message
shows up here exactly as a user would see it, without the cost of a subprocess per call.

A run leaves the process as it found it, as a separate process would: the working directory, the
environment, the standard streams, logging handlers and levels, signal handlers and opsctl's
per-process caches (`functools.lru_cache`, e.g. one Kubernetes client per settings) are restored or
cleared afterwards, so one invocation cannot leak into the next.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import traceback
import warnings
from pathlib import Path

from tests.conftest import Result

_ONE_AT_A_TIME = threading.Lock()  # a run owns the process's cwd, environment and streams
_SIGNALS = [s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None]


def invoke(*args: str, env: dict | None = None, input: str | None = None) -> Result:
    """In-process run for tests making many calls; a traceback escaping main() fails the test."""
    return run_main([str(a) for a in args], env=env, input=input, tracebacks="raise")


def run_main(argv: list[str], *, env: dict | None = None, cwd: Path | str | None = None, input: str | None = None,
             unset: tuple[str, ...] = ("OPSCTL_CONFIG",), tracebacks: str = "exit") -> Result:
    """`main(argv)` with the exit code a process would have: SystemExit's code (None 0, a message 1)
    and, with tracebacks="exit", an uncaught exception printed to stderr with code 1 as the interpreter
    does; tracebacks="raise" lets it fail the test instead."""
    import click.formatting
    from click.testing import CliRunner

    from opsctl.cli.main import main

    changes: dict[str, str | None] = {k: None for k in os.environ if unset and k.startswith(unset)}
    # A child's stdout is a pipe: help is wrapped to $COLUMNS, else to shutil's fallback of 80.
    changes["COLUMNS"] = os.environ.get("COLUMNS") or "80"
    changes.update({k: (None if v is None else str(v)) for k, v in (env or {}).items()})
    with _restored_process(cwd):
        with CliRunner().isolation(input=input, env=changes) as (out, err, _):
            click.formatting.FORCED_WIDTH = None  # (isolation forces 80; restored when it ends)
            try:
                main(argv)
                code = 0
            except SystemExit as exc:
                code = _exit_code(exc.code)
            except Exception:
                if tracebacks == "raise":
                    raise
                traceback.print_exc(file=sys.stderr)
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            return Result(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): the interpreter prints it and exits 1
    return 1


@contextlib.contextmanager
def _restored_process(cwd):
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        raise RuntimeError("an in-process opsctl run is already under way: concurrent runs need child"
                           " processes (spawn_opsctl, run_cli(popen=True), Env.popen)")
    try:
        with _restored_state(cwd):
            yield
    finally:
        _ONE_AT_A_TIME.release()


@contextlib.contextmanager
def _restored_state(cwd):
    before_cwd = os.getcwd()
    handlers = {s: signal.getsignal(s) for s in _SIGNALS}
    loggers = _logging_state()
    # A fresh process's root logger: no handlers (pytest's capture handlers set aside for the run),
    # level WARNING, so an unhandled warning reaches stderr through logging.lastResort as it would.
    logging.root.handlers[:] = []
    logging.root.setLevel(logging.WARNING)
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(before_cwd)
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)
        _restore_logging(loggers)
        _clear_opsctl_caches()


def _all_loggers() -> dict[str, logging.Logger]:
    found = {name: lg for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    found[""] = logging.getLogger()
    return found


def _logging_state() -> dict:
    state = {name: (list(lg.handlers), lg.level, lg.propagate, lg.disabled) for name, lg in _all_loggers().items()}
    state[None] = logging.root.manager.disable
    return state


def _restore_logging(state: dict) -> None:
    logging.disable(state[None])
    for name, lg in _all_loggers().items():
        handlers, level, propagate, disabled = state.get(name, ([], logging.NOTSET, True, False))
        for handler in [h for h in lg.handlers if h not in handlers]:
            lg.removeHandler(handler)  # bound to this run's streams: a new process would not have it
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate, lg.disabled = propagate, disabled


def _clear_opsctl_caches() -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "opsctl" or name.startswith("opsctl.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper) and getattr(value, "__module__", None) == name:
                value.cache_clear()
