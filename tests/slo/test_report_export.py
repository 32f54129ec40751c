"""`opsctl slo report --cross-check` and `--export`: slo-generator is loaded only when asked, and its
own exporters publish its reports to loopback servers that speak the real protocols (a Pushgateway
taking POST pushes in the text format, a CloudEvents receiver taking structured-mode JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from urllib.parse import unquote

import pytest

from opsctl.metrics.embedded import EmbeddedStore
from tests.cli.inprocess import invoke
from tests.conftest import REPO, write_config
from tests.fakes.loopback import LoopbackServer, Request, Response
from tests.fakes.pushgateway_fake import PushgatewayFake, check_exposition
from tests.slo import data as d

END = 1_795_000_000
STEPS = 8640  # one day of 10 s steps
ERROR_SHARE = 0.001  # 8 of 8000 requests per step fail
SLO_FILE = REPO / "slos" / "databricks-availability.yaml"
SLO = "llm-inference-databricks-availability"
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "period")
METRICS = ("error_budget_burn_rate", "alerting_burn_rate_threshold", "events_count", "sli_measurement", "slo_target")


@pytest.fixture
def env(tmp_path):
    cfg = write_config(tmp_path)
    store = EmbeddedStore.open(tmp_path / "state" / "metrics.sqlite", create=True)
    d.write(store, {"databricks": d.make_traffic(END, STEPS, 8000, error_share=ERROR_SHARE),
                    "internal": d.make_traffic(END, STEPS, 2000)})
    store.close()
    return tmp_path, cfg


def expected_sli() -> float:
    """Every window lies inside the one day of data, and each step has 8 errors in 8000."""
    return round(1 - 8 / 8000, 6)


class CloudEventReceiver(LoopbackServer):
    """Structured-mode CloudEvents over HTTP: `application/cloudevents+json`, spec 1.0 attributes."""

    def __init__(self, status: int = 200):
        super().__init__()
        self.status = status
        self.events: list[dict] = []
        self.auth: list[str | None] = []

    def handle(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(405)
        if not request.headers.get("content-type", "").startswith("application/cloudevents+json"):
            return Response(415, b"structured cloudevents expected\n")
        event = request.json()
        missing = [k for k in ("specversion", "id", "source", "type") if not event.get(k)]
        if missing or event["specversion"] != "1.0":
            return Response(400, f"missing attributes {missing}\n".encode())
        with self.lock:
            self.events.append(event)
            self.auth.append(request.headers.get("authorization"))
        return Response(self.status)


def exporters_file(tmp_path, text: str):
    path = tmp_path / "exporters.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def group_labels(path: str) -> dict[str, str]:
    parts = [unquote(p) for p in path.split("/")[3:]]  # /metrics/job/<job>/<label>/<value>...
    return dict(zip(parts[1::2], parts[2::2])) | {"job": parts[0]}


def test_plain_report_never_imports_slo_generator(env):
    tmp_path, cfg = env
    code = textwrap.dedent(f"""\
        import sys
        from opsctl.cli.main import main
        try:
            main(["--config", {str(cfg)!r}, "slo", "report", {str(SLO_FILE)!r}, "-o", "json"])
        except SystemExit as exc:
            assert not exc.exit_code, exc.exit_code
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("slo_generator", "prometheus_http_client")))
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_cross_check_and_export_need_no_pkg_resources(env):
    """slo-generator's library (not its CLI) runs without pkg_resources, as under setuptools 82."""
    tmp_path, cfg = env
    with CloudEventReceiver() as receiver:
        path = exporters_file(tmp_path, f"exporters: {{cloudevent: {{service_url: {receiver.url}}}}}\n")
        code = textwrap.dedent(f"""\
            import sys
            sys.modules["pkg_resources"] = None  # `import pkg_resources` fails
            from opsctl.cli.main import main
            main(["--config", {str(cfg)!r}, "slo", "report", {str(SLO_FILE)!r}, "--cross-check",
                  "--export", {str(path)!r}])
            """)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert len(receiver.events) == len(WINDOWS)


def test_cross_check_agrees_with_slo_generator_and_reports_the_same_figures(env):
    tmp_path, cfg = env
    plain = invoke("--config", cfg, "slo", "report", SLO_FILE, "-o", "json")
    checked = invoke("--config", cfg, "slo", "report", SLO_FILE, "--cross-check", "-o", "json")
    assert plain.exit_code == 0 and checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout) == json.loads(plain.stdout)
    assert round(json.loads(checked.stdout)[0]["sli"], 6) == expected_sli()


