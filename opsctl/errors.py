"""Errors that opsctl raises, each carrying the process exit code automation relies on.

    OpsctlError (1)                 an operation failed
    ├── UsageError (2)              bad flags or arguments
    │   └── ConfigError (2)         invalid config, SLO or scenario file (names file and key path)
    ├── NoDataError (3)             no data or unknown state: never reported as healthy
    │   └── SourceUnavailable (3)   metric source down, slow past its timeout, or refusing
    ├── GuardRefused (4)            refused by a guard: freeze, capacity, budget, rate limit
    └── ConflictError (5)           lost a race with a concurrent change

Library errors are wrapped where they enter opsctl (`raise XError(...) from exc`); nothing
below the CLI calls `sys.exit`.

An error says why an operation failed, never what it had done: a refused traffic change returns
its result (`traffic.change.ChangeResult`, an aborted ramp's `RampOutcome`) with the error in
its `error` field, and the CLI renders the result (`-o json`) before exiting with the error's code.
"""

from __future__ import annotations

import unicodedata


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control and line-separator characters escaped (\\x1e, \\u2028): a value from a
    file or a request, echoed in an error, can never forge a line of output or of a log."""
    out = []
    for char in str(text):
        if char == "\n" and keep_newlines:
            out.append(char)
        elif unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or char in "\x85":
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


class OpsctlError(Exception):
    exit_code = 1
    # What a wrapped API call's failure says, for callers that retry (traffic.kube.transient):
    status: int | None = None  # the HTTP status of the answer, when there was one
    unreachable: bool = False  # no answer at all (unreachable, timed out, dropped)

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        message = printable(self.message, keep_newlines=True)
        return message if not self.hint else f"{message}\n  hint: {printable(self.hint)}"


class UsageError(OpsctlError):
    exit_code = 2


class ConfigError(UsageError):
    """Invalid configuration. `problems` lists every problem found, each naming file and key."""

    def __init__(self, message: str, *, problems: list[str] | None = None, hint: str | None = None):
        self.problems = problems or [message]
        if problems and problems != [message]:  # one line each, whatever a file's keys hold
            message = printable(message) + "\n" + "\n".join(f"  - {printable(p)}" for p in problems)
        super().__init__(message, hint=hint)


class NoDataError(OpsctlError):
    exit_code = 3


class SourceUnavailable(NoDataError):
    pass


class GuardRefused(OpsctlError):
    exit_code = 4


class ConflictError(OpsctlError):
    exit_code = 5
