"""A ramp's stored document is typed (`RampDocument`) where it is loaded, and written back as read.

tests/traffic/ramp_documents.json is real output of the code before the typed document (main at
696bbb1, `python -m opsctl` on the embedded default with 28 days of healthy data, OPSCTL_ACTOR=alice):
the local state store's `ramp.json` of a completed ramp, of a ramp killed while soaking its first
step, and of that ramp after `traffic ramp --abort`, with the `-o json` each command printed (and
`traffic status -o json`'s ramp for the interrupted one); plus the dry-run and unchanged outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsctl.state.base import encode
from opsctl.traffic.ramp_record import RampDocument, RampOwner, RampSoak
from opsctl.traffic.rampstate import RampState, is_live

PINS = json.loads((Path(__file__).parent / "ramp_documents.json").read_text())
STORED = ("completed", "interrupted_soaking", "aborted")


def _data_text(file_text: str) -> str:
    """The `data` object's text as the local store wrote it (`{"version":N,"data":...}`)."""
    return file_text[file_text.index('"data":') + len('"data":'):file_text.rindex("}")]


@pytest.mark.parametrize("name", STORED)
def test_a_stored_ramp_document_reads_back_and_writes_the_same_bytes(name):
    text = PINS[name]["file"]
    doc = RampDocument.parse(json.loads(text)["data"])
    assert doc.extra == {} and doc.version == 1
    assert encode("ramp", doc.stored()) == _data_text(text)


def test_the_interrupted_ramp_reads_to_its_typed_fields():
    doc = RampDocument.parse(json.loads(PINS["interrupted_soaking"]["file"])["data"])
    assert (doc.action, doc.status, doc.done, doc.pending, doc.step, doc.interval) == ("ramp", "running", 1, None, 5, 120)
    assert (doc.incident, doc.reason, doc.actor, doc.emergency) == ("INC-7", "pin: interrupted", "alice", False)
    assert isinstance(doc.soak, RampSoak) and doc.soak.step == 0 and doc.soak.until == 1796191125.5554593
    assert isinstance(doc.owner, RampOwner) and (doc.owner.actor, doc.owner.host) == ("alice", "vm")
    assert doc.owner.pid == doc.pid == 17994
    assert doc.target == {"shadow": {}, "weights": {"databricks": 100, "internal": 0}} and len(doc.steps) == 2
    assert doc.message is None and "message" not in doc.present  # a running ramp has no message yet
    assert "message" not in doc.stored()


@pytest.mark.parametrize("name", ("completed", "aborted"))
def test_the_summary_is_what_the_command_printed(name):
    """The command printed the summary of the document it had just written: same keys, order, values."""
    doc = RampDocument.parse(json.loads(PINS[name]["file"])["data"])
    printed = PINS[name]["output"]["ramp"]
    shown = doc.summary()
    assert list(shown) == list(printed)
    # The command's owner came from memory ({pid, host, actor}); read back, the store's order is sorted.
    assert {**shown, "owner": None} == {**printed, "owner": None} and shown["owner"] == printed["owner"]


def test_status_shows_the_interrupted_ramp_as_before():
    from opsctl.traffic.status import RampStatus

    doc = RampDocument.parse(json.loads(PINS["interrupted_soaking"]["file"])["data"])
    shown = RampStatus(doc, live=False).to_dict()
    assert json.dumps(shown) == json.dumps(PINS["interrupted_soaking"]["status_ramp"])  # key order too


def test_a_change_is_written_from_then_on_and_an_older_documents_keys_stay_absent():
    older = {"id": "ramp-1", "action": "ramp", "status": "running", "steps": [], "done": 0, "heartbeat": 5}
    doc = RampDocument.parse(older)
    assert doc.stored() == older  # no soak, pending or message invented, the int heartbeat kept
    assert doc.summary()["soak"] is None and doc.summary()["total"] == 0
    ended = doc.changed(status="aborted", message="why")
    assert ended.stored() == {**older, "status": "aborted", "message": "why"}
    with pytest.raises(TypeError):
        doc.changed(nonsense=1)


def test_what_the_document_holds_beyond_its_fields_is_written_back():
    raw = {"id": "ramp-2", "status": "running", "done": "two", "newer": {"x": 1}, "version": 2,
           "owner": {"pid": 7, "host": "h", "actor": "a", "since": 3}, "soak": {"step": 1}}
    doc = RampDocument.parse(raw)
    assert doc.version == 2 and doc.done == 0 and doc.extra == {"done": "two", "newer": {"x": 1}, "soak": {"step": 1}}
    assert doc.owner is not None and doc.owner.extra == {"since": 3} and doc.soak is None
    assert encode("ramp", doc.stored()) == encode("ramp", raw)


def test_a_save_writes_the_owner_and_heartbeat_and_judges_liveness_typed(tmp_path):
    from opsctl.state.local import LocalStateStore

    store = LocalStateStore(tmp_path)
    state = RampState(RampDocument.new(id="ramp-3", status="running", steps=()), store)
    state.take("bob")
    written = json.loads((tmp_path / "ramp.json").read_text())["data"]
    assert written["owner"]["actor"] == "bob" and written["pid"] == written["owner"]["pid"]
    assert set(written) == {"id", "status", "steps", "owner", "pid", "host", "updated_at", "heartbeat"}
    again = RampState.load(store)
    assert again is not None and again.doc.stored() == state.doc.stored()  # read back to the same content
    assert is_live(again.doc, now=again.doc.heartbeat)  # this process is alive, its heartbeat fresh
    assert not is_live(again.doc.changed(status="completed"), now=again.doc.heartbeat)
