"""opsctl.quality.push.nop: the dry run's sink keeps what would have been pushed and writes nothing."""

from __future__ import annotations

from opsctl.quality.push.base import Sample
from opsctl.quality.push.nop import NopSink


def test_the_nop_sink_keeps_every_sample_in_order_and_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sink = NopSink()
    first, second = [Sample("a", 1, {"x": "1"})], [Sample("b", 2), Sample("a", 3)]
    sink.push(first, at=10)
    sink.push(second, at=20)
    assert sink.pushed == first + second
    assert sink.description == "nowhere (dry run)"
    assert list(tmp_path.iterdir()) == []
