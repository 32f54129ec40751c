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
"""

from __future__ import annotations


class OpsctlError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(OpsctlError):
    exit_code = 2


class ConfigError(UsageError):
    """Invalid configuration. `problems` lists every problem found, each naming file and key."""

    def __init__(self, message: str, *, problems: list[str] | None = None, hint: str | None = None):
        self.problems = problems or [message]
        if problems and problems != [message]:
            message = message + "\n" + "\n".join(f"  - {p}" for p in problems)
        super().__init__(message, hint=hint)


class NoDataError(OpsctlError):
    exit_code = 3


class SourceUnavailable(NoDataError):
    pass


class GuardRefused(OpsctlError):
    exit_code = 4


class ConflictError(OpsctlError):
    exit_code = 5
