"""opsctl.automation.action_record.ActionRecord: the one typed record of an action, written by the
record of actions (`ActionLog`; issue 26 item 4: `record_action` was written twice with ten
parameters). What is stored does not change: a row the code before the record wrote reads back
into the record and re-encodes to the same values (the episodes' shared entries went with them:
decision 0215)."""

from __future__ import annotations

import sqlite3

from opsctl.automation.action_log import ActionLog
from opsctl.automation.action_record import ActionRecord

# The statement and values the code before ActionRecord wrote (episodes.py, record_action), literally.
OLD_INSERT = ("INSERT INTO actions (at, event_key, policy, episode, action, status, detail, dry_run, received_at,"
              " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
LONG = "why " * 700  # 2,800 characters: the row keeps 2,000


def rows(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT at, event_key, policy, episode, action, status, detail, dry_run, received_at,"
                            " started_at, finished_at FROM actions ORDER BY id").fetchall()
    finally:
        conn.close()


def test_a_row_the_old_code_wrote_reads_back_and_re_encodes_to_the_same_values(tmp_path):
    path = tmp_path / "serve.sqlite"
    store = ActionLog(path)
    old = [(12.5, "ek-1", "availability", 3, "failover", "applied", LONG[:2000], 0, 10.0, 11.0, 12.5),
           (20.0, None, "availability", None, "restore", "refused", "guard: frozen", 1, None, 19.0, 20.0)]
    for values in old:
        store.db.write(OLD_INSERT, values)

    conn = store.db.conn
    read = [ActionRecord.from_row(r) for r in conn.execute("SELECT * FROM actions ORDER BY id").fetchall()]
    assert [r.row() for r in read] == old
    assert (read[0].dry_run, read[1].dry_run, read[1].event_key, read[1].episode) == (False, True, None, None)

    for record in read:  # written again by the one implementation: the same row
        store.record(record)
    assert rows(path) == old + old


def test_the_record_writes_the_row_the_ten_parameters_wrote(tmp_path):
    """The same action given as the policy engine gives it: `at` is when it finished, the detail
    is bounded to 2,000 characters, dry_run stored as 0/1."""
    path = tmp_path / "serve.sqlite"
    store = ActionLog(path)
    store.record(ActionRecord(policy="p", action="page", status="dry_run", detail=LONG, dry_run=True,
                                     started_at=5.0, finished_at=6.0, event_key="ek", episode=7, received_at=4.0))
    assert rows(path) == [(6.0, "ek", "p", 7, "page", "dry_run", LONG[:2000], 1, 4.0, 5.0, 6.0)]
    (stored,) = store.actions()  # read back typed: the record as given, its detail bounded
    assert stored == ActionRecord(policy="p", action="page", status="dry_run", detail=LONG[:2000], dry_run=True,
                                  started_at=5.0, finished_at=6.0, event_key="ek", episode=7, received_at=4.0)
