"""The embedded store's bulk append (used to seed a drill's store and to move its simulated time on)
gives the same answers as the general write path, and falls back to it for anything but an append."""

from __future__ import annotations

from opsctl.metrics import schema
from opsctl.metrics.embedded import EmbeddedStore
from opsctl.metrics.promql import increase_query
from opsctl.metrics.simulator import Vendor5xx, simulate

START = 1_795_000_000


def test_append_steps_answers_like_write_steps_in_pieces_and_out_of_order(tmp_path):
    series = simulate(START, START + 6 * 3600, peak_rps=50, seed=5,
                      incidents=[Vendor5xx("databricks", START + 3600, START + 4000, rate=0.3)])
    a = EmbeddedStore.open(tmp_path / "a.sqlite", create=True)
    b = EmbeddedStore.open(tmp_path / "b.sqlite", create=True)
    for name, s in series.items():
        a.write_steps(name, s.timestamps.tolist(), {c: s.columns[c].tolist() for c in schema.VALUE_COLUMNS})
        cut = len(s) // 3
        for part in (slice(0, cut), slice(cut, 2 * cut), slice(2 * cut, None)):  # appended in pieces
            b.append_steps(name, s.timestamps[part], {c: s.columns[c][part] for c in schema.VALUE_COLUMNS})
    exprs = [increase_query(sel, w) for sel in (
        'llm_proxy_requests_total{outcome="ok"}', 'llm_proxy_requests_total{backend="databricks",outcome="server_error"}',
        'llm_proxy_request_duration_seconds_bucket{le="0.5"}', "llm_proxy_request_duration_seconds_sum")
        for w in (300, 3600, 21600)]
    for at in (START + 3000, START + 4000, START + 6 * 3600):
        assert a.query_many(exprs, at) == b.query_many(exprs, at)
    # Not an append (a step already stored): the general path adds it, totals stay consistent.
    s = series["internal"]
    b.append_steps("internal", s.timestamps[:2], {"req_ok": [1.0, 1.0]})
    assert b.totals("internal", int(s.timestamps[-1]))["req_ok"] == a.totals("internal", int(s.timestamps[-1]))["req_ok"] + 2
    a.close()
    b.close()
