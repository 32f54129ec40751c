"""opsctl.quality.push.pushgateway: the text exposition it writes and the PUT to a loopback Pushgateway."""

from __future__ import annotations

import math

import pytest

from opsctl.errors import OpsctlError
from opsctl.quality.push.base import Sample
from opsctl.quality.push.pushgateway import PushgatewaySink, exposition
from tests.conftest import free_port
from tests.fakes.loopback import LoopbackServer, Response
from tests.fakes.pushgateway_fake import PushgatewayFake, check_exposition


def test_gauges_are_grouped_by_name_with_help_type_and_escaped_labels():
    samples = [
        Sample("opsctl_probe_exact_match_ratio", 0.75, {"backend": "internal", "reference": "golden"}),
        Sample("zz_unknown_gauge", 3, {}),
        Sample("opsctl_probe_exact_match_ratio", 1.0, {"reference": 'say "hi"\\\n', "backend": "databricks"}),
    ]
    body = exposition(samples)
    assert body == (
        "# HELP opsctl_probe_exact_match_ratio Share of golden prompts answered exactly like the reference"
        " (golden file or another backend).\n"
        "# TYPE opsctl_probe_exact_match_ratio gauge\n"
        'opsctl_probe_exact_match_ratio{backend="internal",reference="golden"} 0.75\n'
        'opsctl_probe_exact_match_ratio{backend="databricks",reference="say \\"hi\\"\\\\\\n"} 1.0\n'
        "# TYPE zz_unknown_gauge gauge\n"  # no HELP for a name opsctl does not document
        "zz_unknown_gauge 3.0\n"
    )
    assert check_exposition(body) == []


def test_special_values_are_written_as_prometheus_spells_them():
    body = exposition([Sample("g", math.nan, {"k": "a"}), Sample("g", math.inf, {"k": "b"}),
                       Sample("g", -math.inf, {"k": "c"})])
    assert body.splitlines()[1:] == ['g{k="a"} NaN', 'g{k="b"} +Inf', 'g{k="c"} -Inf']


def test_a_push_replaces_the_group_named_by_job_and_grouping_labels():
    with PushgatewayFake() as gateway:
        sink = PushgatewaySink(gateway.url + "/", job="probe/consistency", grouping={"service": "llm inference"},
                               timeout=5)
        assert sink.description == f"Pushgateway {gateway.url}/metrics/job/probe%2Fconsistency/service/llm%20inference"
        sink.push([Sample("opsctl_probe_cases", 12, {})], at=1_795_000_000)
        sink.push([Sample("opsctl_probe_cases", 14, {})], at=1_795_000_060)
        (request_path,) = gateway.groups
        assert request_path == "/metrics/job/probe%2Fconsistency/service/llm%20inference"
        assert gateway.groups[request_path].splitlines()[-1] == "opsctl_probe_cases 14.0"
        assert [r.method for r in gateway.requests] == ["PUT", "PUT"]
        assert gateway.requests[0].headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"


class Refusing(LoopbackServer):
    def handle(self, request):
        return Response(400, b"text format parsing error in line 1:\n  unexpected end of input\n")


def test_a_refused_push_is_an_error_with_the_status_and_the_gateways_reason_on_one_line():
    with Refusing() as gateway:
        sink = PushgatewaySink(gateway.url, job="probe", timeout=5)
        with pytest.raises(OpsctlError) as err:
            sink.push([Sample("g", 1, {})], at=0)
    message = str(err.value)
    assert "refused the push (HTTP 400: text format parsing error in line 1: unexpected end of input)" in message
    assert "\n" not in message


def test_an_unreachable_gateway_is_an_error_with_a_hint():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    sink = PushgatewaySink(url, job="probe", timeout=2)
    with pytest.raises(OpsctlError) as err:
        sink.push([Sample("g", 1, {})], at=0)
    assert f"cannot push to {url}/metrics/job/probe: ConnectionRefusedError" in str(err.value)
    assert "pushgateway_url" in (err.value.hint or "")


def test_a_gateway_trickling_its_answer_cannot_hold_the_push_past_its_timeout():
    # Headers at once, then a byte every 0.05 s: no single read times out; the answer takes 5 s.
    import time

    from tests.fakes.slow_http import TrickleServer

    with TrickleServer(interval=0.05, body=b" " * 100) as gateway:
        sink = PushgatewaySink(gateway.url, job="probe", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(OpsctlError, match="did not answer within 0.5s"):
            sink.push([Sample("g", 1, {})], at=0)
        elapsed = time.monotonic() - started
    assert elapsed < 2.5  # half the 5 s the whole answer takes
    assert [r.method for r in gateway.requests] == ["PUT"]
