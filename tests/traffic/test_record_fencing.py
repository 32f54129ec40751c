"""The leader's term on the split's change record (issue 22, items 1 and 2): a write under a term
older than the one recorded is refused (exit 5) before it changes anything, a person's write keeps
the leader's term, every entry names the term and the operation it was written under, and a write
whose answer was lost is recognised as applied from the record."""

from __future__ import annotations

import pytest

from opsctl.config.loading import load_config_file
from opsctl.errors import ConflictError
from opsctl.fencing import FencedError, Term
from opsctl.traffic.service import TrafficService


def service(env) -> TrafficService:
    return TrafficService(load_config_file(env.config), hooks=[], actor="tester")


def test_a_write_under_an_older_term_is_refused_and_a_persons_write_keeps_the_leaders_term(make_env):
    env = make_env()
    traffic = service(env)
    newer, older = Term(holder="serve-b", epoch=3), Term(holder="serve-a", epoch=2)
    with traffic.controller.acting_as(term=lambda: newer, operation_id="failover-op1"):
        applied = traffic.set({"databricks": 60, "internal": 40}, reason="leader b")
    assert applied.outcome == "applied"
    record = env.stored()["opsctl"]
    assert record["term"] == "serve-b@3"
    assert record["changes"][-1]["term"] == "serve-b@3" and record["changes"][-1]["operation"] == "failover-op1"

    person = traffic.set({"databricks": 70, "internal": 30}, reason="on-call")  # no term: CAS only
    assert person.outcome == "applied"
    assert env.stored()["opsctl"]["term"] == "serve-b@3"
    assert "term" not in env.stored()["opsctl"]["changes"][-1]

    with traffic.controller.acting_as(term=lambda: older):
        with pytest.raises(FencedError) as refused:
            traffic.set({"databricks": 0, "internal": 100}, reason="stale leader a")
    assert refused.value.exit_code == 5 and isinstance(refused.value, ConflictError)
    assert env.stored()["weights"] == {"databricks": 70, "internal": 30}
    assert len(env.stored()["opsctl"]["changes"]) == 2


def test_a_replica_that_no_longer_leads_writes_nothing(make_env):
    env = make_env()
    traffic = service(env)
    with traffic.controller.acting_as(term=lambda: None):
        with pytest.raises(FencedError):
            traffic.set({"databricks": 0, "internal": 100}, reason="not leading")
    assert not env.split_file.exists() or "opsctl" not in env.stored() or not env.stored()["opsctl"]["changes"]