def test_export_pushes_every_window_of_every_slo_to_the_pushgateway(env):
    tmp_path, cfg = env
    with PushgatewayFake() as gateway:
        path = exporters_file(tmp_path, f"""\
            exporters:
              prometheus:
                url: {gateway.url}
                job: opsctl-slo
            """)
        result = invoke("--config", cfg, "slo", "report", SLO_FILE, "--export", path, "-o", "json")
        assert result.exit_code == 0, result.output
        assert "exported 8 slo-generator reports" in result.stderr
        groups = dict(gateway.groups)
    assert gateway.pushes == len(WINDOWS) * len(METRICS)  # one push per metric per report
    seen = {}
    for path, body in groups.items():
        assert check_exposition(body) == []
        labels = group_labels(path)
        assert labels["job"] == "opsctl-slo"
        assert labels["slo_name"] == "availability" and labels["feature_name"] == "databricks"
        for line in body.splitlines():
            if line.startswith("sli_measurement{"):
                seen[labels["error_budget_policy_step_name"]] = float(line.rsplit(" ", 1)[1])
    assert set(seen) == set(WINDOWS)
    assert all(value == pytest.approx(expected_sli(), abs=1e-9) for value in seen.values())


def test_export_posts_one_cloudevent_per_report_with_the_token_from_the_environment(env):
    tmp_path, cfg = env
    with CloudEventReceiver() as receiver:
        path = exporters_file(tmp_path, f"""\
            exporters:
              cloudevent/ops:
                service_url: {receiver.url}/slo
                auth: {{token: "${{SLO_RECEIVER_TOKEN}}"}}
            """)
        result = invoke("--config", cfg, "slo", "report", SLO_FILE, "--export", path,
                        env={"SLO_RECEIVER_TOKEN": "s3cret-token"})
        assert result.exit_code == 0, result.output
        events = list(receiver.events)
        auth = set(receiver.auth)
    assert "s3cret-token" not in result.output
    assert auth == {"Bearer s3cret-token"}
    assert len(events) == len(WINDOWS)
    assert {e["type"] for e in events} == {"com.google.slo_generator.slo_report"}
    by_window = {e["data"]["error_budget_policy_step_name"]: e["data"] for e in events}
    assert set(by_window) == set(WINDOWS)
    assert {r["metadata"]["name"] for r in by_window.values()} == {SLO}
    assert by_window["period"]["sli_measurement"] == pytest.approx(expected_sli(), abs=1e-9)
    assert by_window["1h"]["good_events_count"] == 360 * 7992  # 360 steps of 8000 with 8 errors


def test_default_exporters_choose_among_the_configured_ones(env):
    tmp_path, cfg = env
    with CloudEventReceiver() as receiver:
        path = exporters_file(tmp_path, f"""\
            backends: {{prometheus: {{url: http://127.0.0.1:9}}}}   # slo-generator's section, ignored
            exporters:
              cloudevent: {{service_url: {receiver.url}}}
              prometheus: {{url: http://127.0.0.1:9}}
            default_exporters: [cloudevent]
            """)
        result = invoke("--config", cfg, "slo", "report", SLO_FILE, "--export", path)
        assert result.exit_code == 0, result.output
        assert len(receiver.events) == len(WINDOWS)
    assert "to cloudevent" in result.stderr


@pytest.mark.parametrize("text, problem", [
    ("exporters: {datadog: {api_key: x}}", "exporters.datadog: opsctl publishes through slo-generator's"),
    ("exporters: {prometheus: {job: x}}", "exporters.prometheus.url: required"),
    ("exporters: {prometheus: {url: 'http://127.0.0.1:9', passwrd: x}}", "exporters.prometheus.passwrd: unknown field"),
    ("exporters: {prometheus: {url: 'ftp://h'}}", "exporters.prometheus.url: expected an http:// or https:// URL"),
    ("exporters: {cloudevent: {service_url: 'http://h/${NOT_SET_ANYWHERE}'}}",
     "exporters.cloudevent.service_url: environment variable NOT_SET_ANYWHERE is not set"),
    ("exporters: {prometheus: {url: 'http://h'}}\ndefault_exporters: [pubsub]",
     "default_exporters: 'pubsub' is not under exporters:"),
    ("exporters: []", "exporters: expected a mapping"),
    ("exporters: {a: 1}\nexporters: {b: 2}", "duplicate key"),
])
def test_a_bad_exporters_file_is_exit_2_naming_file_and_key_before_any_query(env, text, problem):
    tmp_path, cfg = env
    path = exporters_file(tmp_path, text)
    result = invoke("--config", cfg, "slo", "report", SLO_FILE, "--export", path)
    assert result.exit_code == 2, result.output
    assert str(path) in result.stderr and problem in result.stderr
    assert "Traceback" not in result.output and result.stdout == ""


def test_an_exporter_refusing_the_report_is_exit_1_naming_exporter_slo_and_window(env):
    tmp_path, cfg = env
    with CloudEventReceiver(status=503) as receiver:
        path = exporters_file(tmp_path, f"exporters: {{cloudevent: {{service_url: {receiver.url}}}}}\n")
        result = invoke("--config", cfg, "slo", "report", SLO_FILE, "--export", path)
    assert result.exit_code == 1, result.output
    assert f"export of {SLO} over" in result.stderr and "through cloudevent failed" in result.stderr
    assert "503" in result.stderr and "Traceback" not in result.output
