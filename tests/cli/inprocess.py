"""Run `opsctl ARGS...` in this process, through the same `main()` as the console script.

`main()` maps errors to exit codes, so a traceback, a wrong code or a multi-line usage message
shows up here exactly as a user would see it, without the cost of a subprocess per call (the
property tests make hundreds of calls).
"""

from __future__ import annotations

from tests.conftest import Result


def invoke(*args: str, env: dict | None = None, input: str | None = None) -> Result:
    from click.testing import CliRunner

    from opsctl.cli.main import main

    runner = CliRunner()
    with runner.isolation(input=input, env={"OPSCTL_CONFIG": None, **(env or {})}) as (out, err, _):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        # Anything else escaping main() is a traceback for the user: let it fail the test.
        return Result(code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace"))
