"""The idempotency record under concurrency: a second filer of the same ticket waits its turn."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from opsctl.errors import ConflictError
from opsctl.tickets.base import TicketRequest
from opsctl.tickets.records import TicketRecords
from tests.fakes.fixtures import ROOT

REQ = TicketRequest(vendor="databricks", category="inference", severity="Sev2", subject="endpoint down")


def test_a_live_process_filing_the_same_key_is_a_conflict_and_a_dead_one_is_an_interruption(tmp_path):
    path = tmp_path / "records.json"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from opsctl.tickets.base import TicketRequest
        from opsctl.tickets.records import TicketRecords
        req = TicketRequest(vendor="databricks", category="inference", severity="Sev2", subject="endpoint down")
        print(TicketRecords({str(path)!r}).claim(req, "zendesk", now=0, window=None, stale_after=600).state, flush=True)
        sys.stdin.read()  # hold the claim until the test is done with it
    """)], env={"PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "new"
        with pytest.raises(ConflictError, match=rf"another opsctl \(pid {holder.pid}\) is filing this ticket"):
            TicketRecords(path).claim(REQ, "zendesk", now=1, window=None, stale_after=600)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    claim = TicketRecords(path).claim(REQ, "zendesk", now=2, window=None, stale_after=600)
    assert claim.state == "interrupted"
    assert claim.wire_key == REQ.key


def test_a_pending_claim_older_than_the_stale_limit_is_taken_over(tmp_path):
    records = TicketRecords(tmp_path / "records.json")
    assert records.claim(REQ, "zendesk", now=0, window=None, stale_after=600).state == "new"
    # Our own pid is alive; only age makes the claim stale.
    with pytest.raises(ConflictError):
        records.claim(REQ, "zendesk", now=0, window=None, stale_after=600)
    time.sleep(0.05)
    assert records.claim(REQ, "zendesk", now=0, window=None, stale_after=0.01).state == "interrupted"
