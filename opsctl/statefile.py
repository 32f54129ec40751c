"""JSON state files in the state dir: read, and write atomically under an exclusive file lock.

A write goes to a temp file in the same directory, is fsynced, renamed over the target, and the
directory is fsynced, so a crash leaves either the old or the new file, never half of one. The lock
(`<file>.lock`, flock) serialises read-modify-write cycles between concurrent opsctl processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import IO, Any, Iterator

from opsctl.errors import ConflictError, OpsctlError

LOCK_TIMEOUT = 10.0


@contextlib.contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive lock on `path` (through `path.lock`) for the duration of the block."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(path.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ConflictError(
                        f"{path}: locked by another opsctl process for more than {timeout:g}s",
                        hint="retry in a moment; if no opsctl is running, the lock holder died and retrying works",
                    ) from None
                time.sleep(0.02)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_json(path: Path, default: Any) -> Any:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return default
    except OSError as exc:
        raise OpsctlError(f"{path}: cannot read state file: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OpsctlError(
            f"{path}: state file is not valid JSON (line {exc.lineno})",
            hint="it was not written by opsctl's atomic writer; move it aside and retry",
        ) from exc


@contextlib.contextmanager
def atomic_file(path: Path, *, mode: int = 0o600) -> Iterator[IO[str]]:
    """Open `path` for writing whole or not at all: a temp file in the same directory, fsynced and
    renamed over the target when the block ends, then the directory fsynced. An error leaves the old
    file. `mode` is the new file's permission bits (the umask still applies)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_text_atomic(path: Path, text: str, *, mode: int = 0o600) -> None:
    with atomic_file(path, mode=mode) as handle:
        handle.write(text)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def updating(path: Path, default: Any) -> Iterator[Any]:
    """Lock, read, let the block change the data in place, write atomically. An error writes nothing."""
    with locked(path):
        data = read_json(path, default)
        yield data
        write_json_atomic(path, data)
