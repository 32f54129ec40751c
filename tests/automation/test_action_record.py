"""opsctl.automation.action_record.ActionRecord: the one typed record of an action, written by both
stores (issue 26 item 4: `record_action` was written twice with ten parameters). What is stored
does not change: a row the code before the record wrote reads back into the record and re-encodes
to the same values, and the shared document's episode entry keeps its old keys and bounds."""

from __future__ import annotations

import json
import sqlite3

from opsctl.automation.action_record import ActionRecord
from opsctl.automation.episodes import EpisodeStore
from opsctl.automation.shared import SharedEpisodeStore
from opsctl.automation.shared_access import EPISODES
from opsctl.clock import SimClock
from opsctl.fencing import Term

NS = "ops"
STARTS = "2026-11-29T12:00:00.500000000Z"

# The statement and values the code before ActionRecord wrote (episodes.py, record_action), literally.
OLD_INSERT = ("INSERT INTO actions (at, event_key, policy, episode, action, status, detail, dry_run, received_at,"
              " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
LONG = "why " * 700  # 2,800 characters: the local row keeps 2,000, the shared entry 160


def rows(path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT at, event_key, policy, episode, action, status, detail, dry_run, received_at,"
                            " started_at, finished_at FROM actions ORDER BY id").fetchall()
    finally:
        conn.close()


def test_a_row_the_old_code_wrote_reads_back_and_re_encodes_to_the_same_values(tmp_path):
    path = tmp_path / "serve.sqlite"
    store = EpisodeStore(path, clock=SimClock(1000).now, owner="replica-a:1")
    old = [(12.5, "ek-1", "availability", 3, "failover", "applied", LONG[:2000], 0, 10.0, 11.0, 12.5),
           (20.0, None, "availability", None, "restore", "refused", "guard: frozen", 1, None, 19.0, 20.0)]
    for values in old:
        store.db.write(OLD_INSERT, values)

    conn = store.db.conn
    read = [ActionRecord.from_row(r) for r in conn.execute("SELECT * FROM actions ORDER BY id").fetchall()]
    assert [r.row() for r in read] == old
    assert (read[0].dry_run, read[1].dry_run, read[1].event_key, read[1].episode) == (False, True, None, None)

    for record in read:  # written again by the one implementation: the same row
        store.record_action(record)
    assert rows(path) == old + old


def test_the_record_writes_the_row_the_ten_parameters_wrote(tmp_path):
    """The same action given as the policy engine gives it: `at` is when it finished, the detail
    is bounded to 2,000 characters, dry_run stored as 0/1."""
    path = tmp_path / "serve.sqlite"
    store = EpisodeStore(path, clock=SimClock(1000).now, owner="replica-a:1")
    store.record_action(ActionRecord(policy="p", action="page", status="dry_run", detail=LONG, dry_run=True,
                                     started_at=5.0, finished_at=6.0, event_key="ek", episode=7, received_at=4.0))
    assert rows(path) == [(6.0, "ek", "p", 7, "page", "dry_run", LONG[:2000], 1, 4.0, 5.0, 6.0)]
    (stored,) = store.actions()  # read back typed: the record as given, its detail bounded
    assert stored == ActionRecord(policy="p", action="page", status="dry_run", detail=LONG[:2000], dry_run=True,
                                  started_at=5.0, finished_at=6.0, event_key="ek", episode=7, received_at=4.0)


def test_the_shared_store_keeps_the_whole_record_locally_and_the_old_entry_on_its_episode(kube_api, tmp_path):
    from opsctl.config.traffic import KubernetesSettings
    from opsctl.state.kubernetes import KubernetesStateStore
    from opsctl.traffic.kube import Kube

    docs = KubernetesStateStore(Kube(KubernetesSettings(host=kube_api.url, namespace=NS, timeout=10)),
                                namespace=NS, service="llm-inference")
    local = tmp_path / "serve-a.sqlite"
    store = SharedEpisodeStore(docs, local_path=local, clock=SimClock(1000).now, owner="serve-a:1",
                               term=lambda: Term("serve-a", 3))
    start = store.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    assert start is not None
    ident = start.episode.id
    store.record_action(ActionRecord(policy="availability", action="failover", status="applied", detail=LONG,
                                     dry_run=False, started_at=1000.0, finished_at=1001.5, event_key="k1",
                                     episode=ident, received_at=999.0))
    store.record_action(ActionRecord(policy="availability", action="restore", status="noop", detail="no episode",
                                     dry_run=False, started_at=1002.0, finished_at=1002.0))

    assert rows(local) == [(1001.5, "k1", "availability", ident, "failover", "applied", LONG[:2000], 0, 999.0,
                            1000.0, 1001.5),
                           (1002.0, None, "availability", None, "restore", "noop", "no episode", 0, None, 1002.0,
                            1002.0)]
    entry = docs.get(EPISODES).data["episodes"][ident]["actions"]
    # The entry as the code before the record wrote it: these keys and values, nothing more (the
    # state store writes keys sorted, so equal entries are equal bytes).
    assert json.dumps(entry, sort_keys=True) == json.dumps([{"at": 1001.5, "action": "failover", "status": "applied",
                                                             "by": "serve-a:1", "detail": LONG[:160]}], sort_keys=True)
