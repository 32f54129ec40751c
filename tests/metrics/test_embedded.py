"""EmbeddedStore.query_many over hand-made steps: the numbers are added up by hand below."""

from __future__ import annotations

import pytest

from opsctl.errors import UsageError
from opsctl.metrics.embedded import EmbeddedStore

T0 = 1_800_000_000  # on the 10-second grid
STEPS = [T0 + 10 * i for i in range(1, 7)]  # step ends T0+10 .. T0+60

DATABRICKS = {
    "req_ok": [100, 110, 120, 130, 140, 150],
    "req_server_error": [1, 0, 2, 0, 0, 3],
    "le_4": [90, 100, 110, 120, 130, 140],  # le="0.5"
    "le_6": [99, 109, 120, 128, 139, 150],  # le="1.0"
    "le_10": [101, 110, 122, 130, 140, 153],  # le="+Inf"
    "lat_count": [101, 110, 122, 130, 140, 153],
}
INTERNAL = {
    "req_ok": [10, 20, 30, 40, 50, 60],
    "req_server_error": [0, 1, 0, 0, 0, 0],
    "le_6": [10, 21, 30, 40, 50, 60],
    "le_10": [10, 21, 30, 40, 50, 60],
    "lat_count": [10, 21, 30, 40, 50, 60],
}


@pytest.fixture
def store(tmp_path):
    store = EmbeddedStore.open(tmp_path / "metrics.sqlite", create=True)
    store.write_steps("databricks", STEPS, DATABRICKS)
    store.write_steps("internal", STEPS, INTERNAL)
    yield store
    store.close()


def one(store, expr, at=T0 + 60):
    return store.query_many([expr], at)[0]


@pytest.mark.parametrize(
    "expr, expected",
    [
        # (T0, T0+60]: all six steps: 100+110+120+130+140+150
        ('sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[60s]))', 750),
        # (T0+30, T0+60]: 130+140+150
        ('sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[30s]))', 420),
        # ok 750 + server_error 6
        ('sum(increase(llm_proxy_requests_total{backend="databricks",outcome=~"ok|server_error"}[60s]))', 756),
        # no backend matcher: both backends' server errors, 6 + 1
        ('sum(increase(llm_proxy_requests_total{outcome="server_error"}[60s]))', 7),
        # every outcome but ok on internal: the one server error (the other outcomes hold zeros)
        ('sum(increase(llm_proxy_requests_total{backend="internal",outcome!="ok"}[60s]))', 1),
        ('sum(increase(llm_proxy_requests_total{backend="internal",outcome!~"ok|client_error"}[60s]))', 1),
        # le="1.0" exactly as the store labels it: 99+109+120+128+139+150
        ('sum(increase(llm_proxy_request_duration_seconds_bucket{backend="databricks",le="1.0"}[60s]))', 745),
        # the SLO files' regex matches "1.0": databricks 745 + internal 10+21+30+40+50+60
        (r'sum(increase(llm_proxy_request_duration_seconds_bucket{le=~"1|1\\.0"}[60s]))', 745 + 211),
        ('sum(increase(llm_proxy_request_duration_seconds_count{backend="databricks"}[60s]))', 756),
        # rate is the increase per second: 750 / 60
        ('sum(rate(llm_proxy_requests_total{backend="databricks",outcome="ok"}[60s]))', 12.5),
        ('sum(rate(llm_proxy_requests_total{backend="internal"}[30s]))', (40 + 50 + 60) / 30),
        # increase without sum() is accepted too
        ('increase(llm_proxy_requests_total{backend="internal",outcome="ok"}[20s])', 110),
    ],
)
def test_increase_and_rate_add_up_the_steps_in_the_window(store, expr, expected):
    assert one(store, expr) == pytest.approx(expected, rel=1e-12)


def test_le_1_does_not_match_the_1_0_bucket_as_in_prometheus(store):
    assert one(store, 'sum(increase(llm_proxy_request_duration_seconds_bucket{backend="databricks",le="1"}[60s]))') is None
    assert one(store, r'sum(increase(llm_proxy_request_duration_seconds_bucket{backend="databricks",le=~"1|1\\.0"}[60s]))') == 745


