"""The episodes document's writes do their JSON work once (issue 22, the team-mode p99), as the
delivery pieces' do (test_delivery_encode.py): a write from the version this replica last read or
wrote encodes the document once, the text whose length the size bound checks being the text
written, and does not parse the API server's echo of its own write. Counted on the stdlib's json
calls over the document, on the loopback API server through the official client; before, each such
write encoded the document twice (the bound, then the store) and parsed the echo once."""

from __future__ import annotations

import json

from opsctl.automation.shared import EPISODES, SharedEpisodeStore
from opsctl.clock import SimClock
from opsctl.fencing import Term

from tests.automation.test_episode_record import OLD_FILE
from tests.automation.test_shared_trigger_path import DOC, NS, STARTS, kube_store


class JsonCalls:
    """json.dumps of the episodes document and json.loads of its text (keys sorted: alerts first)."""

    def __init__(self, monkeypatch):
        self.dumps = self.loads = 0
        real_dumps, real_loads = json.dumps, json.loads

        def dumps(obj, *args, **kwargs):
            if isinstance(obj, dict) and "alerts" in obj and "episodes" in obj:
                self.dumps += 1
            return real_dumps(obj, *args, **kwargs)

        def loads(text, *args, **kwargs):
            if isinstance(text, (str, bytes)) and text[:10] in ('{"alerts":', b'{"alerts":'):
                self.loads += 1
            return real_loads(text, *args, **kwargs)

        monkeypatch.setattr(json, "dumps", dumps)
        monkeypatch.setattr(json, "loads", loads)


def test_a_write_from_the_known_version_encodes_the_document_once_and_parses_no_echo(kube_api, tmp_path,
                                                                                     monkeypatch):
    # A document the code before the typed episode wrote, with a closed episode in it, so the size
    # bound has something it could drop and is checked on every write.
    kube_store(kube_api).put(EPISODES, json.loads(OLD_FILE)["data"], version=None)
    store = SharedEpisodeStore(kube_store(kube_api), local_path=tmp_path / "a.sqlite", clock=SimClock(1000).now,
                               owner="serve-a:1", term=lambda: Term("serve-a", 3))
    start = store.begin_firing("availability", "f1", "databricks", STARTS, failover=True)
    assert start is not None  # a first write: it started from a read, this replica knows what it wrote
    calls = JsonCalls(monkeypatch)
    store.record_intent("page", "opsctl-automation-availability-databricks", "failed over")
    assert (calls.dumps, calls.loads) == (1, 0)

    # What was written is the store's own encoding (sorted, compact), and reads back the same.
    text = kube_api.get("", "configmaps", NS, DOC)["data"]["state.json"]
    stored = json.loads(text)
    assert text == json.dumps(stored, sort_keys=True, separators=(",", ":"))
    assert stored["intents"]["page:opsctl-automation-availability-databricks"]["detail"] == "failed over"
    assert stored["episodes"][start.episode.id]["failover"] == "started"
    assert stored["episodes"]["0a186928916bf0e05ffd"]["state"] == "closed"  # under the bound: kept
    assert kube_store(kube_api).get(EPISODES).data == stored
