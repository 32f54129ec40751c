"""Start and stop the real processes of a chain drill: Prometheus, Alertmanager, `opsctl serve`.

Each runs on a free loopback port with its data, config and log under the run directory, dies with
the drill (SIGTERM on the parent's death, Linux), and is stopped in reverse order of starting.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from opsctl.errors import OpsctlError

READY_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


class Process:
    """One started binary: its command, log file and readiness URL."""

    def __init__(self, name: str, cmd: list[str], log: Path, ready_url: str, *, env: dict | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.cmd = cmd
        self.log_path = log
        self.ready_url = ready_url
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def wait_ready(self, timeout: float = READY_TIMEOUT, should_stop: Callable[[], bool] = lambda: False) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline and not should_stop():
            if self.proc.poll() is not None:
                raise OpsctlError(f"{self.name} exited with status {self.proc.returncode} while starting: "
                                  f"{self.tail(1) or 'no output'}", hint=f"its log: {self.log_path}")
            try:
                http_get(self.ready_url, timeout=2)
                return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except OSError as exc:
                last = str(getattr(exc, "reason", exc))
            time.sleep(0.2)
        raise OpsctlError(f"{self.name} not ready at {self.ready_url} after {timeout:.0f}s ({last})",
                          hint=f"its log: {self.log_path}")

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return f"{self.name} stopped (exit {self.proc.returncode})"


def backfill(promtool: str, openmetrics: Path, data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data_dir)],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise OpsctlError(f"promtool could not backfill the history: {(done.stderr or done.stdout).strip()[-300:]}")


def check_rules(promtool: str, rules: Path) -> None:
    done = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise OpsctlError(f"promtool rejects the generated rules: {(done.stdout + done.stderr).strip()[-300:]}")




def opsctl_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "opsctl", "--config", str(config), *args]


def opsctl_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPSCTL_CONFIG", "OPSCTL_WEBHOOK_TOKEN")}
    env["TZ"] = "UTC"  # serve's log times are read back as evidence
    return env



def generate_rules(config: Path, out: Path) -> None:
    done = subprocess.run(opsctl_command(config, "slo", "rules", "--out", str(out)), capture_output=True,
                          text=True, env=opsctl_env(), timeout=120)
    if done.returncode != 0:
        raise OpsctlError(f"`opsctl slo rules` failed: {(done.stderr or done.stdout).strip()[-300:]}")