@pytest.mark.parametrize(
    "expr",
    [
        'sum(increase(llm_proxy_requests_total{backend="databrick",outcome="ok"}[60s]))',  # value typo
        'sum(increase(llm_proxy_requests_total{bakend="databricks",outcome="ok"}[60s]))',  # label name typo
        'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="OK"}[60s]))',
        'sum(increase(llm_proxy_request_total{backend="databricks"}[60s]))',  # metric name typo
        'sum(increase(llm_proxy_request_duration_seconds_bucket{backend="databricks",le="0.25"}[60s]))',
    ],
)
def test_a_selector_that_matches_no_series_is_no_data_not_zero(store, expr):
    assert one(store, expr) is None


def test_windows_after_the_data_stops_are_no_data(store):
    expr = 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[60s]))'
    # (T0+60, T0+120] holds no step: no data, not 0
    assert one(store, expr, at=T0 + 120) is None
    assert one(store, expr, at=T0 + 3600) is None
    # a window reaching back over the last step still answers: (T0+50, T0+110] holds T0+60
    assert one(store, expr, at=T0 + 110) == 150


def test_windows_before_the_data_starts_are_no_data(store):
    assert one(store, 'sum(increase(llm_proxy_requests_total{outcome="ok"}[60s]))', at=T0) is None


def test_an_instant_between_steps_evaluates_at_the_step_before(store):
    expr = 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[30s]))'
    assert one(store, expr, at=T0 + 69) == one(store, expr, at=T0 + 60) == 420


def test_query_many_answers_each_expression_in_order(store):
    exprs = [
        'sum(increase(llm_proxy_requests_total{backend="internal",outcome="ok"}[60s]))',
        'sum(increase(llm_proxy_requests_total{backend="nobody"}[60s]))',
        'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="server_error"}[60s]))',
    ]
    assert store.query_many(exprs, T0 + 60) == [210, None, 6]


def test_adding_steps_updates_the_running_totals(store):
    store.write_steps("databricks", [T0 + 30], {"req_ok": [1000]})  # mode 'add'
    assert one(store, 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[60s]))') == 1750
    store.write_steps("databricks", [T0 + 30], {"req_ok": [5]}, mode="replace")
    assert one(store, 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome="ok"}[60s]))') == 635


@pytest.mark.parametrize(
    "expr",
    [
        'llm_proxy_requests_total{backend="internal"}',
        'sum(llm_proxy_requests_total{backend="internal"})',
        'sum(increase(llm_proxy_requests_total{backend="internal"}[5m]))',
        'sum(increase(llm_proxy_requests_total{backend="internal"}[60s])',
    ],
)
def test_promql_it_cannot_answer_is_a_usage_error(store, expr):
    with pytest.raises(UsageError):
        store.query_many([expr], T0 + 60)


def test_a_store_written_before_auth_error_opens_with_zero_auth_errors_and_its_counts_kept(tmp_path):
    """A store from before the auth_error outcome (no req_auth_error columns) still opens: the
    column joins with 0 in every existing row, which is what the proxy counted then."""
    import sqlite3

    from opsctl.metrics import schema

    old = [c for c in schema.VALUE_COLUMNS if c != "req_auth_error"]
    cols = ", ".join(f"{c} REAL NOT NULL DEFAULT 0" for c in old + [f"c_{c}" for c in old])
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE steps (backend TEXT NOT NULL, ts INTEGER NOT NULL, {cols},"
                 " PRIMARY KEY (backend, ts)) WITHOUT ROWID")
    conn.execute("INSERT INTO steps (backend, ts, req_ok, req_server_error, c_req_ok, c_req_server_error)"
                 " VALUES ('databricks', 10, 97, 3, 97, 3)")
    conn.commit()
    conn.close()
    store = EmbeddedStore.open(path, create=False)
    try:
        totals = store.totals("databricks", 10)
        assert totals["req_ok"] == 97 and totals["req_server_error"] == 3 and totals["req_auth_error"] == 0
        valid = 'sum(increase(llm_proxy_requests_total{backend="databricks",outcome=~"ok|auth_error|throttled|server_error|timeout"}[10s]))'
        assert store.query_many([valid], 10) == [100.0]
        store.write_steps("databricks", [20], {"req_ok": [5], "req_auth_error": [5]})
        assert store.totals("databricks", 20)["req_auth_error"] == 5
    finally:
        store.close()
