"""One response to one process of the host in local mode (opsctl/automation/response_lock.py).
The two-replica behaviour itself (one failover, one page, one note) is
tests/automation/test_live.py::test_two_replicas_sharing_the_state_act_once."""

from __future__ import annotations

import logging
import subprocess
import sys

from opsctl.automation.response_lock import ResponseLocks

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("busy")
"""

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin (or kills us)
"""


def _lock_file(directory):
    [path] = directory.glob("response-*.lock")
    return path


def _probe(path) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()


def test_another_process_sees_the_response_held_while_this_one_acts_and_free_after(tmp_path):
    locks = ResponseLocks(tmp_path / "locks")
    with locks.hold("availability", "databricks"):
        with locks.hold("availability", "databricks"):  # re-entrant in this thread: the engine nests holds
            path = _lock_file(tmp_path / "locks")
            assert _probe(path) == "busy"
        assert _probe(path) == "busy"  # the outer hold still has it
    assert _probe(path) == "free"


def test_other_responses_are_not_held(tmp_path):
    locks = ResponseLocks(tmp_path / "locks")
    with locks.hold("availability", "databricks"):
        with locks.hold("availability", "internal"):
            assert len(list((tmp_path / "locks").glob("response-*.lock"))) == 2


def test_a_process_that_never_lets_go_is_waited_for_a_bounded_time_then_taken_as_gone(tmp_path, caplog):
    locks = ResponseLocks(tmp_path / "locks", wait=0.5)
    with locks.hold("availability", "databricks"):
        path = _lock_file(tmp_path / "locks")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        entered = 0
        with caplog.at_level(logging.WARNING, logger="opsctl.automation.response_lock"):
            with locks.hold("availability", "databricks"):
                entered += 1
        assert entered == 1
        assert [r.getMessage() for r in caplog.records] == [
            "the response of availability on databricks is held by another process past 0.5 s: acting without"
            " its lock"]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    with locks.hold("availability", "databricks"):  # the holder gone: the lock is this process's again
        assert _probe(path) == "busy"
